package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/monolith-go/monolith/internal/metricsrv"
	izk "github.com/monolith-go/monolith/internal/zk"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/monolith-go/monolith/internal/zktest"
	pb "github.com/monolith-go/monolith/schemas/agentpb"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/tfs"
	"github.com/monolith-go/monolith/serving/zk"
)

// Child-process modes of the test binary: a TF Serving double behind TF Serving's command
// line (the agent's MONOLITH_TFS_BINARY in these tests), and a v3 agent stopped by SIGTERM.
const (
	envFakeTFS  = "MONOLITH_AGENT_TEST_FAKE_TFS"
	envRunAgent = "MONOLITH_AGENT_TEST_RUN_AGENT"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envRunAgent) != "":
		// The agent's TF Serving child inherits the environment: it must run the fake.
		conf := os.Getenv(envRunAgent)
		_ = os.Unsetenv(envRunAgent)
		_ = os.Setenv(envFakeTFS, "1")
		os.Exit(runAgentChild(conf))
	case os.Getenv(envFakeTFS) == "1":
		os.Exit(runFakeTFSChild(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// runFakeTFSChild serves tfs.Fake with the flags of TF Serving's command line that matter
// (port, model config file and its poll period); the others are ignored.
func runFakeTFSChild(args []string) int {
	opts := tfs.DefaultFakeOptions()
	opts.Step = 20 * time.Millisecond
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch k {
		case "port":
			opts.Listen = "127.0.0.1:" + v
		case "model_config_file":
			opts.ModelConfigFile = v
		case "model_config_file_poll_wait_seconds":
			n, _ := strconv.Atoi(v)
			opts.ConfigPollWait = time.Duration(n) * time.Second
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	f, err := tfs.NewFake(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake TF Serving:", err)
		return 1
	}
	defer f.Close()
	if err := f.Serve(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "fake TF Serving:", err)
		return 1
	}
	return 0
}

// runAgentChild runs a v3 agent from a conf file until SIGTERM, as `monolith agent` does.
func runAgentChild(conf string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := config.Load(conf)
	if err == nil {
		cfg, err = cfg.Resolve(config.OSEnv(), config.FreePort)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a, err := NewV3(V3Options{Config: cfg, LocalIP: "127.0.0.1", ReportInterval: time.Second, SyncInterval: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

const (
	testBzid  = "gip"
	testModel = "test_ffm_model"
	waitFor   = 20 * time.Second
)

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	zktest.Eventually(t, waitFor, cond, msg)
}

// fakeExport makes {dir}/{sub}/1 for each sub-graph (the fake serves version folders).
func fakeExport(t *testing.T, subs ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, s := range subs {
		if err := os.MkdirAll(filepath.Join(dir, s, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// controller opens a Backend for the test's agent_controller side and declares subs.
func controller(t *testing.T, servers []string, export string, subs ...string) *zk.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	b, err := zk.OpenBackend(ctx, testBzid, izk.Options{Servers: servers, SessionTimeout: zktest.SessionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for _, s := range subs {
		pol := "latest_once"
		if s == "entry" {
			pol = "latest"
		}
		cfg := datadef.SavedModelDeployConfig{ModelBasePath: datadef.Some(filepath.Join(export, s)), VersionPolicy: datadef.Some(pol)}
		if err := b.DeclSavedModel(ctx, datadef.SavedModel{ModelName: testModel, SubGraph: s}, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// agentConf writes a unified v3 conf for servers and returns its path.
func agentConf(t *testing.T, servers []string, extra string) string {
	t.Helper()
	ports := make([]int, 4)
	for i := range ports {
		p, err := config.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	text := fmt.Sprintf(`bzid %s
deploy_type unified
agent_version 3
zk_servers %s
layout_pattern /%s/layout
tfs_port_grpc %d
tfs_port_http %d
tfs_port_archon %d
agent_port %d
%s`, testBzid, strings.Join(servers, ","), testBzid, ports[0], ports[1], ports[2], ports[3], extra)
	p := filepath.Join(t.TempDir(), "agent.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newV3 builds a v3 agent whose TF Serving is this test binary in fake mode.
func newV3(t *testing.T, conf string, servers []string) *V3 {
	t.Helper()
	return newV3With(t, conf, servers, nil, nil)
}

// newV3With is newV3 recording into agent and ZooKeeper metrics.
func newV3With(t *testing.T, conf string, servers []string, m *Metrics, zm *izk.Metrics) *V3 {
	t.Helper()
	t.Setenv(envFakeTFS, "1")
	cfg, err := config.Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = cfg.Resolve(config.MapEnv(nil), config.FreePort)
	if err != nil {
		t.Fatal(err)
	}
	env := config.MapEnv(map[string]string{tfs.EnvBinary: os.Args[0]})
	a, err := NewV3(V3Options{
		Config: cfg, Getenv: env, LocalIP: "127.0.0.1",
		ZK:             izk.Options{Servers: servers, SessionTimeout: zktest.SessionTimeout, Logger: zktest.NewLogger(t).Slog(), Metrics: zm},
		ReportInterval: 200 * time.Millisecond, SyncInterval: 200 * time.Millisecond,
		AvailableMemory: func() (int64, error) { return 1 << 30, nil },
		Logger:          zktest.NewLogger(t).Slog(),
		Metrics:         m,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func startV3(t *testing.T, a *V3) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
}

// configNames reads the model names of the agent's model config file.
func configNames(t *testing.T, a *V3) []string {
	t.Helper()
	c, err := tfs.ReadModelServerConfig(a.ModelConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	return tfs.ModelNames(c)
}

// heartBeat calls HeartBeat(PS) on addr and returns "key=addr,addr" lines, sorted.
func heartBeat(t *testing.T, addr string) []string {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := pb.NewAgentServiceClient(cc).HeartBeat(ctx, &pb.HeartBeatRequest{ServerType: pb.ServerType_PS})
	if err != nil {
		t.Fatalf("HeartBeat: %v", err)
	}
	var lines []string
	for k, v := range resp.GetAddresses() {
		lines = append(lines, k+"="+strings.Join(v.GetAddress(), ","))
	}
	sort.Strings(lines)
	return lines
}

func sm(sub string) datadef.SavedModel {
	return datadef.SavedModel{ModelName: testModel, SubGraph: sub}
}

// TestV3PublishAndUnpublish ports agent_v3_test.py on a real ZooKeeper and a real TF
// Serving process (the fake): publishing entry and ps_0 loads exactly those, binds them and
// lists them in HeartBeat with the container's gRPC address; removing ps_0 leaves entry.
// The agent's metrics, scraped over HTTP, report the sub-graphs' states meanwhile.
func TestV3PublishAndUnpublish(t *testing.T) {
	srv := zktest.Start(t)
	export := fakeExport(t, "entry", "ps_0", "ps_1")
	ctl := controller(t, srv.Servers(), export, "entry", "ps_0", "ps_1")
	reg := metricsrv.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	zm, err := izk.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := metricsrv.Listen("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	a := newV3With(t, agentConf(t, srv.Servers(), ""), srv.Servers(), m, zm)
	startV3(t, a)
	ctx := context.Background()
	layout := "/" + testBzid + "/layout"

	if got := configNames(t, a); len(got) != 0 {
		t.Fatalf("model config before any publish: %q", got)
	}
	for _, s := range []string{"entry", "ps_0"} {
		if err := ctl.AddToLayout(ctx, layout, sm(s)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{testModel + ":entry", testModel + ":ps_0"}
	eventually(t, func() bool { return slices.Equal(configNames(t, a), want) },
		func() string { return fmt.Sprintf("model config %q, want %q", configNames(t, a), want) })

	grpcAddr, _ := a.ServiceInfo().GRPC.Get()
	wantHB := []string{testModel + ":entry=" + grpcAddr, testModel + ":ps_0=" + grpcAddr}
	eventually(t, func() bool { return slices.Equal(heartBeat(t, a.AgentAddr()), wantHB) },
		func() string { return fmt.Sprintf("HeartBeat %q, want %q", heartBeat(t, a.AgentAddr()), wantHB) })
	sm := ctl.Client()
	for _, s := range []string{"entry", "ps_0"} {
		p := datadef.SavedModel{ModelName: testModel, SubGraph: s}.BindingPath(testBzid, a.Container())
		if ok, err := sm.Exists(ctx, p); err != nil || !ok {
			t.Errorf("binding %s: exists=%v err=%v", p, ok, err)
		}
	}
	info, ok, err := ctl.GetServiceInfo(ctx, a.Container())
	if err != nil || !ok || string(info.Serialize()) != string(a.ServiceInfo().Serialize()) {
		t.Errorf("service info %s ok=%v err=%v, want %s", info.Serialize(), ok, err, a.ServiceInfo().Serialize())
	}
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		fams, err := metricsrv.Scrape(ctx, ms.Addr())
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	fams := scrape()
	for _, w := range []struct {
		name   string
		labels []string
		min    float64
	}{
		{"monolith_agent_model_state", []string{"model", testModel + ":entry", "state", "AVAILABLE"}, 1},
		{"monolith_agent_model_state", []string{"model", testModel + ":ps_0", "state", "AVAILABLE"}, 1},
		{"monolith_agent_state_reports_total", []string{"state", "AVAILABLE"}, 2},
		{"monolith_agent_layout_changes_total", nil, 1},
		{"monolith_zk_session_events_total", []string{"state", "has_session"}, 1},
		{"monolith_zk_reconnects_total", nil, 0},
		{"go_goroutines", nil, 1},
	} {
		if got, ok := metricsrv.Value(fams, w.name, w.labels...); !ok || got < w.min {
			t.Errorf("/metrics %s%v = %v (present %v), want ≥ %v", w.name, w.labels, got, ok, w.min)
		}
	}

	if err := ctl.RemoveFromLayout(ctx, layout, datadef.SavedModel{ModelName: testModel, SubGraph: "ps_0"}); err != nil {
		t.Fatal(err)
	}
	want = want[:1]
	eventually(t, func() bool { return slices.Equal(configNames(t, a), want) },
		func() string { return fmt.Sprintf("model config %q, want %q", configNames(t, a), want) })
	eventually(t, func() bool { return slices.Equal(heartBeat(t, a.AgentAddr()), wantHB[:1]) },
		func() string { return fmt.Sprintf("HeartBeat %q, want %q", heartBeat(t, a.AgentAddr()), wantHB[:1]) })
	// ps_0 left the layout: its state is no longer reported.
	eventually(t, func() bool {
		_, ok := metricsrv.Value(scrape(), "monolith_agent_model_state", "model", testModel+":ps_0")
		return !ok
	}, func() string { return "the metrics still report ps_0 after it left the layout" })
	if got, ok := metricsrv.Value(scrape(), "monolith_agent_model_state", "model", testModel+":entry", "state", "AVAILABLE"); !ok || got != 1 {
		t.Errorf("entry's state after ps_0 left: %v (present %v)", got, ok)
	}
}

// TestV3LayoutFilters: filters pick the sub-graphs of this shard (S12: whole-name match;
// "${shard_num}" substituted before parsing).
func TestV3LayoutFilters(t *testing.T) {
	srv := zktest.Start(t)
	subs := []string{"entry", "entry_item_embedding_0", "ps_0", "ps_1", "ps_2", "ps_3"}
	export := fakeExport(t, subs...)
	ctl := controller(t, srv.Servers(), export, subs...)
	a := newV3(t, agentConf(t, srv.Servers(), "layout_filters entry\nlayout_filters ps_{i}; i % ${shard_num} == 1\nnum_shard 1\n"), srv.Servers())
	startV3(t, a)
	for _, s := range subs {
		if err := ctl.AddToLayout(context.Background(), "/"+testBzid+"/layout", sm(s)); err != nil {
			t.Fatal(err)
		}
	}
	// shard_num is 1, so i % 1 == 1 never holds: only entry (and not entry_item_embedding_0,
	// which Python's prefix match accepted). debug_info shows each filter as the reference
	// does, "{regex};{condition}".
	want := []string{testModel + ":entry"}
	eventually(t, func() bool { return slices.Equal(configNames(t, a), want) },
		func() string { return fmt.Sprintf("model config %q, want %q", configNames(t, a), want) })
	var dbg datadef.ContainerDebugInfo
	if s, ok := a.ServiceInfo().DebugInfo.Get(); ok {
		dbg, _ = datadef.DeserializeContainerDebugInfo(s)
	}
	if wantF := []string{"entry;", `ps_(?P<i>\d+); i % 1 == 1`}; !slices.Equal(dbg.LayoutFilters, wantF) {
		t.Errorf("debug_info filters %q, want %q", dbg.LayoutFilters, wantF)
	}
}

// TestV3SessionExpiry: after ZooKeeper expires the agent's session, its service info and
// bindings come back and HeartBeat still answers, without a restart.
func TestV3SessionExpiry(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	export := fakeExport(t, "entry")
	ctl := controller(t, srv.Servers(), export, "entry")
	a := newV3(t, agentConf(t, proxy.Servers(), ""), proxy.Servers())
	startV3(t, a)
	ctx := context.Background()
	if err := ctl.AddToLayout(ctx, "/"+testBzid+"/layout", sm("entry")); err != nil {
		t.Fatal(err)
	}
	binding := sm("entry").BindingPath(testBzid, a.Container())
	service := a.Container().ServicePath(testBzid)
	exists := func(p string) bool { ok, err := ctl.Client().Exists(ctx, p); return err == nil && ok }
	eventually(t, func() bool { return exists(binding) && exists(service) }, func() string { return "no binding or service node" })

	proxy.ExpireSessions(t, a.backend.Client().SessionID())
	eventually(t, func() bool { return exists(binding) && exists(service) && !a.backend.Client().Lost() },
		func() string {
			return fmt.Sprintf("after expiry: binding %v service %v lost %v", exists(binding), exists(service), a.backend.Client().Lost())
		})
	// The binding watch re-arms on the new session and rebuilds the service map from the
	// re-created bindings: HeartBeat answers the container again.
	grpcAddr, _ := a.ServiceInfo().GRPC.Get()
	want := []string{testModel + ":entry=" + grpcAddr}
	eventually(t, func() bool { return slices.Equal(heartBeat(t, a.AgentAddr()), want) },
		func() string {
			return fmt.Sprintf("HeartBeat after expiry %q, want %q", heartBeat(t, a.AgentAddr()), want)
		})
}

// TestV3SIGTERM runs an agent as a child process; SIGTERM makes it exit 0, its ephemeral
// nodes (service info, bindings) vanish at once (well before the session timeout would
// remove them) and its TF Serving child is gone.
func TestV3SIGTERM(t *testing.T) {
	srv := zktest.Start(t)
	export := fakeExport(t, "entry")
	ctl := controller(t, srv.Servers(), export, "entry")
	ctx := context.Background()
	if err := ctl.AddToLayout(ctx, "/"+testBzid+"/layout", sm("entry")); err != nil {
		t.Fatal(err)
	}
	conf := agentConf(t, srv.Servers(), "")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRunAgent+"="+conf, tfs.EnvBinary+"="+os.Args[0])
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})

	children := func() []string {
		kids, err := ctl.Client().Children(ctx, "/"+testBzid+"/container_service")
		if err != nil {
			return nil
		}
		return kids
	}
	var bindings []string
	eventually(t, func() bool {
		bindings, _ = ctl.Client().Children(ctx, "/"+testBzid+"/binding/"+testModel)
		return len(children()) == 1 && len(bindings) == 1
	}, func() string {
		return fmt.Sprintf("agent registered %q, bindings %q; stderr:\n%s", children(), bindings, stderr.String())
	})
	tfsPids := childPids(t, cmd.Process.Pid)
	if len(tfsPids) == 0 {
		t.Fatal("the agent has no TF Serving child")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("agent exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(waitFor):
		t.Fatalf("agent still running %v after SIGTERM", waitFor)
	}
	// The session was closed, not abandoned: the nodes are gone now, not after a timeout.
	if kids := children(); len(kids) != 0 {
		t.Errorf("container_service after SIGTERM: %q", kids)
	}
	if b, _ := ctl.Client().Children(ctx, "/"+testBzid+"/binding/"+testModel); len(b) != 0 {
		t.Errorf("bindings after SIGTERM: %q", b)
	}
	for _, pid := range tfsPids {
		if processAlive(pid) {
			t.Errorf("TF Serving child %d still running after the agent exited", pid)
		}
	}
}
