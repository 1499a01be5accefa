package zk

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	izk "github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/serving/datadef"
)

// BzidInfo is the reference's bzid_info(): what ZooKeeper holds under one bzid. JSON
// renders it as agent_controller prints it.
type BzidInfo struct {
	Models     map[string]*ModelInfo                // model_info, by model name
	Containers map[string]map[string]*ContainerInfo // container_info, by ctx_cluster then ctx_id
	Layouts    map[string][]string                  // layout_info: sorted children of /{bzid}/layouts/{layout}
}

// ModelInfo is one model of BzidInfo.
type ModelInfo struct {
	// SubGraphsTotal is the number of declared sub-graphs; null when the model has
	// bindings but no saved_models node.
	SubGraphsTotal datadef.Null[int64]
	// SubGraphsAvailable is the number of sub-graphs with at least one binding; the key
	// is left out when it is 0.
	SubGraphsAvailable int64
	SubGraphs          map[string]*SubGraphInfo
}

// SubGraphInfo is one sub-graph of a ModelInfo.
type SubGraphInfo struct {
	DeployConfig datadef.Null[string] // the node's raw JSON text; null when not declared
	Bindings     []string             // "{ctx_cluster}:{ctx_id}"; nil (key left out) when none
}

// ContainerInfo is one container of BzidInfo.
type ContainerInfo struct {
	ServiceInfo datadef.Null[string] // the node's raw JSON text; null without a node
	SavedModels []string             // "{model}:{sub_graph}" bound there; nil (key left out) when none
}

// BzidInfo reads the saved models, container services, layouts and bindings of the
// bzid. Nodes that vanish while it reads are left out; child names that do not parse are
// left out with a warning.
func (b *Backend) BzidInfo(ctx context.Context) (*BzidInfo, error) {
	info := &BzidInfo{Models: map[string]*ModelInfo{}, Containers: map[string]map[string]*ContainerInfo{}, Layouts: map[string][]string{}}
	root := "/" + b.bzid
	model := func(name string) *ModelInfo {
		m := info.Models[name]
		if m == nil {
			m = &ModelInfo{SubGraphs: map[string]*SubGraphInfo{}}
			info.Models[name] = m
		}
		return m
	}
	sub := func(m *ModelInfo, name string) *SubGraphInfo {
		s := m.SubGraphs[name]
		if s == nil {
			s = &SubGraphInfo{}
			m.SubGraphs[name] = s
		}
		return s
	}
	container := func(c datadef.Container) *ContainerInfo {
		byID := info.Containers[c.Cluster]
		if byID == nil {
			byID = map[string]*ContainerInfo{}
			info.Containers[c.Cluster] = byID
		}
		ci := byID[c.ID]
		if ci == nil {
			ci = &ContainerInfo{}
			byID[c.ID] = ci
		}
		return ci
	}
	// children lists path; a missing node has none.
	children := func(path string) ([]string, error) {
		ch, err := b.c.Children(ctx, path)
		if errors.Is(err, izk.ErrNoNode) {
			return nil, nil
		}
		return ch, err
	}
	// text reads path as text; ok is false for a missing node.
	text := func(path string) (string, bool, error) {
		data, _, err := b.c.Get(ctx, path)
		if errors.Is(err, izk.ErrNoNode) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		return string(data), true, nil
	}

	models, err := children(root + "/saved_models")
	if err != nil {
		return nil, err
	}
	for _, name := range models {
		subs, err := b.c.Children(ctx, root+"/saved_models/"+name)
		if errors.Is(err, izk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		m := model(name)
		m.SubGraphsTotal = datadef.Some(int64(len(subs)))
		for _, sg := range subs {
			t, ok, err := text(root + "/saved_models/" + name + "/" + sg)
			if err != nil {
				return nil, err
			}
			if ok {
				sub(m, sg).DeployConfig = datadef.Some(t)
			}
		}
	}

	names, err := children(root + "/container_service")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		path := root + "/container_service/" + name
		c, err := datadef.ParseContainer(name)
		if err != nil {
			b.logger.Warn("bzid info: ignoring a container node", "znode", path, "err", err)
			continue
		}
		t, ok, err := text(path)
		if err != nil {
			return nil, err
		}
		if ok {
			container(c).ServiceInfo = datadef.Some(t)
		}
	}

	layouts, err := children(root + "/layouts")
	if err != nil {
		return nil, err
	}
	for _, name := range layouts {
		sms, err := b.c.Children(ctx, root+"/layouts/"+name)
		if errors.Is(err, izk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		info.Layouts[name] = append([]string{}, sms...)
	}

	bound, err := children(root + "/binding")
	if err != nil {
		return nil, err
	}
	for _, name := range bound {
		bindings, err := children(root + "/binding/" + name)
		if err != nil {
			return nil, err
		}
		for _, bname := range bindings {
			sg, c, err := datadef.ParseBinding(bname)
			if err != nil {
				b.logger.Warn("bzid info: ignoring a binding node", "znode", root+"/binding/"+name+"/"+bname, "err", err)
				continue
			}
			m := model(name)
			s := sub(m, sg)
			if s.Bindings == nil {
				m.SubGraphsAvailable++
			}
			s.Bindings = append(s.Bindings, c.String())
			ci := container(c)
			ci.SavedModels = append(ci.SavedModels, name+":"+sg)
		}
	}
	return info, nil
}

// JSON returns the text agent_controller prints: Python's json.dumps(info, indent=2)
// (", " item separators become ",\n", ": " after keys, non-ASCII as \uXXXX escapes).
// Every dictionary has sorted keys; in the reference only the per-model and per-cluster
// ones do, the others following ZooKeeper's (unspecified) child order.
func (i *BzidInfo) JSON() []byte {
	var modelsObj jobject
	for _, name := range slices.Sorted(maps.Keys(i.Models)) {
		m := i.Models[name]
		var obj jobject
		for _, sg := range slices.Sorted(maps.Keys(m.SubGraphs)) {
			s := m.SubGraphs[sg]
			var so jobject
			if v, ok := s.DeployConfig.Get(); ok {
				so = append(so, jmember{"deploy_config", v})
			}
			if s.Bindings != nil {
				so = append(so, jmember{"bindings", s.Bindings})
			}
			obj = append(obj, jmember{sg, so})
		}
		if n, ok := m.SubGraphsTotal.Get(); ok {
			obj = append(obj, jmember{"sub_graphs_total", n})
		}
		if m.SubGraphsAvailable > 0 {
			obj = append(obj, jmember{"sub_graphs_available", m.SubGraphsAvailable})
		}
		slices.SortStableFunc(obj, func(a, b jmember) int { return strings.Compare(a.key, b.key) })
		modelsObj = append(modelsObj, jmember{name, obj})
	}
	var containersObj jobject
	for _, cluster := range slices.Sorted(maps.Keys(i.Containers)) {
		var obj jobject
		for _, id := range slices.Sorted(maps.Keys(i.Containers[cluster])) {
			ci := i.Containers[cluster][id]
			var co jobject
			if v, ok := ci.ServiceInfo.Get(); ok {
				co = append(co, jmember{"service_info", v})
			}
			if ci.SavedModels != nil {
				co = append(co, jmember{"saved_models", ci.SavedModels})
			}
			obj = append(obj, jmember{id, co})
		}
		containersObj = append(containersObj, jmember{cluster, obj})
	}
	var layoutsObj jobject
	for _, name := range slices.Sorted(maps.Keys(i.Layouts)) {
		layoutsObj = append(layoutsObj, jmember{name, i.Layouts[name]})
	}
	top := jobject{{"model_info", modelsObj}, {"container_info", containersObj}, {"layout_info", layoutsObj}}
	return appendIndented(nil, top, 0)
}

// jobject is an ordered JSON object; values are string, int64, []string or jobject.
type jobject []jmember

type jmember struct {
	key string
	val any
}

// appendIndented appends v as json.dumps(v, indent=2) writes it at nesting depth.
func appendIndented(b []byte, v any, depth int) []byte {
	nl := func(b []byte, d int) []byte {
		b = append(b, '\n')
		for range d {
			b = append(b, "  "...)
		}
		return b
	}
	switch v := v.(type) {
	case string:
		return appendPyString(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case []string:
		if len(v) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for k, s := range v {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendPyString(nl(b, depth+1), s)
		}
		return append(nl(b, depth), ']')
	case jobject:
		if len(v) == 0 {
			return append(b, "{}"...)
		}
		b = append(b, '{')
		for k, m := range v {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendPyString(nl(b, depth+1), m.key)
			b = append(b, ": "...)
			b = appendIndented(b, m.val, depth+1)
		}
		return append(nl(b, depth), '}')
	}
	return append(b, "null"...) // not built by JSON
}

// appendPyString appends s as Python's json.dumps writes a str with ensure_ascii: the
// short escapes \" \\ \n \r \t \b \f, other control characters and every non-ASCII
// character as \uXXXX (UTF-16 surrogate pairs above U+FFFF). Invalid UTF-8 becomes U+FFFD.
func appendPyString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r < 0x20 || (r > 0x7f && r < 0x10000):
			b = u(b, r)
		case r >= 0x10000:
			r -= 0x10000
			b = u(u(b, 0xd800+(r>>10)), 0xdc00+(r&0x3ff))
		default:
			b = append(b, byte(r))
		}
	}
	return append(b, '"')
}
