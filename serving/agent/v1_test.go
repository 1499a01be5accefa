package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/replica"
	"github.com/monolith-go/monolith/serving/tfs"
)

// gateReplicas is a Replicas whose PS set counts as started once open is set; it records
// whether the agent started and stopped it. It stands in for serving/replica.Manager, whose
// own tests run it against ZooKeeper; here only the supervision is under test.
type gateReplicas struct {
	tableReplicas
	open             atomic.Bool
	started, stopped atomic.Bool
}

func (g *gateReplicas) Start(context.Context) error { g.started.Store(true); return nil }
func (g *gateReplicas) Stop()                       { g.stopped.Store(true) }
func (g *gateReplicas) IsPSSetStarted() bool        { return g.open.Load() }
func (g *gateReplicas) IsDenseSetStarted() bool     { return g.open.Load() }

// newV1 builds a mixed v1 agent (ps then entry) whose TF Serving is this test binary.
func newV1(t *testing.T, servers []string, g *gateReplicas) *V1 {
	t.Helper()
	t.Setenv(envFakeTFS, "1")
	base := t.TempDir()
	for _, s := range []string{"ps_0", "entry"} {
		if err := os.MkdirAll(filepath.Join(base, s, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf("bzid %s\nbase_name %s\nbase_path %s\ndeploy_type mixed\nagent_version 1\nzk_servers %s\n",
		testBzid, testModel, base, strings.Join(servers, ","))
	cfg, err := config.Parse(strings.NewReader(conf), "v1.conf")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.Resolve(config.MapEnv(nil), config.FreePort); err != nil {
		t.Fatal(err)
	}
	a, err := NewV1(V1Options{
		Config: cfg, Getenv: config.MapEnv(map[string]string{tfs.EnvBinary: os.Args[0]}),
		ZK:           zk.Options{Servers: servers, SessionTimeout: zktest.SessionTimeout, Logger: zktest.NewLogger(t).Slog()},
		NewReplicas:  func(*zk.Client, config.AgentConfig) (Replicas, error) { return g, nil },
		PollInterval: 20 * time.Millisecond, StartTimeout: waitFor, Logger: zktest.NewLogger(t).Slog(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestV1Supervision: the entry process starts only once every PS task is served; when a
// process exits, Run stops every other one and reports which one ended.
func TestV1Supervision(t *testing.T) {
	srv := zktest.Start(t)
	g := &gateReplicas{tableReplicas: tableReplicas{"ps:0": {"h:1"}}}
	a := newV1(t, srv.Servers(), g)
	if got := a.Kinds(); !slices.Equal(got, []string{"ps", "entry"}) {
		t.Fatalf("processes %q, want ps then entry", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })

	eventually(t, func() bool { return a.Pids()["ps"] != 0 }, func() string { return "the ps process never started" })
	time.Sleep(200 * time.Millisecond) // ten polls of the gate
	if pid := a.Pids()["entry"]; pid != 0 {
		t.Fatalf("entry process %d started before the PS set was served", pid)
	}
	g.open.Store(true)
	eventually(t, func() bool { return a.Pids()["entry"] != 0 }, func() string { return "the entry process never started" })
	if got := heartBeat(t, a.AgentAddr()); !slices.Equal(got, []string{"ps:0=h:1"}) {
		t.Errorf("HeartBeat %q, want [ps:0=h:1]", got)
	}

	pids := a.Pids()
	if err := syscall.Kill(pids["ps"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		ran <- err
		if err == nil || !strings.Contains(err.Error(), "ps process exited") {
			t.Errorf("Run after the ps process died: %v, want a ps process exit", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Run did not return after the ps process died")
	}
	if processAlive(pids["entry"]) {
		t.Errorf("entry process %d still running after the ps process died", pids["entry"])
	}
	if !g.started.Load() || !g.stopped.Load() {
		t.Errorf("replica manager started %v stopped %v", g.started.Load(), g.stopped.Load())
	}
}

// TestV1StopOnContext: the end of Run's context (SIGTERM in the CLI) stops both processes
// and returns nil.
func TestV1StopOnContext(t *testing.T) {
	srv := zktest.Start(t)
	g := &gateReplicas{}
	g.open.Store(true)
	a := newV1(t, srv.Servers(), g)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	eventually(t, func() bool { return a.Pids()["entry"] != 0 }, func() string { return "the entry process never started" })
	// Run started the entry after its PS port opened; wait for the entry's port too.
	wctx, wcancel := context.WithTimeout(context.Background(), waitFor)
	defer wcancel()
	if err := waitPort(wctx, a.procs[1].port, 20*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	pids := a.Pids()
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Run did not return after cancel")
	}
	for kind, pid := range pids {
		if processAlive(pid) {
			t.Errorf("%s process %d still running", kind, pid)
		}
	}
}

// TestNewV1Rejects: a unified deployment or another agent version is refused, and so is a
// missing TF Serving binary (S11).
func TestNewV1Rejects(t *testing.T) {
	good := func() config.AgentConfig {
		c := config.Default()
		c.AgentVersion, c.DeployType, c.BasePath, c.ZKServers = 1, config.DeployPS, "/x", "127.0.0.1:1"
		return c
	}
	nr := func(*zk.Client, config.AgentConfig) (Replicas, error) { return &gateReplicas{}, nil }
	env := config.MapEnv(map[string]string{tfs.EnvBinary: "/bin/true"})
	for name, tc := range map[string]struct {
		cfg  func(*config.AgentConfig)
		env  func(string) (string, bool)
		want string
	}{
		"unified": {func(c *config.AgentConfig) { c.DeployType = config.DeployUnified }, env, "cannot run deploy_type"},
		"v3":      {func(c *config.AgentConfig) { c.AgentVersion = 3 }, env, "agent_version 1"},
		"no tfs":  {func(*config.AgentConfig) {}, config.MapEnv(nil), "MONOLITH_TFS_BINARY"},
		"no zk":   {func(c *config.AgentConfig) { c.ZKServers = "" }, env, "zk_servers"},
	} {
		c := good()
		tc.cfg(&c)
		_, err := NewV1(V1Options{Config: c, Getenv: tc.env, NewReplicas: nr})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// TestV1WithReplicaManager runs the whole v1 flow on a real ZooKeeper with
// serving/replica's manager: the ps process loads ps_0, the updater marks ps:0/1 AVAILABLE,
// the watcher sees it, the entry process starts, and HeartBeat(PS) answers "ps:0" with the
// ps process's address.
func TestV1WithReplicaManager(t *testing.T) {
	srv := zktest.Start(t)
	t.Setenv(envFakeTFS, "1")
	base := t.TempDir()
	for _, s := range []string{"ps_0", "entry"} {
		if err := os.MkdirAll(filepath.Join(base, s, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf("bzid %s\nbase_name %s\nbase_path %s\ndeploy_type mixed\nagent_version 1\nzk_servers %s\nreplica_id 1\n",
		testBzid, testModel, base, srv.Addr())
	cfg, err := config.Parse(strings.NewReader(conf), "v1.conf")
	if err != nil {
		t.Fatal(err)
	}
	env := config.MapEnv(map[string]string{"SHARD_ID": "0", config.EnvHostIP: "127.0.0.1", tfs.EnvBinary: os.Args[0]})
	if cfg, err = cfg.Resolve(env, config.FreePort); err != nil {
		t.Fatal(err)
	}
	log := zktest.NewLogger(t).Slog()
	var mon *replica.TFSMonitor
	a, err := NewV1(V1Options{
		Config: cfg, Getenv: env, Logger: log, PollInterval: 20 * time.Millisecond, StartTimeout: waitFor,
		ZK: zk.Options{Servers: srv.Servers(), SessionTimeout: zktest.SessionTimeout, Logger: log},
		NewReplicas: func(c *zk.Client, cfg config.AgentConfig) (Replicas, error) {
			if mon, err = replica.NewTFSMonitor(cfg, "127.0.0.1"); err != nil {
				return nil, err
			}
			return replica.NewManager(c, cfg, mon, replica.Options{UpdateInterval: 20 * time.Millisecond, Env: env, Logger: log})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { a.Stop(context.Background()); mon.Close() }()
	want := []string{fmt.Sprintf("ps:0=127.0.0.1:%d", cfg.TFSPSPort)}
	if got := heartBeat(t, a.AgentAddr()); !slices.Equal(got, want) {
		t.Errorf("HeartBeat(PS) %q, want %q", got, want)
	}
	if a.Pids()["entry"] == 0 {
		t.Error("Start returned without an entry process")
	}
}
