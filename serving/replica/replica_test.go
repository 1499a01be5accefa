package replica

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/internal/zktest"
	tfspb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/tfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 20 * time.Second

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	zktest.Eventually(t, waitFor, cond, msg)
}

// fakeTFS serves the given models (each with version 1 under a temporary base path).
func fakeTFS(t *testing.T, names ...string) int {
	t.Helper()
	base := t.TempDir()
	list := &tfspb.ModelConfigList{}
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(base, n, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		list.Config = append(list.Config, &tfspb.ModelConfig{Name: n, BasePath: filepath.Join(base, n), ModelPlatform: "tensorflow"})
	}
	o := tfs.DefaultFakeOptions()
	o.Step = 10 * time.Millisecond
	o.Config = &tfspb.ModelServerConfig{Config: &tfspb.ModelServerConfig_ModelConfigList{ModelConfigList: list}}
	f, err := tfs.NewFake(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = f.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); _ = f.Close(); <-done })
	_, port, _ := net.SplitHostPort(f.Addr())
	n, _ := strconv.Atoi(port)
	return n
}

// mixedConfig is a mixed deployment of replica id with num_ps PS tasks on one shard.
func mixedConfig(t *testing.T, servers []string, replica, numPS int, dcAware bool, entryPort, psPort int) config.AgentConfig {
	t.Helper()
	c := config.Default()
	c.BZID, c.BaseName, c.BasePath, c.DeployType, c.NumPS = "gip", "test_ffm_model", "/unused", config.DeployMixed, numPS
	c.ZKServers, c.DCAware, c.ReplicaID = servers[0], dcAware, &replica
	one := 1
	c.NumShard = &one
	c.Host.ShardID, c.Host.NumTCEShard = 0, 1
	if dcAware {
		c.Host.IDC, c.Host.Cluster = "lf", "default"
	}
	c.TFSEntryPort, c.TFSEntryArchonPort, c.TFSPSPort, c.TFSPSArchonPort = entryPort, entryPort+1, psPort, psPort+1
	return c
}

func connect(t *testing.T, servers []string) *zk.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := zk.Connect(ctx, zk.Options{Servers: servers, SessionTimeout: zktest.SessionTimeout, Logger: zktest.NewLogger(t).Slog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var testEnv = config.MapEnv(map[string]string{config.EnvHostIP: "10.0.0.1", config.EnvHostIPv6: "fdbd::1"})

func startManager(t *testing.T, c *zk.Client, cfg config.AgentConfig, poll time.Duration) *Manager {
	t.Helper()
	mon, err := NewTFSMonitor(cfg, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	return startManagerWith(t, c, cfg, mon, poll)
}

// startManagerWith starts a Manager on the given status source.
func startManagerWith(t *testing.T, c *zk.Client, cfg config.AgentConfig, src StatusSource, poll time.Duration) *Manager {
	t.Helper()
	m, err := NewManager(c, cfg, src, Options{UpdateInterval: 20 * time.Millisecond, PollInterval: poll, Env: testEnv, Logger: zktest.NewLogger(t).Slog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func replicaJSON(addr string, stat datadef.ModelState) []byte {
	rm := datadef.NewReplicaMeta()
	rm.Address, rm.Stat = datadef.Some(addr), stat
	return rm.Serialize()
}

// TestManager ports replica_manager_test.py: a mixed agent registers entry:0 (11-digit
// replica name) and ps:0, ps:1 with the S14 JSON, they turn AVAILABLE when TF Serving loads
// the models, another agent's replicas appear and disappear in the Watcher, and the PS set
// counts as started only when every task has an AVAILABLE replica.
func TestManager(t *testing.T) {
	srv := zktest.Start(t)
	entryPort := fakeTFS(t, "entry")
	psPort := fakeTFS(t, "ps_0", "ps_1")
	c := connect(t, srv.Servers())
	cfg := mixedConfig(t, srv.Servers(), 1, 2, false, entryPort, psPort)
	m := startManager(t, c, cfg, time.Hour)
	ctx := context.Background()

	want := []string{"/gip/service/test_ffm_model/entry:0/00000000001", "/gip/service/test_ffm_model/ps:0/1", "/gip/service/test_ffm_model/ps:1/1"}
	if got := m.OwnPaths(); !slices.Equal(got, want) {
		t.Fatalf("own paths %q, want %q", got, want)
	}
	addr := fmt.Sprintf("10.0.0.1:%d", psPort)
	eventually(t, func() bool {
		return maps.EqualFunc(m.GetAllReplicas("ps", "", ""), map[string][]string{"ps:0": {addr}, "ps:1": {addr}}, slices.Equal)
	}, func() string { return fmt.Sprintf("ps replicas %v", m.GetAllReplicas("ps", "", "")) })
	if !m.IsPSSetStarted() {
		t.Error("PS set not started with both tasks AVAILABLE")
	}
	data, _, err := c.Get(ctx, want[1])
	wantJSON := fmt.Sprintf(`{"address": "10.0.0.1:%d", "address_ipv6": "[fdbd::1]:%d", "stat": 30, "model_name": null, "server_type": null, "task": -1, "replica": -1, "archon_address": "10.0.0.1:%d", "archon_address_ipv6": "[fdbd::1]:%d"}`, psPort, psPort, psPort+1, psPort+1)
	if err != nil || string(data) != wantJSON {
		t.Errorf("ps:0 node %s (%v), want %s", data, err, wantJSON)
	}
	eventually(t, func() bool { return len(m.Watcher().GetReplicas("entry", 0, "", "")) == 1 },
		func() string { return "entry not AVAILABLE" })

	// Another agent's replicas of ps:0: AVAILABLE counts, LOADING does not.
	other := connect(t, srv.Servers())
	if err := other.SetEphemeral(ctx, "/gip/service/test_ffm_model/ps:0/2", replicaJSON("10.0.0.2:9000", datadef.ModelStateAvailable)); err != nil {
		t.Fatal(err)
	}
	if err := other.SetEphemeral(ctx, "/gip/service/test_ffm_model/ps:0/3", replicaJSON("10.0.0.3:9000", datadef.ModelStateLoading)); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return slices.Equal(m.GetReplicas("ps", 0, "", ""), []string{addr, "10.0.0.2:9000"}) },
		func() string { return fmt.Sprintf("ps:0 replicas %q", m.GetReplicas("ps", 0, "", "")) })
	if got := m.Watcher().GetReplica("ps", 0, 2, "", ""); !slices.Equal(got, []string{"10.0.0.2:9000"}) {
		t.Errorf("GetReplica(ps, 0, 2) = %q", got)
	}
	extra := m.Watcher().GetReplicasWithExtraInfo("ps", 0, "", "")
	if e, ok := extra["10.0.0.2:9000"]; !ok || e.ReplicaID != 2 || len(extra) != 2 {
		t.Errorf("GetReplicasWithExtraInfo = %v", extra)
	}
	if err := other.Close(); err != nil { // its session ends: its nodes go
		t.Fatal(err)
	}
	eventually(t, func() bool { return slices.Equal(m.GetReplicas("ps", 0, "", ""), []string{addr}) },
		func() string { return fmt.Sprintf("after the other agent left: %q", m.GetReplicas("ps", 0, "", "")) })
	if _, ids, err := m.SyncTargets("ps_1"); err != nil || len(ids) != 1 {
		t.Errorf("SyncTargets(ps_1) = %v, %v", ids, err)
	}
	if _, _, err := m.SyncTargets("entry"); err == nil {
		t.Error("SyncTargets(entry) succeeded")
	}

	m.Stop()
	for _, p := range want {
		if ok, _ := c.Exists(ctx, p); ok {
			t.Errorf("%s still exists after Stop", p)
		}
	}
}

// TestWatcherDCAware: with dc_aware, keys carry the data centre and queries for one data
// centre see only its replicas.
func TestWatcherDCAware(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv.Servers())
	ctx := context.Background()
	for p, a := range map[string]string{
		"/gip/service/m/lf:default/ps:0/1": "10.0.0.1:1", "/gip/service/m/lf:default/ps:1/1": "10.0.0.1:2",
		"/gip/service/m/hl:default/ps:0/1": "10.1.0.1:1", "/gip/service/m/lf:default/entry:0/00000000001": "10.0.0.1:3",
	} {
		if err := c.CreateOrSet(ctx, p, replicaJSON(a, datadef.ModelStateAvailable)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.BZID, cfg.BaseName, cfg.DCAware = "gip", "m", true
	w := NewWatcher(c, cfg, zktest.NewLogger(t).Slog())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	want := map[string][]string{"lf:default/ps:0": {"10.0.0.1:1"}, "lf:default/ps:1": {"10.0.0.1:2"}, "hl:default/ps:0": {"10.1.0.1:1"}}
	eventually(t, func() bool { return maps.EqualFunc(w.GetAllReplicas("ps", "", ""), want, slices.Equal) },
		func() string { return fmt.Sprintf("all PS replicas %v, want %v", w.GetAllReplicas("ps", "", ""), want) })
	delete(want, "hl:default/ps:0")
	if got := w.GetAllReplicas("ps", "lf", "default"); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("lf PS replicas %v, want %v", got, want)
	}
	if got := w.GetReplicas("ps", 0, "hl", "default"); !slices.Equal(got, []string{"10.1.0.1:1"}) {
		t.Errorf("hl ps:0 = %q", got)
	}

	// An empty write marks the replica UNKNOWN; a rewrite brings it back.
	if err := c.Set(ctx, "/gip/service/m/lf:default/ps:1/1", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return len(w.GetReplicas("ps", 1, "", "")) == 0 }, func() string { return "empty data did not make ps:1 UNKNOWN" })
	// Poll replaces the cache with what ZooKeeper holds: a stale entry goes.
	w.mu.Lock()
	stale := datadef.NewReplicaMeta()
	stale.Address, stale.Stat = datadef.Some("x:1"), datadef.ModelStateAvailable
	w.replicas["/gip/service/m/lf:default/ps:7"] = map[string]datadef.ReplicaMeta{"1": stale}
	w.mu.Unlock()
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.GetReplicas("ps", 7, "", ""); len(got) != 0 {
		t.Errorf("stale ps:7 survived Poll: %q", got)
	}
}

// TestSessionExpiry: after ZooKeeper expires the manager's session, its nodes come back in
// the new session with their latest state (AVAILABLE) and Lost clears (S7).
func TestSessionExpiry(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	psPort := fakeTFS(t, "ps_0")
	entryPort := fakeTFS(t, "entry")
	c := connect(t, proxy.Servers())
	m := startManager(t, c, mixedConfig(t, proxy.Servers(), 4, 1, false, entryPort, psPort), time.Hour)
	direct := connect(t, srv.Servers())
	ctx := context.Background()
	path := "/gip/service/test_ffm_model/ps:0/4"
	available := func() bool {
		data, _, err := direct.Get(ctx, path)
		if err != nil {
			return false
		}
		rm, err := datadef.DeserializeReplicaMeta(data)
		return err == nil && rm.Stat == datadef.ModelStateAvailable
	}
	eventually(t, available, func() string { return "ps:0 never AVAILABLE" })
	old := c.SessionID()
	proxy.ExpireSessions(t, old)
	eventually(t, func() bool { return c.SessionID() != old && !c.Lost() && available() },
		func() string { return fmt.Sprintf("after expiry: lost %v available %v", c.Lost(), available()) })
	eventually(t, func() bool { return len(m.GetReplicas("ps", 0, "", "")) == 1 }, func() string { return "watcher lost ps:0" })
}

// TestOwnNodeExactMatch pins S6: the poll re-creates this agent's ps:0/1 when someone
// deletes it, although ps:0/11 (another replica, whose path contains "/ps:0/1") exists.
func TestOwnNodeExactMatch(t *testing.T) {
	srv := zktest.Start(t)
	psPort := fakeTFS(t, "ps_0")
	entryPort := fakeTFS(t, "entry")
	c := connect(t, srv.Servers())
	startManager(t, c, mixedConfig(t, srv.Servers(), 1, 1, false, entryPort, psPort), 50*time.Millisecond)
	other := connect(t, srv.Servers())
	ctx := context.Background()
	if err := other.SetEphemeral(ctx, "/gip/service/test_ffm_model/ps:0/11", replicaJSON("10.9.9.9:1", datadef.ModelStateAvailable)); err != nil {
		t.Fatal(err)
	}
	own := "/gip/service/test_ffm_model/ps:0/1"
	eventually(t, func() bool { ok, _ := other.Exists(ctx, own); return ok }, func() string { return "own node missing" })
	if err := other.Delete(ctx, own, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { ok, _ := other.Exists(ctx, own); return ok }, func() string { return "own node not re-created" })
}

func TestNewManagerRejects(t *testing.T) {
	cfg := config.Default()
	cfg.BZID, cfg.BaseName, cfg.DeployType, cfg.DCAware = "gip", "m", config.DeployEntry, true
	if _, err := NewManager(nil, cfg, &TFSMonitor{}, Options{Env: testEnv}); err == nil {
		t.Error("dc_aware without a data centre accepted")
	}
	if _, err := NewManager(nil, cfg, nil, Options{}); err == nil {
		t.Error("no status source accepted")
	}
}

// TestSequentialEntry: without a replica id the entry node is created sequential from
// entry:0/0 (11 digits), that number becomes the replica id of the ps nodes, and after a
// session expiry the nodes come back at the same paths.
func TestSequentialEntry(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	psPort := fakeTFS(t, "ps_0")
	entryPort := fakeTFS(t, "entry")
	ctx := context.Background()
	direct := connect(t, srv.Servers())
	// Another entry replica registered first: the counter of entry:0 moves on.
	if _, err := direct.CreateEphemeralSequential(ctx, "/gip/service/test_ffm_model/entry:0/0", replicaJSON("10.9.9.9:1", datadef.ModelStateAvailable)); err != nil {
		t.Fatal(err)
	}
	c := connect(t, proxy.Servers())
	m := startManager(t, c, mixedConfig(t, proxy.Servers(), -1, 1, false, entryPort, psPort), time.Hour)
	want := []string{"/gip/service/test_ffm_model/entry:0/00000000001", "/gip/service/test_ffm_model/ps:0/1"}
	if got := m.OwnPaths(); !slices.Equal(got, want) || m.ReplicaID() != 1 {
		t.Fatalf("own paths %q, replica %d; want %q, 1", got, m.ReplicaID(), want)
	}
	exist := func() bool {
		for _, p := range want {
			if _, st, err := direct.Get(ctx, p); err != nil || st.EphemeralOwner != c.SessionID() {
				return false
			}
		}
		return true
	}
	eventually(t, exist, func() string { return "own nodes missing" })
	old := c.SessionID()
	proxy.ExpireSessions(t, old)
	eventually(t, func() bool { return c.SessionID() != old && !c.Lost() && exist() },
		func() string { return fmt.Sprintf("after expiry: lost %v, nodes %v", c.Lost(), exist()) })
	children, err := direct.Children(ctx, "/gip/service/test_ffm_model/entry:0")
	slices.Sort(children)
	if err != nil || !slices.Equal(children, []string{"00000000000", "00000000001"}) {
		t.Errorf("entry:0 children %q, %v", children, err)
	}
}

// stateSource answers one state for every model (a stand-in for TF Serving's status).
type stateSource struct{ state atomic.Int32 }

func (s *stateSource) ModelStatus(context.Context, string) (*tfspb.ModelVersionStatus, error) {
	return &tfspb.ModelVersionStatus{Version: 1, State: tfspb.ModelVersionStatus_State(s.state.Load())}, nil
}

// TestStatusWriteRetried: a state change whose write ZooKeeper refuses (here the node's ACL
// is made read-only for a while) is written at a later round, not taken as reported.
func TestStatusWriteRetried(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv.Servers())
	cfg := mixedConfig(t, srv.Servers(), 1, 1, false, 1, 1)
	cfg.DeployType = config.DeployPS
	src := &stateSource{}
	startManagerWith(t, c, cfg, src, time.Hour)
	path := "/gip/service/test_ffm_model/ps:0/1"
	direct := srv.Connect(t)
	stat := func() datadef.ModelState {
		data, _, err := direct.Get(path)
		if err != nil {
			return -1
		}
		rm, err := datadef.DeserializeReplicaMeta(data)
		if err != nil {
			return -1
		}
		return rm.Stat
	}
	if got := stat(); got != datadef.ModelStateUnknown {
		t.Fatalf("registered with state %v", got)
	}
	if _, err := direct.SetACL(path, gozk.WorldACL(gozk.PermRead|gozk.PermAdmin), -1); err != nil {
		t.Fatal(err)
	}
	src.state.Store(int32(tfspb.ModelVersionStatus_AVAILABLE))
	time.Sleep(200 * time.Millisecond) // about ten refused rounds
	if got := stat(); got != datadef.ModelStateUnknown {
		t.Fatalf("state %v written through a read-only ACL", got)
	}
	if _, err := direct.SetACL(path, gozk.WorldACL(gozk.PermAll), -1); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return stat() == datadef.ModelStateAvailable },
		func() string { return fmt.Sprintf("state %v after the ACL was restored, want AVAILABLE", stat()) })
}

// TestPollKeepsNewerWatchState: a replica that turns AVAILABLE (seen by its data watch)
// after Poll read it as UNKNOWN stays AVAILABLE when Poll swaps its snapshot in, and one
// deleted meanwhile stays deleted.
func TestPollKeepsNewerWatchState(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv.Servers())
	ctx := context.Background()
	const p0, p1 = "/gip/service/m/ps:0/1", "/gip/service/m/ps:1/1"
	for p, st := range map[string]datadef.ModelState{p0: datadef.ModelStateUnknown, p1: datadef.ModelStateAvailable} {
		if err := c.CreateOrSet(ctx, p, replicaJSON("10.0.0.1:1", st)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.BZID, cfg.BaseName = "gip", "m"
	w := NewWatcher(c, cfg, zktest.NewLogger(t).Slog())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	eventually(t, func() bool { return len(w.GetReplicas("ps", 1, "", "")) == 1 }, func() string { return "ps:1 not seen" })
	w.beforeSwap = func() { // between Poll's reads and its swap, the watches see two changes
		if err := c.Set(ctx, p0, replicaJSON("10.0.0.1:1", datadef.ModelStateAvailable)); err != nil {
			t.Error(err)
		}
		if err := c.Delete(ctx, p1, false); err != nil {
			t.Error(err)
		}
		eventually(t, func() bool {
			return len(w.GetReplicas("ps", 0, "", "")) == 1 && len(w.GetReplicas("ps", 1, "", "")) == 0
		}, func() string { return "the watches did not see the changes" })
	}
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.GetReplicas("ps", 0, "", ""); !slices.Equal(got, []string{"10.0.0.1:1"}) {
		t.Errorf("ps:0 after Poll = %q: the poll's stale UNKNOWN won", got)
	}
	if got := w.GetReplicas("ps", 1, "", ""); len(got) != 0 {
		t.Errorf("ps:1 after Poll = %q: the poll brought back a deleted replica", got)
	}
}
