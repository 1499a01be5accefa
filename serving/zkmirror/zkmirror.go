// Package zkmirror is the v2-era ZKMirror and ServingClient (spec §1.14): a cache of the
// bzid's portal, publish, resource and service nodes kept by watches, the scheduler's
// publish/expected-loading logic, replica queries for AgentService v2, and the load /
// unload / status client of client.py.
//
// Decisions: S9, cache lookups match whole path segments ("/a/service/m1" never matches
// "/a/service/m10") and children come once each, sorted. Departures, pinned by tests:
// ephemeral nodes (resource, service) are serving/zk owned nodes, re-created after a
// session expiry; nodes whose JSON does not decode are skipped with a log line (the
// reference raised inside its watches); Election answers "not implemented" (kazoo's
// election recipe is not name-compatible with go-zookeeper; no v2 scheduler exists here).
package zkmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/zk"
)

// EventType says which watch queued an Event.
type EventType int

// Event types (data_def.EventType; UNKNOWN is an alias of PORTAL there).
const (
	EventPortal   EventType = 1
	EventService  EventType = 2
	EventPublish  EventType = 3
	EventResource EventType = 4
)

// Event is one queued change for the scheduler.
type Event struct {
	Path string
	Data []byte
	Type EventType
}

// Options configure a Mirror.
type Options struct {
	// TCEShardID is the host's shard (-1 for an entry deployment); NumTCEShard the number of
	// shards.
	TCEShardID, NumTCEShard int
	// ReplicaID is the host's replica (tce_replica_id: REPLICA_ID unless -1, else the
	// pod-name hash; see config.TCEReplicaID).
	ReplicaID int
	// LocalHost is this host's address (get_local_ip), used to find local replicas.
	LocalHost string
	// DeployType is the deployment; an entry deployment never runs an election.
	DeployType config.DeployType
	// Logger receives the mirror's messages (nil: discard).
	Logger *slog.Logger
}

// Mirror is the ZKMirror of one bzid.
type Mirror struct {
	client *zk.Client
	bzid   string
	opts   Options
	log    *slog.Logger

	resourcePath, portalPath, publishPath, servicePath string

	set  *zk.WatchSet
	mu   sync.Mutex
	data map[string][]byte

	qmu    sync.Mutex
	queue  []Event
	notify chan struct{}
}

// New makes the Mirror of bzid on client; Start installs its watches.
func New(client *zk.Client, bzid string, opts Options) *Mirror {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Mirror{
		client: client, bzid: bzid, opts: opts, log: log,
		resourcePath: datadef.ResourceBasePath(bzid), portalPath: datadef.PortalBasePath(bzid),
		publishPath: datadef.PublishBasePath(bzid), servicePath: datadef.ServiceBasePath(bzid),
		data: map[string][]byte{}, set: zk.NewWatchSet(client), notify: make(chan struct{}, 1),
	}
}

// ErrElectionNotImplemented is Election's answer.
var ErrElectionNotImplemented = errors.New("not implemented: ZKMirror election (kazoo's election recipe; no v2 scheduler in monolith-go)")

// Election is the reference's leader election: a no-op for an entry deployment, otherwise
// not implemented.
func (m *Mirror) Election() error {
	if m.opts.DeployType == config.DeployEntry {
		return nil
	}
	return ErrElectionNotImplemented
}

// Start installs the service watches and, unless isClient, the publish watches.
func (m *Mirror) Start(ctx context.Context, isClient bool) error {
	if err := m.WatchService(ctx); err != nil {
		return err
	}
	if !isClient {
		return m.WatchPublish(ctx)
	}
	return nil
}

// Stop ends every watch and clears the cache and the queue.
func (m *Mirror) Stop() {
	m.set.Stop()
	m.mu.Lock()
	m.data = map[string][]byte{}
	m.mu.Unlock()
	m.qmu.Lock()
	m.queue = nil
	m.qmu.Unlock()
}

// put queues an event (unbounded, as the reference's Queue).
func (m *Mirror) put(e Event) {
	m.qmu.Lock()
	m.queue = append(m.queue, e)
	m.qmu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// Next returns the oldest queued event, waiting for one until ctx ends.
func (m *Mirror) Next(ctx context.Context) (Event, error) {
	for {
		m.qmu.Lock()
		if len(m.queue) > 0 {
			e := m.queue[0]
			m.queue = m.queue[1:]
			m.qmu.Unlock()
			return e, nil
		}
		m.qmu.Unlock()
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-m.notify:
		}
	}
}

// Create writes a node, creating its parents; an existing node is overwritten. Ephemeral
// nodes are owned by the session (re-created after an expiry).
func (m *Mirror) Create(ctx context.Context, path string, value []byte, ephemeral bool) error {
	if ephemeral {
		return m.client.SetEphemeral(ctx, path, value)
	}
	return m.client.CreateOrSet(ctx, path, value)
}

// Set writes a node, creating it when missing.
func (m *Mirror) Set(ctx context.Context, path string, value []byte) error {
	return m.client.CreateOrSet(ctx, path, value)
}

// Exists asks ZooKeeper, and answers from the cache when ZooKeeper fails.
func (m *Mirror) Exists(ctx context.Context, path string) bool {
	ok, err := m.client.Exists(ctx, path)
	if err != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		_, ok = m.data[path]
	}
	return ok
}

// Delete deletes a node (recursively by default in the reference); a missing node is only
// logged.
func (m *Mirror) Delete(ctx context.Context, path string, recursive bool) error {
	err := m.client.Delete(ctx, path, recursive)
	if errors.Is(err, zk.ErrNoNode) {
		m.log.Info("delete: no node", "path", path)
		err = nil
	}
	if err != nil {
		return err
	}
	// Forget the node if this session owned it (it is gone, so nothing else happens).
	return m.client.DeleteEphemeral(ctx, path)
}

// Get answers a node's data from the cache.
func (m *Mirror) Get(path string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[path]
	return v, ok
}

// under reports whether p is path or below it, on whole segments (S9).
func under(p, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return p == path || strings.HasPrefix(p, path+"/")
}

// GetChildren answers the children of path from the cache: the next segment of every
// cached path below it, each once, sorted.
func (m *Mirror) GetChildren(path string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.childrenLocked(path)
}

func (m *Mirror) childrenLocked(path string) []string {
	path = strings.TrimSuffix(path, "/")
	seen := map[string]bool{}
	var out []string
	for p := range m.data {
		if !strings.HasPrefix(p, path+"/") {
			continue
		}
		c, _, _ := strings.Cut(p[len(path)+1:], "/")
		if c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// ReportResource writes the host's resource node (ephemeral).
func (m *Mirror) ReportResource(ctx context.Context, rs datadef.ResourceSpec) error {
	p, err := rs.Path(m.resourcePath)
	if err != nil {
		return err
	}
	return m.Create(ctx, p, rs.Serialize(), true)
}

// Resources decodes the cached resource nodes.
func (m *Mirror) Resources() []datadef.ResourceSpec {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []datadef.ResourceSpec
	for _, c := range m.childrenLocked(m.resourcePath) {
		rs, err := datadef.DeserializeResourceSpec(m.data[m.resourcePath+"/"+c])
		if err != nil {
			m.log.Warn("resource node does not decode", "node", c, "err", err)
			continue
		}
		out = append(out, rs)
	}
	return out
}

// PublishLoading writes each publish node whose cached bytes differ.
func (m *Mirror) PublishLoading(ctx context.Context, pms ...datadef.PublishMeta) error {
	for _, pm := range pms {
		p, err := pm.Path(m.publishPath)
		if err != nil {
			return err
		}
		v := pm.Serialize()
		if old, ok := m.Get(p); ok && string(old) == string(v) {
			continue
		}
		if err := m.Create(ctx, p, v, false); err != nil {
			return err
		}
	}
	return nil
}

// ExpectedLoading is what this host should load per model (§1.14): among the cached
// publish nodes of a model whose count reached total_publish_num, the one with the fewest
// sub-models (or this host's own node), LOAD only, rewritten for this host's shard and
// replica (keeping only entry sub-models when the shard differs).
func (m *Mirror) ExpectedLoading() map[string]datadef.PublishMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	counts := map[string]int64{}
	shortest := map[string]datadef.PublishMeta{}
	var selected []datadef.PublishMeta
	for _, node := range m.childrenLocked(m.publishPath) {
		pm, err := datadef.DeserializePublishMeta(m.data[m.publishPath+"/"+node])
		if err != nil {
			m.log.Warn("publish node does not decode", "node", node, "err", err)
			continue
		}
		parts := strings.Split(node, ":")
		if len(parts) != 3 {
			continue
		}
		model := parts[2]
		counts[model]++
		if s, ok := shortest[model]; !ok || len(s.SubModels.V) > len(pm.SubModels.V) {
			shortest[model] = pm
		}
		if counts[model] == pm.TotalPublishNum {
			selected = append(selected, shortest[model])
		}
	}
	shard, replica := int64(m.opts.TCEShardID), int64(m.opts.ReplicaID)
	expected := map[string]datadef.PublishMeta{}
	for _, pm := range selected {
		own := fmt.Sprintf("%s/%d:%d:%s", m.publishPath, shard, replica, pm.ModelName.V)
		if data, ok := m.data[own]; ok {
			if o, err := datadef.DeserializePublishMeta(data); err == nil {
				pm = o
			}
		}
		model := pm.ModelName.V
		if pm.PType != datadef.PublishLoad {
			continue
		}
		switch {
		case pm.ShardID.Valid && pm.ShardID.V == shard && pm.ReplicaID == replica:
			expected[model] = pm
		case pm.ShardID.Valid && pm.ShardID.V == shard && !pm.IsSpec:
			if _, ok := expected[model]; !ok {
				pm.ReplicaID = replica
				expected[model] = pm
			}
		default:
			if _, ok := expected[model]; !ok {
				pm.ShardID, pm.ReplicaID = datadef.Some(shard), replica
				var entry []datadef.SubModel
				for _, sm := range pm.SubModels.V {
					if strings.HasPrefix(sm.Name, "entry") {
						entry = append(entry, sm)
					}
				}
				if entry == nil {
					entry = []datadef.SubModel{}
				}
				pm.SubModels = datadef.Some(entry)
				expected[model] = pm
			}
		}
	}
	return expected
}

// LocalReplicaPaths lists the cached service nodes of this host: address host equal to
// LocalHost and replica equal to ReplicaID.
func (m *Mirror) LocalReplicaPaths() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for p, v := range m.data {
		if !under(p, m.servicePath) || p == m.servicePath {
			continue
		}
		rm, err := datadef.DeserializeReplicaMeta(v)
		if err != nil {
			continue
		}
		host, _, _ := strings.Cut(rm.Address.V, ":")
		if rm.Address.Valid && host == m.opts.LocalHost && rm.Replica == int64(m.opts.ReplicaID) {
			out[p] = true
		}
	}
	return out
}

// UpdateService makes this host's service nodes match replicas: local nodes not wanted are
// deleted, wanted nodes whose cached bytes differ are written (ephemeral).
func (m *Mirror) UpdateService(ctx context.Context, replicas []datadef.ReplicaMeta) error {
	want := map[string][]byte{}
	for _, rm := range replicas {
		p, err := rm.Path(m.bzid)
		if err != nil {
			return err
		}
		want[p] = rm.Serialize()
	}
	var errs []error
	for p := range m.LocalReplicaPaths() {
		if _, ok := want[p]; !ok {
			errs = append(errs, m.Delete(ctx, p, true))
		}
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if old, ok := m.Get(p); ok && string(old) == string(want[p]) {
			continue
		}
		errs = append(errs, m.Create(ctx, p, want[p], true))
	}
	return errors.Join(errs...)
}

// serviceNodes calls fn for every cached replica node {service}/{model}/{st}:{task}/{replica}
// whose replica is AVAILABLE, in path order.
func (m *Mirror) serviceNodes(fn func(model, st, task, replica string, rm datadef.ReplicaMeta)) {
	paths := make([]string, 0, len(m.data))
	for p := range m.data {
		if strings.HasPrefix(p, m.servicePath+"/") {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		parts := strings.Split(p[len(m.servicePath)+1:], "/")
		if len(parts) != 3 {
			continue
		}
		st, task, ok := strings.Cut(parts[1], ":")
		if !ok {
			continue
		}
		rm, err := datadef.DeserializeReplicaMeta(m.data[p])
		if err != nil || rm.Stat != datadef.ModelStateAvailable {
			continue
		}
		fn(parts[0], st, task, parts[2], rm)
	}
}

// GetAllReplicas maps "{model}:{server_type}:{task}" to the AVAILABLE replicas.
func (m *Mirror) GetAllReplicas(serverType string) map[string][]datadef.ReplicaMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]datadef.ReplicaMeta{}
	m.serviceNodes(func(model, st, task, _ string, rm datadef.ReplicaMeta) {
		if st == serverType {
			k := model + ":" + st + ":" + task
			out[k] = append(out[k], rm)
		}
	})
	return out
}

// GetModelReplicas maps "{model}:{server_type}:{task}" (the task node's name after the
// model) to the AVAILABLE replicas of one model.
func (m *Mirror) GetModelReplicas(model, serverType string) map[string][]datadef.ReplicaMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]datadef.ReplicaMeta{}
	m.serviceNodes(func(mo, st, task, _ string, rm datadef.ReplicaMeta) {
		if mo == model && st == strings.ToLower(serverType) {
			k := model + ":" + st + ":" + task
			out[k] = append(out[k], rm)
		}
	})
	return out
}

// GetTaskReplicas lists the AVAILABLE replicas of one task of a model.
func (m *Mirror) GetTaskReplicas(model, serverType string, task int) []datadef.ReplicaMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []datadef.ReplicaMeta
	m.serviceNodes(func(mo, st, t, _ string, rm datadef.ReplicaMeta) {
		if mo == model && st == strings.ToLower(serverType) && t == strconv.Itoa(task) {
			out = append(out, rm)
		}
	})
	return out
}

// GetReplica returns one AVAILABLE replica.
func (m *Mirror) GetReplica(model, serverType string, task, replica int) (datadef.ReplicaMeta, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var found datadef.ReplicaMeta
	var ok bool
	m.serviceNodes(func(mo, st, t, r string, rm datadef.ReplicaMeta) {
		if mo == model && st == strings.ToLower(serverType) && t == strconv.Itoa(task) && r == strconv.Itoa(replica) {
			found, ok = rm, true
		}
	})
	return found, ok
}

// watchTree watches path's children; each new child gets onChild (once).
func (m *Mirror) watchTree(ctx context.Context, path string, onChild func(ctx context.Context, child string)) error {
	if err := m.set.NewChildren(ctx, path, onChild); err != nil {
		return fmt.Errorf("serving/zkmirror: watch %s: %w", path, err)
	}
	return nil
}

// mirrorData keeps path's data in the cache (created, changed, deleted).
func (m *Mirror) mirrorData(ctx context.Context, path string) {
	err := m.set.Data(ctx, path, func(data []byte, _ *zk.Stat, ev zk.DataEvent) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		switch {
		case ev == zk.DataDeleted || data == nil:
			delete(m.data, path)
		default:
			m.data[path] = data
		}
		return true
	})
	m.logWatchErr(err, path)
}

func (m *Mirror) logWatchErr(err error, path string) {
	if err != nil && !errors.Is(err, zk.ErrClosed) {
		m.log.Warn("watch", "path", path, "err", err)
	}
}

// WatchService mirrors the model → task → replica tree under /{bzid}/service.
func (m *Mirror) WatchService(ctx context.Context) error {
	if err := m.client.EnsurePath(ctx, m.servicePath); err != nil {
		return fmt.Errorf("serving/zkmirror: %w", err)
	}
	return m.watchTree(ctx, m.servicePath, func(ctx context.Context, model string) {
		err := m.watchTree(ctx, model, func(ctx context.Context, task string) {
			if err := m.watchTree(ctx, task, m.mirrorData); err != nil && !errors.Is(err, zk.ErrNoNode) {
				m.log.Warn("watch task", "path", task, "err", err)
			}
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			m.log.Warn("watch model", "path", model, "err", err)
		}
	})
}

// WatchResource mirrors the resource nodes.
func (m *Mirror) WatchResource(ctx context.Context) error {
	if err := m.client.EnsurePath(ctx, m.resourcePath); err != nil {
		return fmt.Errorf("serving/zkmirror: %w", err)
	}
	return m.watchTree(ctx, m.resourcePath, m.mirrorData)
}

// publishCount counts the cached publish nodes of model.
func (m *Mirror) publishCount(model string) int64 {
	var n int64
	for p := range m.data {
		if strings.HasPrefix(p, m.publishPath+"/") && strings.HasSuffix(p, ":"+model) {
			n++
		}
	}
	return n
}

// WatchPublish caches the LOAD publish nodes and queues a PUBLISH event when a model's
// cached count is 0 or reaches total_publish_num.
func (m *Mirror) WatchPublish(ctx context.Context) error {
	if err := m.client.EnsurePath(ctx, m.publishPath); err != nil {
		return fmt.Errorf("serving/zkmirror: %w", err)
	}
	return m.watchTree(ctx, m.publishPath, func(ctx context.Context, path string) {
		err := m.set.Data(ctx, path, func(data []byte, _ *zk.Stat, ev zk.DataEvent) bool {
			m.mu.Lock()
			if len(data) == 0 {
				data = m.data[path]
			}
			if len(data) == 0 {
				m.mu.Unlock()
				return true
			}
			pm, err := datadef.DeserializePublishMeta(data)
			if err != nil {
				m.mu.Unlock()
				m.log.Warn("publish node does not decode", "path", path, "err", err)
				return true
			}
			switch ev {
			case zk.DataInitial, zk.DataCreated:
				if pm.PType == datadef.PublishLoad {
					m.data[path] = data
				} else {
					delete(m.data, path)
				}
			case zk.DataDeleted:
				delete(m.data, path)
			}
			n := m.publishCount(pm.ModelName.V)
			var e *Event
			if n == 0 || n == pm.TotalPublishNum {
				load, err := pm.Path(m.publishPath)
				if d, ok := m.data[load]; err == nil && ok {
					data = d
				}
				e = &Event{Path: path, Data: data, Type: EventPublish}
			}
			m.mu.Unlock()
			if e != nil {
				m.put(*e)
			}
			return true
		})
		m.logWatchErr(err, path)
	})
}

// WatchPortal first deletes publish nodes of models without a portal node, then queues a
// PORTAL event (a ModelMeta with action CREATED, DELETED or NONE) for each model's portal
// node on its first call and on creation and deletion.
func (m *Mirror) WatchPortal(ctx context.Context) error {
	for _, p := range []string{m.portalPath, m.publishPath} {
		if err := m.client.EnsurePath(ctx, p); err != nil {
			return fmt.Errorf("serving/zkmirror: %w", err)
		}
	}
	portal, err := m.client.Children(ctx, m.portalPath)
	if err != nil {
		return fmt.Errorf("serving/zkmirror: %w", err)
	}
	pubs, err := m.client.Children(ctx, m.publishPath)
	if err != nil {
		return fmt.Errorf("serving/zkmirror: %w", err)
	}
	inPortal := map[string]bool{}
	for _, p := range portal {
		inPortal[p] = true
	}
	for _, pub := range pubs {
		model := pub[strings.LastIndexByte(pub, ':')+1:]
		if !inPortal[model] {
			if err := m.Delete(ctx, m.publishPath+"/"+pub, true); err != nil {
				return err
			}
		}
	}
	return m.watchTree(ctx, m.portalPath, func(ctx context.Context, path string) {
		model := path[strings.LastIndexByte(path, '/')+1:]
		err := m.set.Data(ctx, path, func(data []byte, _ *zk.Stat, ev zk.DataEvent) bool {
			var action string
			switch {
			case ev == zk.DataInitial && data == nil:
				action = "DELETED"
			case ev == zk.DataInitial:
				action = "NONE"
			case ev == zk.DataCreated:
				action = "CREATED"
			case ev == zk.DataDeleted:
				action = "DELETED"
			default:
				return true
			}
			mm := datadef.NewModelMeta()
			if len(data) > 0 {
				var err error
				if mm, err = datadef.DeserializeModelMeta(data); err != nil {
					m.log.Warn("portal node does not decode", "path", path, "err", err)
					return true
				}
			} else {
				mm.ModelName = datadef.Some(model)
			}
			mm.Action = action
			m.put(Event{Path: path, Data: mm.Serialize(), Type: EventPortal})
			return true
		})
		m.logWatchErr(err, path)
	})
}

// LoadState is ServingClient.get_status's answer.
type LoadState struct {
	Portal  bool                          // the portal node exists
	Publish bool                          // some publish node of the model exists
	Service map[string]datadef.ModelState // "{task}:{replica}" → state
}

// ServingClient is client.py's ServingClient over a Mirror started as a client.
type ServingClient struct{ m *Mirror }

// NewServingClient wraps a Mirror.
func NewServingClient(m *Mirror) *ServingClient { return &ServingClient{m: m} }

// Load creates the model's portal node; an existing one is an error.
func (c *ServingClient) Load(ctx context.Context, mm datadef.ModelMeta) error {
	p, err := mm.Path(c.m.portalPath)
	if err != nil {
		return err
	}
	if c.m.Exists(ctx, p) {
		return fmt.Errorf("%s has exists", mm.ModelName.V)
	}
	return c.m.client.Create(ctx, p, mm.Serialize(), true)
}

// Unload deletes the model's portal node (a missing one is logged).
func (c *ServingClient) Unload(ctx context.Context, model string) error {
	p := c.m.portalPath + "/" + model
	if !c.m.Exists(ctx, p) {
		c.m.log.Warn("unload: model not loaded", "model", model)
		return nil
	}
	return c.m.Delete(ctx, p, true)
}

// Status reports the model's portal, publish and service state.
func (c *ServingClient) Status(ctx context.Context, model string) (LoadState, error) {
	s := LoadState{Portal: c.m.Exists(ctx, c.m.portalPath+"/"+model), Service: map[string]datadef.ModelState{}}
	pubs, err := c.m.client.Children(ctx, c.m.publishPath)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return s, err
	}
	for _, p := range pubs {
		if strings.HasSuffix(p, ":"+model) {
			s.Publish = true
		}
	}
	base := c.m.servicePath + "/" + model
	tasks, err := c.m.client.Children(ctx, base)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return s, err
	}
	for _, t := range tasks {
		reps, err := c.m.client.Children(ctx, base+"/"+t)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return s, err
		}
		for _, r := range reps {
			data, _, err := c.m.client.Get(ctx, base+"/"+t+"/"+r)
			if err != nil {
				continue
			}
			if rm, err := datadef.DeserializeReplicaMeta(data); err == nil {
				s.Service[t+":"+r] = rm.Stat
			}
		}
	}
	return s, nil
}
