package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	izk "github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/serving/datadef"
)

// ErrBadData reports a node whose data does not decode; the message names the node.
var ErrBadData = errors.New("serving/zk: malformed node data")

// LayoutEntry is one saved model of a layout with its deploy config.
type LayoutEntry struct {
	SavedModel datadef.SavedModel
	Config     datadef.SavedModelDeployConfig
}

// ServiceMap maps a model name to its sub-graphs and, for each, the service info of the
// containers bound to it (in binding-name order).
type ServiceMap map[string]map[string][]datadef.ContainerServiceInfo

// Backend is the reference's ZKBackend (§1.9) under one bzid: the v3 agent's data plane
// (layouts, bindings, service map, service info), agent_controller's operations (decl,
// pub, unpub, bzid_info) and the sync backend (SubscribeModel, SyncTargets). Its methods
// are safe for concurrent use; callbacks run on watch goroutines without any Backend lock
// held, so they may call the Backend.
type Backend struct {
	bzid   string
	c      *izk.Client
	logger *slog.Logger

	syncMu    sync.Mutex                                        // serialises SyncAvailableSavedModels
	available map[datadef.Container]map[datadef.SavedModel]bool // bindings written, per container

	mu        sync.Mutex
	layouts   map[string]*layout  // by layout path
	syncModel string              // SubscribeModel's model
	bindings  map[string]*binding // binding watches by model
	services  ServiceMap
}

// layout is a registered layout callback.
type layout struct {
	w      *izk.Watch      // nil while starting
	models map[string]bool // models in the last listing
}

// binding is a model's binding watch; a new one replaces it when the model re-enters the
// layout (S13), and a replaced watch's callbacks change nothing.
type binding struct{ w *izk.Watch } // w is nil while starting

// OpenBackend connects to ZooKeeper and returns the Backend of bzid; ctx bounds the wait
// for the first session. Close releases it.
func OpenBackend(ctx context.Context, bzid string, opts izk.Options) (*Backend, error) {
	if bzid == "" || strings.ContainsAny(bzid, "/") {
		return nil, fmt.Errorf("%w: bzid %q", izk.ErrInvalidArgument, bzid)
	}
	c, err := izk.Connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Backend{
		bzid:      bzid,
		c:         c,
		logger:    c.Logger().With("bzid", bzid),
		available: map[datadef.Container]map[datadef.SavedModel]bool{},
		layouts:   map[string]*layout{},
		bindings:  map[string]*binding{},
		services:  ServiceMap{},
	}, nil
}

// Client is the Backend's connection.
func (b *Backend) Client() *izk.Client { return b.c }

// Bzid is the Backend's namespace.
func (b *Backend) Bzid() string { return b.bzid }

// Close stops every watch and closes the connection, which removes the ephemeral nodes
// (service info, bindings). It is idempotent and returns nil.
func (b *Backend) Close() error { return b.c.Close() }

// checkSavedModel rejects names that would not round-trip through node names.
func checkSavedModel(sm datadef.SavedModel) error {
	if sm.ModelName == "" || sm.SubGraph == "" || strings.ContainsAny(sm.ModelName, "/:") || strings.ContainsAny(sm.SubGraph, "/:") {
		return fmt.Errorf("%w: saved model %q", izk.ErrInvalidArgument, sm.String())
	}
	return nil
}

func checkContainer(c datadef.Container) error {
	if c.Cluster == "" || strings.ContainsAny(c.Cluster, "/:") || c.ID == "" || strings.Contains(c.ID, "/") {
		return fmt.Errorf("%w: container %q", izk.ErrInvalidArgument, c.String())
	}
	return nil
}

// ---- service info ----

// ReportServiceInfo writes the container's service info to the ephemeral node
// /{bzid}/container_service/{container}; the node is re-created after a session expiry.
func (b *Backend) ReportServiceInfo(ctx context.Context, c datadef.Container, info datadef.ContainerServiceInfo) error {
	if err := checkContainer(c); err != nil {
		return err
	}
	return b.c.SetEphemeral(ctx, c.ServicePath(b.bzid), info.Serialize())
}

// GetServiceInfo reads a container's service info; ok is false when the node is missing.
// Data that does not decode is an error wrapping ErrBadData naming the node.
func (b *Backend) GetServiceInfo(ctx context.Context, c datadef.Container) (info datadef.ContainerServiceInfo, ok bool, err error) {
	path := c.ServicePath(b.bzid)
	data, _, err := b.c.Get(ctx, path)
	if errors.Is(err, izk.ErrNoNode) {
		return datadef.ContainerServiceInfo{}, false, nil
	}
	if err != nil {
		return datadef.ContainerServiceInfo{}, false, err
	}
	info, err = datadef.DeserializeContainerServiceInfo(data)
	if err != nil {
		return datadef.ContainerServiceInfo{}, false, fmt.Errorf("%w: %s: %w", ErrBadData, path, err)
	}
	return info, true, nil
}

// SyncAvailableSavedModels makes the container's ephemeral binding nodes
// /{bzid}/binding/{model}/{sub_graph}:{container} match models: nodes are created for
// models added since the last call and deleted for models gone. Failures are returned
// (joined) and retried by the next call; bindings lost with a session are re-created by
// the Client without waiting for a call.
func (b *Backend) SyncAvailableSavedModels(ctx context.Context, c datadef.Container, models []datadef.SavedModel) error {
	if err := checkContainer(c); err != nil {
		return err
	}
	want := map[datadef.SavedModel]bool{}
	for _, sm := range models {
		if err := checkSavedModel(sm); err != nil {
			return err
		}
		want[sm] = true
	}
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	have := b.available[c]
	if have == nil {
		have = map[datadef.SavedModel]bool{}
		b.available[c] = have
	}
	var add, remove []datadef.SavedModel
	for sm := range want {
		if !have[sm] {
			add = append(add, sm)
		}
	}
	for sm := range have {
		if !want[sm] {
			remove = append(remove, sm)
		}
	}
	byName := func(x, y datadef.SavedModel) int { return strings.Compare(x.String(), y.String()) }
	slices.SortFunc(add, byName)
	slices.SortFunc(remove, byName)
	if len(add)+len(remove) > 0 {
		b.logger.Info("available saved models updating", "container", c.String(), "add", add, "remove", remove)
	}
	var errs []error
	for _, sm := range add {
		if err := b.c.SetEphemeral(ctx, sm.BindingPath(b.bzid, c), []byte{}); err != nil {
			errs = append(errs, err)
			continue
		}
		have[sm] = true
	}
	for _, sm := range remove {
		if err := b.c.DeleteEphemeral(ctx, sm.BindingPath(b.bzid, c)); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(have, sm)
	}
	return errors.Join(errs...)
}

// ---- layouts and bindings ----

// RegisterLayoutCallback creates layoutPath if missing and calls cb with the layout's saved
// models and their deploy configs, in node-name order, at once and after every change of
// the layout, until cb returns false or Close. A layout node whose name is not
// model:sub_graph, whose saved model is not declared or whose config does not decode is
// left out with a log message naming the node. Before each call the service map is
// narrowed to the layouts' models (plus SubscribeModel's) and each of them gets a binding
// watch. cb runs on the layout's watch goroutine. It returns after the first call,
// bounded by ctx; a path that already has a running layout watch is an error.
func (b *Backend) RegisterLayoutCallback(ctx context.Context, layoutPath string, cb func([]LayoutEntry) bool) error {
	if err := izk.CheckPath(layoutPath); err != nil {
		return err
	}
	l := &layout{}
	b.mu.Lock()
	if old := b.layouts[layoutPath]; old != nil && (old.w == nil || !old.w.Stopped()) {
		b.mu.Unlock()
		return fmt.Errorf("%w: layout %s is already watched", izk.ErrInvalidArgument, layoutPath)
	}
	b.layouts[layoutPath] = l
	b.mu.Unlock()
	fail := func(err error) error {
		b.mu.Lock()
		if b.layouts[layoutPath] == l {
			delete(b.layouts, layoutPath)
		}
		b.mu.Unlock()
		return err
	}
	if err := b.c.EnsurePath(ctx, layoutPath); err != nil {
		return fail(err)
	}
	w, err := b.c.WatchChildrenRetry(ctx, layoutPath, func(wctx context.Context, children []string) (bool, error) {
		return b.onLayout(wctx, layoutPath, l, children, cb)
	})
	if err != nil {
		return fail(err)
	}
	b.mu.Lock()
	l.w = w
	b.mu.Unlock()
	return nil
}

// onLayout is the layout watch's callback.
func (b *Backend) onLayout(ctx context.Context, path string, l *layout, children []string, cb func([]LayoutEntry) bool) (bool, error) {
	b.logger.Info("layout updated", "layout", path, "children", children)
	var entries []LayoutEntry
	models := map[string]bool{}
	for _, child := range children {
		sm, err := datadef.ParseSavedModel(child)
		if err == nil {
			err = checkSavedModel(sm)
		}
		if err != nil {
			b.logger.Warn("ignoring a layout node", "znode", path+"/"+child, "err", err)
			continue
		}
		cfgPath := sm.Path(b.bzid)
		data, _, err := b.c.Get(ctx, cfgPath)
		if errors.Is(err, izk.ErrNoNode) {
			b.logger.Error("missing deploy config for a saved model in the layout", "znode", cfgPath, "layout", path)
			continue
		}
		if err != nil {
			return false, err
		}
		cfg, err := datadef.DeserializeSavedModelDeployConfig(data)
		if err != nil {
			b.logger.Error("ignoring a saved model with a malformed deploy config", "znode", cfgPath, "err", err)
			continue
		}
		entries = append(entries, LayoutEntry{SavedModel: sm, Config: cfg})
		models[sm.ModelName] = true
	}
	b.mu.Lock()
	if b.layouts[path] != l {
		b.mu.Unlock()
		return false, nil
	}
	l.models = models
	start, stop := b.reconcileLocked()
	b.mu.Unlock()
	for _, w := range stop {
		w.Stop()
	}
	if err := b.startBindings(ctx, start); err != nil {
		return false, err
	}
	return cb(entries), nil
}

// reconcileLocked narrows the service map and the binding watches to the wanted models
// (those of every layout, plus the subscribed one). It returns the watches to start (their
// placeholders are in b.bindings) and those to stop.
func (b *Backend) reconcileLocked() (start map[string]*binding, stop []*izk.Watch) {
	wanted := map[string]bool{}
	for _, l := range b.layouts {
		maps.Copy(wanted, l.models)
	}
	if b.syncModel != "" {
		wanted[b.syncModel] = true
	}
	for m := range b.services {
		if !wanted[m] {
			delete(b.services, m)
		}
	}
	for m, bw := range b.bindings {
		if !wanted[m] {
			delete(b.bindings, m)
			if bw.w != nil {
				stop = append(stop, bw.w)
			}
		}
	}
	start = map[string]*binding{}
	for m := range wanted {
		if b.services[m] == nil {
			b.services[m] = map[string][]datadef.ContainerServiceInfo{}
		}
		if bw := b.bindings[m]; bw == nil || (bw.w != nil && bw.w.Stopped()) {
			bw = &binding{}
			b.bindings[m] = bw
			start[m] = bw
		}
	}
	return start, stop
}

// startBindings starts the binding watches of start, each after ensuring
// /{bzid}/binding/{model}, and waits for their first calls.
func (b *Backend) startBindings(ctx context.Context, start map[string]*binding) error {
	var errs []error
	for _, m := range slices.Sorted(maps.Keys(start)) {
		bw := start[m]
		path := datadef.BindingsPath(b.bzid, m)
		err := b.c.EnsurePath(ctx, path)
		var w *izk.Watch
		if err == nil {
			w, err = b.c.WatchChildrenRetry(ctx, path, func(wctx context.Context, children []string) (bool, error) {
				return b.onBindings(wctx, m, bw, children)
			})
		}
		b.mu.Lock()
		switch {
		case err != nil:
			if b.bindings[m] == bw {
				delete(b.bindings, m)
			}
			errs = append(errs, err)
		case b.bindings[m] == bw:
			bw.w = w
		default:
			w.Stop()
		}
		b.mu.Unlock()
	}
	return errors.Join(errs...)
}

// onBindings is model m's binding watch callback: it rebuilds the model's service map
// entry, unless the watch was replaced or the model left.
func (b *Backend) onBindings(ctx context.Context, m string, bw *binding, children []string) (bool, error) {
	current := func() bool { return b.bindings[m] == bw }
	b.mu.Lock()
	ok := current()
	b.mu.Unlock()
	if !ok {
		return false, nil
	}
	subs := map[string][]datadef.ContainerServiceInfo{}
	incomplete := false // a bound container has no service info (yet)
	for _, child := range children {
		node := datadef.BindingsPath(b.bzid, m) + "/" + child
		sub, c, err := datadef.ParseBinding(child)
		if err != nil {
			b.logger.Warn("ignoring a binding node", "znode", node, "err", err)
			continue
		}
		info, ok, err := b.GetServiceInfo(ctx, c)
		switch {
		case errors.Is(err, ErrBadData):
			b.logger.Error("ignoring a binding", "znode", node, "err", err)
			continue
		case err != nil:
			return false, err
		case !ok:
			b.logger.Warn("no service info for a binding yet", "znode", node, "container", c.String())
			incomplete = true
			continue
		}
		subs[sub] = append(subs[sub], info)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !current() {
		return false, nil
	}
	b.services[m] = subs
	if incomplete {
		return true, izk.ErrIncomplete
	}
	return true, nil
}

// ServiceMap returns a copy of the service map.
func (b *Backend) ServiceMap() ServiceMap {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(ServiceMap, len(b.services))
	for m, subs := range b.services {
		cp := make(map[string][]datadef.ContainerServiceInfo, len(subs))
		for sg, infos := range subs {
			cp[sg] = slices.Clone(infos)
		}
		out[m] = cp
	}
	return out
}

// ---- sync backend ----

// SubscribeModel adds model to the service map and watches its bindings, for SyncTargets.
// One model per Backend: the same name again only restarts a watch that ended; another
// name is an error.
func (b *Backend) SubscribeModel(ctx context.Context, model string) error {
	if model == "" || strings.ContainsAny(model, "/:") {
		return fmt.Errorf("%w: model %q", izk.ErrInvalidArgument, model)
	}
	b.mu.Lock()
	if b.syncModel != "" && b.syncModel != model {
		b.mu.Unlock()
		return fmt.Errorf("%w: already subscribed to model %q", izk.ErrInvalidArgument, b.syncModel)
	}
	b.syncModel = model
	start, stop := b.reconcileLocked()
	b.mu.Unlock()
	for _, w := range stop {
		w.Stop()
	}
	return b.startBindings(ctx, start)
}

// SyncTargets returns "{model}:{subGraph}" for the subscribed model and the gRPC addresses
// of the containers bound to that sub-graph (null addresses left out). Without a
// subscribed model it fails.
func (b *Backend) SyncTargets(subGraph string) (string, []string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.syncModel == "" {
		return "", nil, fmt.Errorf("%w: no model subscribed", izk.ErrInvalidArgument)
	}
	var targets []string
	for _, info := range b.services[b.syncModel][subGraph] {
		if g, ok := info.GRPC.Get(); ok {
			targets = append(targets, g)
		}
	}
	return b.syncModel + ":" + subGraph, targets, nil
}

// ---- controller operations ----

// ListSavedModels returns the declared sub-graphs of model in name order (none when the
// model has no node).
func (b *Backend) ListSavedModels(ctx context.Context, model string) ([]datadef.SavedModel, error) {
	if model == "" || strings.ContainsAny(model, "/:") {
		return nil, fmt.Errorf("%w: model %q", izk.ErrInvalidArgument, model)
	}
	subs, err := b.c.Children(ctx, datadef.SavedModelsPath(b.bzid, model))
	if errors.Is(err, izk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]datadef.SavedModel, len(subs))
	for i, s := range subs {
		out[i] = datadef.SavedModel{ModelName: model, SubGraph: s}
	}
	return out, nil
}

// DeclSavedModel writes cfg's JSON to the persistent node /{bzid}/saved_models/{model}/
// {sub_graph}, creating it and its parents or overwriting it.
func (b *Backend) DeclSavedModel(ctx context.Context, sm datadef.SavedModel, cfg datadef.SavedModelDeployConfig) error {
	if err := checkSavedModel(sm); err != nil {
		return err
	}
	b.logger.Info("declaring a saved model", "saved_model", sm.String(), "config", string(cfg.Serialize()))
	return b.c.CreateOrSet(ctx, sm.Path(b.bzid), cfg.Serialize())
}

// AddToLayout creates the empty node {layoutPath}/{model}:{sub_graph} (and the layout).
func (b *Backend) AddToLayout(ctx context.Context, layoutPath string, sm datadef.SavedModel) error {
	if err := checkSavedModel(sm); err != nil {
		return err
	}
	if err := izk.CheckPath(layoutPath); err != nil {
		return err
	}
	return b.c.EnsurePath(ctx, sm.LayoutNodePath(layoutPath))
}

// RemoveFromLayout deletes {layoutPath}/{model}:{sub_graph}; a missing node is not an
// error.
func (b *Backend) RemoveFromLayout(ctx context.Context, layoutPath string, sm datadef.SavedModel) error {
	if err := checkSavedModel(sm); err != nil {
		return err
	}
	if err := izk.CheckPath(layoutPath); err != nil {
		return err
	}
	err := b.c.Delete(ctx, sm.LayoutNodePath(layoutPath), false)
	if errors.Is(err, izk.ErrNoNode) {
		return nil
	}
	return err
}
