// Package replica is the v1 serving agent's replica management (spec §1.13): Watcher
// mirrors every replica node under /{bzid}/service/{base_name} (ReplicaWatcher), Manager
// registers this agent's own replicas and keeps their state in step with TF Serving
// (ReplicaUpdater, ReplicaManager), and TFSMonitor routes status requests to the ps,
// entry and dense TF Serving processes.
//
// Decisions: S6, the agent's own nodes carry the deployment's gRPC and archon ports,
// IPv6 hosts are bracketed and own nodes are recognised by exact path; S7, replica nodes are
// serving/zk owned ephemeral nodes, re-created with their latest data as soon as a new
// session exists (no 10 s re-register loop, no flag left set, no sleep in a ZooKeeper
// callback), and status updates pause while the session is lost. Departures, pinned by
// tests: the reconciliation poll re-creates an own node deleted by someone else in the same
// session (the reference's substring match could hit replica 11 for replica 1); a replica
// node whose JSON does not decode is left out with a log line (the reference's watch
// crashed); a reconciliation poll keeps the state a data watch saw while it was reading
// (the reference's poll could put back an older state); a state write ZooKeeper refused is
// tried again next round; the metrics loop is not ported (the reference's metrics client is a
// no-op in open source).
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/internal/zk"
	tfspb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/tfs"
)

// StatusSource answers the status of one of the agent's models (TF Serving's newest
// AVAILABLE version, else its newest; tfs.Monitor.ModelStatus semantics).
type StatusSource interface {
	ModelStatus(ctx context.Context, name string) (*tfspb.ModelVersionStatus, error)
}

// Options configure a Manager.
type Options struct {
	// UpdateInterval is the status-update period (default 1 s).
	UpdateInterval time.Duration
	// PollInterval is the Watcher's reconciliation period (default 60 s).
	PollInterval time.Duration
	// Env gives MY_HOST_IP and MY_HOST_IPV6 (nil: the process environment).
	Env config.Env
	// Logger receives the manager's messages (nil: discard).
	Logger *slog.Logger
	// OnReport is called with an own node's path and state each time a new state was
	// written to it (nil: none); the agent's metrics use it.
	OnReport func(path string, state datadef.ModelState)
}

// Watcher is the ReplicaWatcher: a cache of every replica node under the service prefix,
// kept by a chain of children watches ([idc:cluster →] task → replica) and a data watch per
// replica node, and rebuilt from ZooKeeper every poll.
type Watcher struct {
	client  *zk.Client
	prefix  string
	dcAware bool
	family  datadef.AddressFamily
	log     *slog.Logger

	mu       sync.Mutex
	replicas map[string]map[string]datadef.ReplicaMeta // task path → replica id (decimal) → meta
	set      *zk.WatchSet
	// touched collects the replicas a data watch changed while a Poll reads ZooKeeper (nil
	// when no Poll runs): their watch state is newer than what the Poll read.
	touched map[replicaKey]bool
	pollMu  sync.Mutex // one Poll at a time
	// beforeSwap, when set (tests), runs between a Poll's reads and its swap.
	beforeSwap func()
}

type replicaKey struct{ task, rnode string }

// NewWatcher makes a Watcher of /{bzid}/service/{base_name}.
func NewWatcher(client *zk.Client, cfg config.AgentConfig, log *slog.Logger) *Watcher {
	family := datadef.IPv4
	if cfg.Host.IPv6Only {
		family = datadef.IPv6
	}
	return &Watcher{
		client: client, prefix: "/" + cfg.BZID + "/service/" + cfg.BaseName, dcAware: cfg.DCAware,
		family: family, log: orDiscard(log),
		replicas: map[string]map[string]datadef.ReplicaMeta{}, set: zk.NewWatchSet(client),
	}
}

// Start ensures the prefix and installs the watch chain.
func (w *Watcher) Start(ctx context.Context) error {
	if err := w.client.EnsurePath(ctx, w.prefix); err != nil {
		return fmt.Errorf("serving/replica: %w", err)
	}
	level := w.watchTasks
	if w.dcAware {
		level = w.watchLocations
	}
	return w.set.NewChildren(ctx, w.prefix, level)
}

func (w *Watcher) watchLocations(ctx context.Context, path string) {
	if err := w.set.NewChildren(ctx, path, w.watchTasks); err != nil && !errors.Is(err, zk.ErrClosed) {
		w.log.Warn("watch idc:cluster level", "path", path, "err", err)
	}
}

func (w *Watcher) watchTasks(ctx context.Context, path string) {
	if err := w.set.NewChildren(ctx, path, w.watchReplica); err != nil && !errors.Is(err, zk.ErrClosed) {
		w.log.Warn("watch task level", "path", path, "err", err)
	}
}

// watchReplica installs the data watch of one replica node.
func (w *Watcher) watchReplica(ctx context.Context, path string) {
	i := strings.LastIndexByte(path, '/')
	task, name := path[:i], path[i+1:]
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		w.log.Warn("replica node name is not a number; ignored", "path", path)
		return
	}
	rnode := strconv.FormatInt(id, 10)
	err = w.set.Data(ctx, path, func(data []byte, _ *zk.Stat, ev zk.DataEvent) bool {
		w.onData(task, rnode, path, data, ev)
		return true
	})
	if err != nil && !errors.Is(err, zk.ErrClosed) {
		w.log.Warn("watch replica", "path", path, "err", err)
	}
}

// onData applies one data-watch call to the cache (§1.13).
func (w *Watcher) onData(task, rnode, path string, data []byte, ev zk.DataEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.touched != nil {
		w.touched[replicaKey{task, rnode}] = true
	}
	if ev == zk.DataDeleted || (ev == zk.DataInitial && data == nil) {
		if m := w.replicas[task]; m != nil {
			delete(m, rnode)
			if len(m) == 0 {
				delete(w.replicas, task)
			}
		}
		return
	}
	var meta datadef.ReplicaMeta
	if len(data) == 0 {
		cached, ok := w.replicas[task][rnode]
		if !ok {
			return
		}
		meta = cached
		meta.Stat = datadef.ModelStateUnknown
	} else {
		var err error
		if meta, err = datadef.DeserializeReplicaMeta(data); err != nil {
			w.log.Warn("replica node does not decode; left out", "path", path, "err", err)
			return
		}
	}
	if w.replicas[task] == nil {
		w.replicas[task] = map[string]datadef.ReplicaMeta{}
	}
	w.replicas[task][rnode] = meta
}

// Poll rebuilds the cache from ZooKeeper and replaces it (reconciliation of missed
// watches). A replica whose data watch fired while Poll was reading keeps the watch's state,
// which is newer than what Poll read (the reference's poll could put back a stale state
// until the node changed again).
func (w *Watcher) Poll(ctx context.Context) error {
	w.pollMu.Lock()
	defer w.pollMu.Unlock()
	w.mu.Lock()
	w.touched = map[replicaKey]bool{}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.touched = nil
		w.mu.Unlock()
	}()
	tasks, err := w.taskPaths(ctx)
	if err != nil {
		return err
	}
	fresh := map[string]map[string]datadef.ReplicaMeta{}
	for _, t := range tasks {
		reps, err := w.client.Children(ctx, t)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		for _, r := range reps {
			id, err := strconv.ParseInt(r, 10, 64)
			if err != nil {
				continue
			}
			data, _, err := w.client.Get(ctx, t+"/"+r)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return err
			}
			meta, err := datadef.DeserializeReplicaMeta(data)
			if err != nil {
				w.log.Warn("replica node does not decode; left out", "path", t+"/"+r, "err", err)
				continue
			}
			if fresh[t] == nil {
				fresh[t] = map[string]datadef.ReplicaMeta{}
			}
			fresh[t][strconv.FormatInt(id, 10)] = meta
		}
	}
	if w.beforeSwap != nil {
		w.beforeSwap()
	}
	w.mu.Lock()
	for k := range w.touched {
		if meta, ok := w.replicas[k.task][k.rnode]; ok {
			if fresh[k.task] == nil {
				fresh[k.task] = map[string]datadef.ReplicaMeta{}
			}
			fresh[k.task][k.rnode] = meta
		} else if m := fresh[k.task]; m != nil {
			delete(m, k.rnode)
			if len(m) == 0 {
				delete(fresh, k.task)
			}
		}
	}
	w.replicas = fresh
	w.mu.Unlock()
	return nil
}

func (w *Watcher) taskPaths(ctx context.Context) ([]string, error) {
	kids, err := w.client.Children(ctx, w.prefix)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range kids {
		if !w.dcAware {
			out = append(out, w.prefix+"/"+k)
			continue
		}
		ts, err := w.client.Children(ctx, w.prefix+"/"+k)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		for _, t := range ts {
			out = append(out, w.prefix+"/"+k+"/"+t)
		}
	}
	return out, nil
}

// Stop ends the watches and clears the cache.
func (w *Watcher) Stop() {
	w.set.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.replicas = map[string]map[string]datadef.ReplicaMeta{}
}

// each calls fn for every cached task of serverType in the given data centre (every one
// when idc or cluster is "", or when not dc_aware), in path order.
func (w *Watcher) each(serverType, idc, cluster string, fn func(zp datadef.ZKPath, reps map[string]datadef.ReplicaMeta)) {
	paths := make([]string, 0, len(w.replicas))
	for p := range w.replicas {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		zp, err := datadef.ParseZKPath(p)
		if err != nil || zp.ServerType != serverType {
			continue
		}
		if w.dcAware && !zp.ShipIn(idc, cluster) {
			continue
		}
		fn(zp, w.replicas[p])
	}
}

// available lists the AVAILABLE addresses of reps in replica-id order.
func (w *Watcher) available(reps map[string]datadef.ReplicaMeta, only func(id int64) bool) []string {
	ids := make([]int64, 0, len(reps))
	for id := range reps {
		n, _ := strconv.ParseInt(id, 10, 64)
		ids = append(ids, n)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []string
	for _, id := range ids {
		m := reps[strconv.FormatInt(id, 10)]
		if m.Stat != datadef.ModelStateAvailable || (only != nil && !only(id)) {
			continue
		}
		if a, err := m.GetAddress(false, w.family); err == nil {
			if v, ok := a.Get(); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// GetAllReplicas maps every task of serverType to its AVAILABLE addresses: keys "ps:3", or
// "idc:cluster/ps:3" when dc_aware.
func (w *Watcher) GetAllReplicas(serverType, idc, cluster string) map[string][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]string{}
	w.each(serverType, idc, cluster, func(zp datadef.ZKPath, reps map[string]datadef.ReplicaMeta) {
		key := zp.Task()
		if w.dcAware {
			key = zp.Location() + "/" + key
		}
		out[key] = append(out[key], w.available(reps, nil)...)
	})
	if len(out) == 0 && serverType == config.ServerPS {
		w.log.Error("no PS replica", "prefix", w.prefix)
	}
	return out
}

// GetReplicas lists the AVAILABLE addresses of one task.
func (w *Watcher) GetReplicas(serverType string, task int, idc, cluster string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	w.each(serverType, idc, cluster, func(zp datadef.ZKPath, reps map[string]datadef.ReplicaMeta) {
		if zp.Index == strconv.Itoa(task) {
			out = append(out, w.available(reps, nil)...)
		}
	})
	return out
}

// GetReplica lists the AVAILABLE addresses of one replica of one task (in several data
// centres there may be several).
func (w *Watcher) GetReplica(serverType string, task, replica int, idc, cluster string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	w.each(serverType, idc, cluster, func(zp datadef.ZKPath, reps map[string]datadef.ReplicaMeta) {
		if zp.Index == strconv.Itoa(task) {
			out = append(out, w.available(reps, func(id int64) bool { return id == int64(replica) })...)
		}
	})
	return out
}

// TargetExtraInfo describes one address of GetReplicasWithExtraInfo.
type TargetExtraInfo struct {
	IDC, Cluster string
	ReplicaID    int64
}

// GetReplicasWithExtraInfo maps each AVAILABLE address of one task to its data centre and
// replica id (the parameter-sync client's targets).
func (w *Watcher) GetReplicasWithExtraInfo(serverType string, task int, idc, cluster string) map[string]TargetExtraInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]TargetExtraInfo{}
	w.each(serverType, idc, cluster, func(zp datadef.ZKPath, reps map[string]datadef.ReplicaMeta) {
		if zp.Index != strconv.Itoa(task) {
			return
		}
		for id := range reps {
			n, _ := strconv.ParseInt(id, 10, 64)
			for _, a := range w.available(reps, func(x int64) bool { return x == n }) {
				out[a] = TargetExtraInfo{IDC: zp.IDC, Cluster: zp.Cluster, ReplicaID: n}
			}
		}
	})
	return out
}

// served reports whether task has an AVAILABLE replica in this data centre.
func (w *Watcher) served(serverType string, task int, idc, cluster string) bool {
	return len(w.GetReplicas(serverType, task, idc, cluster)) > 0
}

// ownNode is one of the agent's replica nodes.
type ownNode struct {
	name string // TF Serving model name: ps_3, entry, dense_0
	path string
	meta datadef.ReplicaMeta
}

// Manager is the ReplicaManager: it registers the agent's replicas, updates their state
// from TF Serving, and watches every replica.
type Manager struct {
	client  *zk.Client
	cfg     config.AgentConfig
	status  StatusSource
	opts    Options
	log     *slog.Logger
	watcher *Watcher
	own     []*ownNode
	// ownMu serialises the writes of own nodes (updates and re-creations) and guards
	// their metas.
	ownMu sync.Mutex
	// prefix and meta build the own nodes; replica is the replica id (-1 until Start
	// registers a sequential entry when the config has none).
	prefix  string
	meta    func(grpc, archon int) datadef.ReplicaMeta
	replica int

	stopOnce sync.Once
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// NewManager prepares the agent's replica nodes (ps_{i} for its shard, entry, dense_0 per
// deploy type) without touching ZooKeeper.
func NewManager(client *zk.Client, cfg config.AgentConfig, status StatusSource, opts Options) (*Manager, error) {
	if status == nil {
		return nil, errors.New("serving/replica: a status source is required")
	}
	if opts.UpdateInterval <= 0 {
		opts.UpdateInterval = time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Minute
	}
	if opts.Env == nil {
		opts.Env = config.OSEnv()
	}
	m := &Manager{client: client, cfg: cfg, status: status, opts: opts, log: orDiscard(opts.Logger)}
	m.watcher = NewWatcher(client, cfg, opts.Logger)
	replica := -1
	if cfg.ReplicaID != nil {
		replica = *cfg.ReplicaID
	}
	m.replica = replica
	host, hostV6 := hostAddresses(opts.Env)
	meta := func(grpc, archon int) datadef.ReplicaMeta {
		rm := datadef.NewReplicaMeta()
		rm.Address = datadef.Some(net.JoinHostPort(host, strconv.Itoa(grpc)))
		rm.AddressIPv6 = datadef.Some("[" + hostV6 + "]:" + strconv.Itoa(grpc))
		rm.ArchonAddress = datadef.Some(net.JoinHostPort(host, strconv.Itoa(archon)))
		rm.ArchonAddressIPv6 = datadef.Some("[" + hostV6 + "]:" + strconv.Itoa(archon))
		return rm
	}
	prefix, err := cfg.PathPrefix()
	if err != nil {
		return nil, err
	}
	m.prefix, m.meta = prefix, meta
	dt := cfg.DeployType
	if dt == config.DeployMixed || dt == config.DeployEntry {
		entry := &ownNode{name: "entry", meta: meta(cfg.TFSEntryPort, cfg.TFSEntryArchonPort)}
		if replica >= 0 {
			entry.path = fmt.Sprintf("%s/entry:0/%011d", prefix, replica)
		} // else Start creates a sequential node and takes its number as the replica id
		m.own = append(m.own, entry)
	}
	if replica >= 0 || len(m.own) == 0 { // else the sequential entry's number is the id
		m.addPSDense(replica)
	}
	return m, nil
}

// addPSDense adds the agent's ps and dense nodes for replica id r.
func (m *Manager) addPSDense(r int) {
	cfg, dt := m.cfg, m.cfg.DeployType
	if dt == config.DeployMixed || dt == config.DeployPS {
		numShard := 1
		if cfg.NumShard != nil && *cfg.NumShard > 0 {
			numShard = *cfg.NumShard
		}
		shard := cfg.Host.ShardID
		for i := 0; i < cfg.NumPS; i++ {
			if i%numShard == shard {
				m.own = append(m.own, &ownNode{name: "ps_" + strconv.Itoa(i),
					path: fmt.Sprintf("%s/ps:%d/%d", m.prefix, i, r), meta: m.meta(cfg.TFSPSPort, cfg.TFSPSArchonPort)})
			}
		}
	}
	if cfg.DenseAlone && (dt == config.DeployMixed || dt == config.DeployDense) {
		m.own = append(m.own, &ownNode{name: "dense_0", path: fmt.Sprintf("%s/dense:0/%d", m.prefix, r),
			meta: m.meta(cfg.TFSDensePort, cfg.TFSDenseArchonPort)})
	}
}

// hostAddresses is the updater's host rule: MY_HOST_IP or the hostname's address (0.0.0.0
// when it does not resolve), and MY_HOST_IPV6 or the hostname's first IPv6 address or "::".
func hostAddresses(env config.Env) (v4, v6 string) {
	name, _ := os.Hostname()
	if v, ok := env(config.EnvHostIP); ok && v != "" {
		v4 = v
	} else if ips, err := net.LookupIP(name); err == nil {
		for _, ip := range ips {
			if ip.To4() != nil {
				v4 = ip.String()
				break
			}
		}
	}
	if v4 == "" {
		v4 = "0.0.0.0"
	}
	if v, ok := env(config.EnvHostIPv6); ok && v != "" {
		v6 = v
	} else if ips, err := net.LookupIP(name); err == nil {
		for _, ip := range ips {
			if ip.To4() == nil && ip.To16() != nil {
				v6 = ip.String()
				break
			}
		}
	}
	if v6 == "" {
		v6 = "::"
	}
	return v4, v6
}

// Watcher is the manager's view of every replica.
func (m *Manager) Watcher() *Watcher { return m.watcher }

// OwnPaths lists the agent's replica nodes. Without a configured replica id, the entry's
// path and the ps and dense nodes are known only after Start.
func (m *Manager) OwnPaths() []string {
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	out := make([]string, 0, len(m.own))
	for _, o := range m.own {
		if o.path != "" {
			out = append(out, o.path)
		}
	}
	return out
}

// ReplicaID is the agent's replica id: the configured one, or after Start the number of its
// sequential entry node; -1 before that.
func (m *Manager) ReplicaID() int {
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	return m.replica
}

// GetReplicas and GetAllReplicas answer AgentService v1 from the Watcher.
func (m *Manager) GetReplicas(st string, task int, idc, cluster string) []string {
	return m.watcher.GetReplicas(st, task, idc, cluster)
}

// GetAllReplicas answers AgentService v1's HeartBeat from the Watcher.
func (m *Manager) GetAllReplicas(st, idc, cluster string) map[string][]string {
	return m.watcher.GetAllReplicas(st, idc, cluster)
}

// IsPSSetStarted reports whether every PS task has an AVAILABLE replica in this data centre.
func (m *Manager) IsPSSetStarted() bool {
	for i := 0; i < m.cfg.NumPS; i++ {
		if !m.watcher.served(config.ServerPS, i, m.cfg.Host.IDC, m.cfg.Host.Cluster) {
			return false
		}
	}
	return true
}

// IsDenseSetStarted reports whether dense:0 has an AVAILABLE replica in this data centre.
func (m *Manager) IsDenseSetStarted() bool {
	return m.watcher.served(config.ServerDense, 0, m.cfg.Host.IDC, m.cfg.Host.Cluster)
}

// Start registers the agent's nodes (state UNKNOWN), installs the watches and starts the
// update and reconciliation loops.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.registerSequentialEntry(ctx); err != nil {
		return err
	}
	for _, o := range m.own {
		if o.path == "" {
			continue // the sequential entry, registered above
		}
		if err := m.client.SetEphemeral(ctx, o.path, o.meta.Serialize()); err != nil {
			return fmt.Errorf("serving/replica: register %s: %w", o.path, err)
		}
	}
	if err := m.watcher.Start(ctx); err != nil {
		return err
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.loop(loopCtx, m.opts.UpdateInterval, m.updateOnce)
	m.loop(loopCtx, m.opts.PollInterval, m.pollOnce)
	return nil
}

// registerSequentialEntry is the reference's registration without a replica id: the entry
// node is created ephemeral-sequential from {prefix}/entry:0/0, so ZooKeeper's 10-digit
// counter makes an 11-digit name, and that number becomes the replica id of the entry and of
// the agent's ps and dense nodes.
func (m *Manager) registerSequentialEntry(ctx context.Context) error {
	if len(m.own) == 0 || m.own[0].name != "entry" || m.own[0].path != "" {
		return nil
	}
	e := m.own[0]
	p, err := m.client.CreateEphemeralSequential(ctx, m.prefix+"/entry:0/0", e.meta.Serialize())
	if err != nil {
		return fmt.Errorf("serving/replica: register %s/entry:0 (sequential): %w", m.prefix, err)
	}
	r, err := strconv.Atoi(p[strings.LastIndexByte(p, '/')+1:])
	if err != nil {
		return fmt.Errorf("serving/replica: sequential entry node %s: %w", p, err)
	}
	m.ownMu.Lock()
	e.path, m.replica = p, r
	m.addPSDense(r)
	m.ownMu.Unlock()
	m.log.Info("replica id from the sequential entry node", "path", p, "replica_id", r)
	return nil
}

func (m *Manager) loop(ctx context.Context, every time.Duration, fn func(context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
}

// updateOnce writes each own node whose TF Serving state changed; nothing while the session
// is lost (S7).
func (m *Manager) updateOnce(ctx context.Context) {
	if m.client.Lost() {
		return
	}
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	for _, o := range m.own {
		st, err := m.status.ModelStatus(ctx, o.name)
		if err != nil {
			return // only the end of ctx
		}
		state := datadef.ModelState(st.GetState())
		if code := st.GetStatus().GetErrorCode(); code != 0 && state != datadef.ModelStateUnknown {
			m.log.Warn("model status error; round aborted", "model", o.name, "code", code, "message", st.GetStatus().GetErrorMessage())
			return
		}
		if state == o.meta.Stat {
			continue
		}
		next := o.meta
		next.Stat = state
		if err := m.client.SetEphemeral(ctx, o.path, next.Serialize()); err != nil {
			m.log.Warn("replica state not written; retried next round", "path", o.path, "err", err)
			continue
		}
		o.meta = next // only a written state counts as reported
		m.log.Info("replica state", "path", o.path, "state", state)
		if m.opts.OnReport != nil {
			m.opts.OnReport(o.path, state)
		}
	}
}

// pollOnce rebuilds the Watcher's cache and re-creates an own node that someone deleted
// (matched by exact path, S6).
func (m *Manager) pollOnce(ctx context.Context) {
	if m.client.Lost() {
		return
	}
	if err := m.watcher.Poll(ctx); err != nil {
		m.log.Warn("replica reconciliation", "err", err)
		return
	}
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	for _, o := range m.own {
		ok, err := m.client.Exists(ctx, o.path)
		if err == nil && !ok {
			m.log.Warn("own replica node missing; re-created", "path", o.path)
			if err := m.client.SetEphemeral(ctx, o.path, o.meta.Serialize()); err != nil {
				m.log.Warn("re-create replica node", "path", o.path, "err", err)
			}
		}
	}
}

// Stop ends the loops and the watches and deletes the agent's nodes. It is idempotent.
func (m *Manager) Stop() {
	m.stopOnce.Do(func() {
		if m.cancel != nil {
			m.cancel()
		}
		m.wg.Wait()
		m.watcher.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, o := range m.own {
			_ = m.client.DeleteEphemeral(ctx, o.path)
		}
	})
}

// SyncTargets is the SyncBackendWrapper: for "ps_i" the sub-graph name and the addresses
// of task i's AVAILABLE PS replicas in this data centre, with their extra information.
func (m *Manager) SyncTargets(subGraph string) (string, map[string]TargetExtraInfo, error) {
	kind, idx, ok := strings.Cut(subGraph, "_")
	i, err := strconv.Atoi(idx)
	if !ok || kind != config.ServerPS || err != nil || i < 0 {
		return "", nil, fmt.Errorf("serving/replica: sync target %q is not ps_N", subGraph)
	}
	return subGraph, m.watcher.GetReplicasWithExtraInfo(config.ServerPS, i, m.cfg.Host.IDC, m.cfg.Host.Cluster), nil
}

// TFSMonitor routes a model's status request to the TF Serving process serving it, by
// name prefix: entry, ps or dense (§1.13).
type TFSMonitor struct {
	byKind map[string]*tfs.Monitor
}

// NewTFSMonitor dials the deployment's TF Serving processes at host (dense only with
// dense_alone), with opts besides the defaults (credentials when they serve TLS).
func NewTFSMonitor(cfg config.AgentConfig, host string, opts ...grpc.DialOption) (*TFSMonitor, error) {
	m := &TFSMonitor{byKind: map[string]*tfs.Monitor{}}
	add := func(kind string, port int) error {
		mon, err := tfs.DialMonitor(net.JoinHostPort(host, strconv.Itoa(port)), opts...)
		if err != nil {
			m.Close()
			return fmt.Errorf("serving/replica: %w", err)
		}
		m.byKind[kind] = mon
		return nil
	}
	dt := cfg.DeployType
	if dt == config.DeployMixed || dt == config.DeployEntry {
		if err := add(config.ServerEntry, cfg.TFSEntryPort); err != nil {
			return nil, err
		}
	}
	if dt == config.DeployMixed || dt == config.DeployPS {
		if err := add(config.ServerPS, cfg.TFSPSPort); err != nil {
			return nil, err
		}
	}
	if cfg.DenseAlone && (dt == config.DeployMixed || dt == config.DeployDense) {
		if err := add(config.ServerDense, cfg.TFSDensePort); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ModelStatus asks the process whose kind prefixes name; a name no process serves is
// UNKNOWN with NOT_FOUND.
func (m *TFSMonitor) ModelStatus(ctx context.Context, name string) (*tfspb.ModelVersionStatus, error) {
	for kind, mon := range m.byKind {
		if strings.HasPrefix(name, kind) {
			return mon.ModelStatus(ctx, name)
		}
	}
	return &tfspb.ModelVersionStatus{Version: tfs.NoVersion, State: tfspb.ModelVersionStatus_UNKNOWN,
		Status: &tfspb.StatusProto{ErrorCode: 5, ErrorMessage: name + " is not served here"}}, nil
}

// Close closes the connections.
func (m *TFSMonitor) Close() {
	for _, mon := range m.byKind {
		_ = mon.Close()
	}
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
