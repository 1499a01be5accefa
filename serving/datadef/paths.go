package datadef

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Base paths of the per-bzid trees. Each is "/{bzid}/{tree}" with no trailing '/'.

// PortalBasePath returns "/{bzid}/portal", the parent of ModelMeta nodes.
func PortalBasePath(bzid string) string { return "/" + bzid + "/portal" }

// PublishBasePath returns "/{bzid}/publish", the parent of PublishMeta nodes.
func PublishBasePath(bzid string) string { return "/" + bzid + "/publish" }

// ResourceBasePath returns "/{bzid}/resource", the parent of ResourceSpec nodes.
func ResourceBasePath(bzid string) string { return "/" + bzid + "/resource" }

// ServiceBasePath returns "/{bzid}/service", the root of ReplicaMeta nodes.
func ServiceBasePath(bzid string) string { return "/" + bzid + "/service" }

// SavedModelsPath returns "/{bzid}/saved_models/{model}", whose children are the
// model's declared sub-graphs.
func SavedModelsPath(bzid, model string) string { return "/" + bzid + "/saved_models/" + model }

// LayoutPath returns a v3 agent's layout path for layout_pattern: the pattern itself
// when it is absolute, else "/{bzid}/layouts/{pattern}".
func LayoutPath(bzid, pattern string) string {
	if strings.HasPrefix(pattern, "/") {
		return pattern
	}
	return "/" + bzid + "/layouts/" + pattern
}

// BindingsPath returns "/{bzid}/binding/{model}", whose children are the model's
// bindings "{sub_graph}:{ctx_cluster}:{ctx_id}".
func BindingsPath(bzid, model string) string { return "/" + bzid + "/binding/" + model }

// EntryReplicaNode returns the v1 name of an entry replica node: the replica id as 11
// zero-padded digits ("{id:011d}"), or "0", the prefix ZooKeeper extends into a
// sequential name, when the id is -1 (not yet assigned).
func EntryReplicaNode(replicaID int64) string {
	if replicaID == -1 {
		return "0"
	}
	return fmt.Sprintf("%011d", replicaID)
}

// SavedModel names one sub-graph of an exported model; it prints as
// "{model_name}:{sub_graph}", the name of its layout node.
type SavedModel struct {
	ModelName string
	SubGraph  string
}

// String returns "{model_name}:{sub_graph}".
func (s SavedModel) String() string { return s.ModelName + ":" + s.SubGraph }

// Path returns the node holding its SavedModelDeployConfig:
// "/{bzid}/saved_models/{model_name}/{sub_graph}".
func (s SavedModel) Path(bzid string) string {
	return SavedModelsPath(bzid, s.ModelName) + "/" + s.SubGraph
}

// LayoutNodePath returns "{layoutPath}/{model_name}:{sub_graph}".
func (s SavedModel) LayoutNodePath(layoutPath string) string { return layoutPath + "/" + s.String() }

// BindingPath returns "/{bzid}/binding/{model_name}/{sub_graph}:{container}".
func (s SavedModel) BindingPath(bzid string, c Container) string {
	return BindingsPath(bzid, s.ModelName) + "/" + s.SubGraph + ":" + c.String()
}

// ErrName reports a node name that lacks the ':'-separated parts it must have.
var ErrName = errors.New("serving/datadef: malformed node name")

// ParseSavedModel splits a layout node name "{model}:{sub_graph}" at its first ':'.
// (Python keeps only the text up to a second ':'; sub-graph names have none.)
func ParseSavedModel(name string) (SavedModel, error) {
	model, sub, ok := strings.Cut(name, ":")
	if !ok {
		return SavedModel{}, fmt.Errorf("%w: layout node %q has no ':'", ErrName, name)
	}
	return SavedModel{ModelName: model, SubGraph: sub}, nil
}

// Container names a serving container: ctx_cluster is "{psm};{idc};{cluster}" and
// ctx_id the pod name or host IP. It prints as "{ctx_cluster}:{ctx_id}".
type Container struct {
	Cluster string // ctx_cluster
	ID      string // ctx_id
}

// String returns "{ctx_cluster}:{ctx_id}".
func (c Container) String() string { return c.Cluster + ":" + c.ID }

// ServicePath returns "/{bzid}/container_service/{ctx_cluster}:{ctx_id}", the node
// holding its ContainerServiceInfo.
func (c Container) ServicePath(bzid string) string {
	return "/" + bzid + "/container_service/" + c.String()
}

// ParseContainer splits a container_service node name at its first ':'; the id keeps
// any further ':' (an IPv6 host IP), where Python would drop them.
func ParseContainer(name string) (Container, error) {
	cluster, id, ok := strings.Cut(name, ":")
	if !ok {
		return Container{}, fmt.Errorf("%w: container %q has no ':'", ErrName, name)
	}
	return Container{Cluster: cluster, ID: id}, nil
}

// ParseBinding splits a binding node name "{sub_graph}:{ctx_cluster}:{ctx_id}" at its
// first two ':'; the id keeps any further ':' (Python would drop them).
func ParseBinding(name string) (subGraph string, c Container, err error) {
	sub, rest, ok := strings.Cut(name, ":")
	if ok {
		c, err = ParseContainer(rest)
	}
	if !ok || err != nil {
		return "", Container{}, fmt.Errorf("%w: binding %q is not sub_graph:ctx_cluster:ctx_id", ErrName, name)
	}
	return sub, c, nil
}

// ---- ZKPath ----

// zkPathRE is the reference's service-path pattern in RE2 syntax. Python's \w and \d
// are Unicode-aware on str patterns, hence \p{L}\p{N}_ and \p{Nd}; Python's '$' also
// matches before one final newline, hence \n?\z.
var zkPathRE = regexp.MustCompile(`^/([-_0-9A-Za-z]+)/service/([-_0-9A-Za-z]+)` +
	`(?:/([-_0-9A-Za-z]+):([-_0-9A-Za-z]+))?` +
	`/([\p{L}\p{N}_]+):(\p{Nd}+)(?:/(\p{Nd}+))?\n?\z`)

// ErrZKPath reports a path that is not a replica service path.
var ErrZKPath = errors.New("serving/datadef: not a service path")

// ZKPath is a parsed replica service path
// "/{bzid}/service/{base_name}[/{idc}:{cluster}]/{server_type}:{index}[/{replica_id}]".
// Every part is kept as text; "" stands for Python's None (an absent optional part, or
// every part of a path that did not match).
type ZKPath struct {
	Bzid       string
	BaseName   string
	IDC        string
	Cluster    string
	ServerType string
	Index      string
	ReplicaID  string
}

// ParseZKPath parses path like the reference's ZKPath. A path that does not match
// (including "") yields the zero ZKPath, every part None as in Python, and an error
// wrapping ErrZKPath. Bzid, base name, idc and cluster are [-_0-9A-Za-z]+; the server
// type is Unicode word characters; index and replica id are Unicode decimal digits.
func ParseZKPath(path string) (ZKPath, error) {
	m := zkPathRE.FindStringSubmatch(path)
	if m == nil {
		return ZKPath{}, fmt.Errorf("%w: %q", ErrZKPath, path)
	}
	return ZKPath{Bzid: m[1], BaseName: m[2], IDC: m[3], Cluster: m[4], ServerType: m[5], Index: m[6], ReplicaID: m[7]}, nil
}

// Task returns "{server_type}:{index}", or "" when either is absent.
func (p ZKPath) Task() string {
	if p.ServerType == "" || p.Index == "" {
		return ""
	}
	return p.ServerType + ":" + p.Index
}

// Location returns "{idc}:{cluster}", or "" when either is absent.
func (p ZKPath) Location() string {
	if p.IDC == "" || p.Cluster == "" {
		return ""
	}
	return p.IDC + ":" + p.Cluster
}

// ShipIn reports whether the path belongs to data center idc and cluster: true when
// either argument is "" (Python's None), else whether both equal the path's.
func (p ZKPath) ShipIn(idc, cluster string) bool {
	if idc == "" || cluster == "" {
		return true
	}
	return idc == p.IDC && cluster == p.Cluster
}

// TaskPath returns the path without its replica level:
// "/{bzid}/service/{base_name}[/{idc}:{cluster}]/{server_type}:{index}". The location
// level is written when IDC or Cluster is set.
func (p ZKPath) TaskPath() string {
	var b strings.Builder
	b.WriteString(ServiceBasePath(p.Bzid))
	b.WriteString("/")
	b.WriteString(p.BaseName)
	if p.IDC != "" || p.Cluster != "" {
		b.WriteString("/" + p.IDC + ":" + p.Cluster)
	}
	b.WriteString("/" + p.ServerType + ":" + p.Index)
	return b.String()
}

// String returns the path the parts describe: TaskPath plus "/{replica_id}" when
// ReplicaID is set. For a ZKPath from ParseZKPath it is the parsed path (less a final
// newline).
func (p ZKPath) String() string {
	if p.ReplicaID == "" {
		return p.TaskPath()
	}
	return p.TaskPath() + "/" + p.ReplicaID
}

// ReplicaPath returns the service path of a v1 replica: "/{bzid}/service/{base_name}",
// then "/{location}" when location ("{idc}:{cluster}", dc_aware only) is not "", then
// "/{server_type}:{task}/{node}", where node is EntryReplicaNode(replicaID) for the
// "entry" server type and the decimal replica id otherwise.
func ReplicaPath(bzid, baseName, location, serverType string, task, replicaID int64) string {
	node := strconv.FormatInt(replicaID, 10)
	if serverType == "entry" {
		node = EntryReplicaNode(replicaID)
	}
	prefix := ServiceBasePath(bzid) + "/" + baseName
	if location != "" {
		prefix += "/" + location
	}
	return prefix + "/" + serverType + ":" + strconv.FormatInt(task, 10) + "/" + node
}
