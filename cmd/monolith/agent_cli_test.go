package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/serving/agent"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/savedmodel"
)

func zkClient(t *testing.T, servers []string) *zk.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zk.Connect(ctx, zk.Options{Servers: servers, SessionTimeout: zktest.SessionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func children(t *testing.T, c *zk.Client, p string) []string {
	t.Helper()
	kids, err := c.Children(context.Background(), p)
	if err != nil && !strings.Contains(err.Error(), "node does not exist") {
		t.Fatal(err)
	}
	return kids
}

// TestAgentController ports agent_controller_test.py on a real ZooKeeper: decl of an export
// with entry and ps_0..ps_4 declares those six; pub/unpub of entry and ps_* give the layout
// lists [entry], [entry, ps_0..ps_4], [entry], []; decl again without --overwrite fails;
// bzid_info prints the declared and published state as JSON.
func TestAgentController(t *testing.T) {
	srv := zktest.Start(t)
	export := t.TempDir()
	if err := savedmodel.WriteFakeExport(export, "test_ffm_model", 5, 1); err != nil {
		t.Fatal(err)
	}
	zkArgs := []string{"--zk_servers", srv.Addr(), "--bzid", "gip"}
	ctl := func(args ...string) (string, error) {
		out, stderr, err := runCLI(t, append(append([]string{"agent-controller"}, zkArgs...), args...)...)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, stderr)
		}
		return out, err
	}
	if _, err := ctl("--cmd", "decl", "--export_base", export); err != nil {
		t.Fatal(err)
	}
	z := zkClient(t, srv.Servers())
	want := []string{"entry", "ps_0", "ps_1", "ps_2", "ps_3", "ps_4"}
	if got := children(t, z, "/gip/saved_models/test_ffm_model"); !slices.Equal(got, want) {
		t.Fatalf("declared %q, want %q", got, want)
	}
	data, _, err := z.Get(context.Background(), "/gip/saved_models/test_ffm_model/ps_3")
	if wantJSON := `{"model_base_path": "` + filepath.Join(export, "ps_3") + `", "version_policy": "latest_once"}`; err != nil || string(data) != wantJSON {
		t.Errorf("ps_3 deploy config %s (%v), want %s", data, err, wantJSON)
	}
	if _, err := ctl("--cmd", "decl", "--export_base", export); err == nil || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("decl twice without --overwrite: %v", err)
	}
	// The base path is joined as Python's os.path.join does, uncleaned (S14: the same bytes).
	if _, err := ctl("--cmd", "decl", "--export_base", export+"//", "--overwrite", "1"); err != nil {
		t.Errorf("decl --overwrite 1: %v", err)
	}
	data, _, err = z.Get(context.Background(), "/gip/saved_models/test_ffm_model/ps_3")
	if wantJSON := `{"model_base_path": "` + export + `//ps_3", "version_policy": "latest_once"}`; err != nil || string(data) != wantJSON {
		t.Errorf("ps_3 deploy config after decl of %s// %s (%v), want %s", export, data, err, wantJSON)
	}
	// S5: --model_name wins over the export's name.
	if _, err := ctl("--cmd", "decl", "--export_base", export, "--model_name", "renamed"); err != nil {
		t.Fatal(err)
	}
	if got := children(t, z, "/gip/saved_models/renamed"); !slices.Equal(got, want) {
		t.Errorf("decl --model_name renamed declared %q, want %q", got, want)
	}
	noRemote := t.TempDir()
	if err := savedmodel.WriteFakeExport(noRemote, "x", 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl("--cmd", "decl", "--export_base", noRemote); err == nil || !strings.Contains(err.Error(), "--model_name") {
		t.Errorf("decl of an export without remote-predict nodes: %v, want a request for --model_name", err)
	}

	layout := "/gip/layouts/test_layout"
	for _, step := range []struct {
		cmd, pattern string
		want         []string
	}{
		{"pub", "test_ffm_model:entry", []string{"entry"}},
		{"pub", "test_ffm_model:ps_*", want},
		{"unpub", "test_ffm_model:ps_*", []string{"entry"}},
		{"unpub", "test_ffm_model:entry", nil},
	} {
		if _, err := ctl("--cmd", step.cmd, "--layout", "test_layout", "--model_name", step.pattern); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range children(t, z, layout) {
			got = append(got, strings.TrimPrefix(k, "test_ffm_model:"))
		}
		if !slices.Equal(got, step.want) {
			t.Errorf("after %s %s: layout %q, want %q", step.cmd, step.pattern, got, step.want)
		}
	}
	if _, err := ctl("--cmd", "pub", "--layout", "test_layout", "--model_name", "test_ffm_model:ps_[!0-2]"); err != nil {
		t.Fatal(err)
	}
	if got := children(t, z, layout); !slices.Equal(got, []string{"test_ffm_model:ps_3", "test_ffm_model:ps_4"}) {
		t.Errorf("pub ps_[!0-2]: layout %q", got)
	}
	out, err := ctl("--cmd", "bzid_info")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"sub_graphs_total": 6`, `"test_layout": [`, `"test_ffm_model:ps_3"`} {
		if !strings.Contains(out, s) {
			t.Errorf("bzid_info lacks %s:\n%s", s, out)
		}
	}
	if !strings.HasPrefix(out, "\n{\n") {
		t.Errorf("bzid_info output does not start with an empty line and indented JSON:\n%q", out[:min(len(out), 40)])
	}
	if _, err := ctl("--cmd", "nope"); err == nil {
		t.Error("an unknown --cmd was accepted")
	}
}

// staticReplicas answers a v1 AgentService from fixed data.
type staticReplicas map[string][]string

func (s staticReplicas) GetAllReplicas(string, string, string) map[string][]string { return s }
func (s staticReplicas) GetReplicas(st string, task int, _, _ string) []string {
	return s[fmt.Sprintf("%s:%d", st, task)]
}

// TestAgentClient: hb and gr print the reference's formats from a real AgentService; load,
// get portal, unload, addr and clean work on a real ZooKeeper.
func TestAgentClient(t *testing.T) {
	srv := zktest.Start(t)
	svc, err := agent.NewService(agent.ServiceOptions{Version: 1, Replicas: staticReplicas{
		"ps:0": {"10.0.0.1:8500", "10.0.0.2:8500"}, "ps:1": {},
	}})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	t.Cleanup(func() { svc.Stop(context.Background()) })
	conf := filepath.Join(t.TempDir(), "agent.conf")
	text := fmt.Sprintf("bzid gip\nbase_name m\ndeploy_type ps\nzk_servers %s\nagent_port %d\n", srv.Addr(), svc.Port())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	client := func(args ...string) string {
		t.Helper()
		out, stderr, err := runCLI(t, append([]string{"agent-client", "--conf", conf}, args...)...)
		if err != nil {
			t.Fatalf("agent-client %q: %v\n%s", args, err, stderr)
		}
		return out
	}
	if got, want := client("--cmd_type", "hb"), "ps:0  -> (2) \n\taddress: \"10.0.0.1:8500\"\n\taddress: \"10.0.0.2:8500\"\nps:1  -> (1) \n\t\n"; got != want {
		t.Errorf("hb:\n%q\nwant\n%q", got, want)
	}
	if got, want := client("--cmd_type", "gr", "--task", "0"), "PS 0  =>  ['10.0.0.1:8500', '10.0.0.2:8500']\n"; got != want {
		t.Errorf("gr: %q, want %q", got, want)
	}

	if got := client("--cmd_type", "get", "--args", "portal"); got != "no portal found !\n" {
		t.Errorf("get portal before load: %q", got)
	}
	client("--cmd_type", "load", "--model_dir", "/d", "--ckpt", "model.ckpt-1", "--num_shard", "3")
	if got, want := client("--cmd_type", "get", "--args", "portal"), `m b'{"model_name": "m", "model_dir": "/d", "ckpt": "model.ckpt-1", "num_shard": 3, "action": "NONE", "spec_replicas": []}'`+"\n"; got != want {
		t.Errorf("get portal:\n%q\nwant\n%q", got, want)
	}
	client("--cmd_type", "unload")
	if got := client("--cmd_type", "get", "--args", "portal"); got != "{}\n" {
		t.Errorf("get portal after unload: %q", got)
	}

	if got := client("--cmd_type", "addr"); got != "m has not load !\n" {
		t.Errorf("addr before any replica: %q", got)
	}
	z := zkClient(t, srv.Servers())
	rm := datadef.NewReplicaMeta()
	rm.Address, rm.Stat = datadef.Some("10.0.0.1:8500"), datadef.ModelStateAvailable
	for _, p := range []string{"/gip/service/m/ps:0/1", "/gip/service/m/lf:default/ps:1/00000000002"} {
		if err := z.CreateOrSet(context.Background(), p, rm.Serialize()); err != nil {
			t.Fatal(err)
		}
	}
	want := "/gip/service/m/lf:default/ps:1/00000000002\tarchon_address: None\taddress: 10.0.0.1:8500\tstate: AVAILABLE\n" +
		"/gip/service/m/ps:0/1\tarchon_address: None\taddress: 10.0.0.1:8500\tstate: AVAILABLE\n"
	if got := client("--cmd_type", "addr"); got != want {
		t.Errorf("addr:\n%q\nwant\n%q", got, want)
	}
	client("--cmd_type", "clean", "--args", "addr")
	if kids := children(t, z, "/gip/service"); len(kids) != 0 {
		t.Errorf("service after clean addr: %q", kids)
	}
	if _, _, err := runCLI(t, "agent-client", "--conf", conf, "--cmd_type", "get", "--args", "info"); err == nil || !strings.HasPrefix(err.Error(), "not implemented: ") {
		t.Errorf("get info: %v, want not implemented", err)
	}
}

// TestAgentMPS: a dense v1 conf with dense_service_num 2 runs two agents (this test binary
// as monolith), child i with REPLICA_ID = 3 × 2 + i, each with its own TF Serving double;
// both register dense:0 replicas, and cancelling the parent (SIGTERM) stops both, whose
// replica nodes then disappear. The base replica id 3 comes from REPLICA_ID or from the
// conf's replica_id, which must not beat the id the parent gives each child.
func TestAgentMPS(t *testing.T) {
	for _, tc := range []struct{ name, conf, env string }{
		{"env", "", "3"},
		{"conf", "replica_id 3\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { testAgentMPS(t, tc.conf, tc.env) })
	}
}

// freePorts returns a port P such that P…P+n-1 were all free a moment ago.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{l}
		ok := p+n-1 <= 65535
		for k := 1; ok && k < n; k++ {
			lk, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+k))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, lk)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

func testAgentMPS(t *testing.T, extraConf, replicaEnv string) {
	srv := zktest.Start(t)
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "dense_0", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "dense.conf")
	text := fmt.Sprintf("bzid gip\nbase_name m\nbase_path %s\ndeploy_type dense\ndense_alone true\ndense_service_num 2\nagent_version 1\nzk_servers %s\n%s", base, srv.Addr(), extraConf)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envTestMain, "1")
	t.Setenv("REPLICA_ID", replicaEnv)
	if replicaEnv == "" {
		os.Unsetenv("REPLICA_ID") // t.Setenv restores it afterwards
	}
	t.Setenv("MONOLITH_TFS_BINARY", os.Args[0]+" fake-tfserving")
	// Both children bind the one agent port of the host (PORT2) with SO_REUSEPORT.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, agentPort, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	t.Setenv("PORT2", agentPort)
	// Metrics: the parent on P, child i on P+1+i.
	mport := freePorts(t, 3)
	tfsDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr syncbuf.Buffer
	go func() {
		done <- run(ctx, []string{"agent", "--conf", conf, "--metrics-listen", "127.0.0.1:" + strconv.Itoa(mport),
			"--agent_host", "127.0.0.1", "--tfs_dir", tfsDir, "--stop-grace", "5s"}, io.Discard, &stderr)
	}()
	defer func() { cancel(); <-done }()

	z := zkClient(t, srv.Servers())
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(children(t, z, "/gip/service/m/dense:0"), []string{"6", "7"}) {
		if time.Now().After(deadline) {
			t.Fatalf("dense:0 replicas %q, want [6 7]", children(t, z, "/gip/service/m/dense:0"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The children got the parent's flags.
	kids := procsWith(conf)
	if len(kids) != 2 {
		t.Errorf("%d processes run the conf, want the 2 MPS agents", len(kids))
	}
	for _, pid := range kids {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		for _, want := range []string{"--agent_host=127.0.0.1", "--tfs_dir=" + tfsDir, "--stop-grace=5s"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("MPS agent %d runs %q, without %s", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}), want)
			}
		}
	}
	// Each child reports its replica's state (v1: the node it writes) and its ZooKeeper
	// session in its own metrics.
	for i, id := range []string{"6", "7"} {
		addr := "127.0.0.1:" + strconv.Itoa(mport+1+i)
		path := "/gip/service/m/dense:0/" + id
		deadline := time.Now().Add(30 * time.Second)
		for {
			fams, err := metricsrv.Scrape(ctx, addr)
			v, ok := metricsrv.Value(fams, "monolith_agent_model_state", "model", path, "state", "AVAILABLE")
			_, zok := metricsrv.Value(fams, "monolith_zk_session_events_total", "state", "has_session")
			if err == nil && ok && v == 1 && zok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("child %d metrics at %s: %v; state of %s %v (present %v), zk session events present %v\n%s", i, addr, err, path, v, ok, zok, stderr.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cancel()
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("MPS parent after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("MPS parent did not stop")
	}
	if kids := children(t, z, "/gip/service/m/dense:0"); len(kids) != 0 {
		t.Errorf("dense:0 replicas after stop: %q", kids)
	}
}

// TestSuperviseChildren: the MPS parent's children get SIGTERM when it stops, and one that
// ignores it is killed after the grace; a child that fails stops the others and is named.
func TestSuperviseChildren(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	stubborn := func() *exec.Cmd { return exec.Command("/bin/sh", "-c", `trap "" TERM; exec sleep 30`) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- superviseChildren(ctx, []*exec.Cmd{stubborn(), stubborn()}, 300*time.Millisecond, log) }()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("stopping children that ignore SIGTERM took %v, want about the 300 ms grace", took)
		}
		if err != nil {
			t.Errorf("a stop is no failure: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("children that ignore SIGTERM were never killed")
	}

	fails := exec.Command("/bin/sh", "-c", "exit 3")
	err := superviseChildren(context.Background(), []*exec.Cmd{exec.Command("/bin/sh", "-c", "exec sleep 30"), fails}, time.Second, log)
	if err == nil || !strings.Contains(err.Error(), "MPS agent 1") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a failing child: %v, want it named", err)
	}
}

// TestAgentRunsServeByDefault: with MONOLITH_TFS_BINARY unset or blank, the agent's TF
// Serving is this binary's serve command, bound to the agent's host and given the agent's
// TLS flags; a value set is kept (and is not told about TLS).
func TestAgentRunsServeByDefault(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tc := tlsconf.Config{CA: "/x/ca.pem", Cert: "/x/c.pem", Key: "/x/k.pem", Mutual: true}
	for _, tc := range []struct {
		set  string
		tls  tlsconf.Config
		want string
		self bool
	}{
		{"", tlsconf.Config{}, self + " serve --host=127.0.0.2", true},
		{"  ", tlsconf.Config{}, self + " serve --host=127.0.0.2", true},
		{"", tc, self + " serve --host=127.0.0.2 --tls-ca /x/ca.pem --tls-cert /x/c.pem --tls-key /x/k.pem --tls-mutual", true},
		{"/opt/tfs --x", tc, "/opt/tfs --x", false},
	} {
		t.Setenv("MONOLITH_TFS_BINARY", tc.set)
		getenv, selfServe, err := tfsBinaryEnv("127.0.0.2", tc.tls)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := getenv("MONOLITH_TFS_BINARY"); !ok || got != tc.want || selfServe != tc.self {
			t.Errorf("MONOLITH_TFS_BINARY=%q, TLS %v: reads %q (self %v), want %q (%v)", tc.set, tc.tls.Enabled(), got, selfServe, tc.want, tc.self)
		}
	}
	t.Setenv("MONOLITH_TFS_BINARY", "")
	if _, _, err := tfsBinaryEnv("127.0.0.1", tlsconf.Config{CA: "/my certs/ca.pem"}); err == nil || !strings.Contains(err.Error(), "white space") {
		t.Errorf("a TLS path with a space: %v, want an error", err)
	}
}

// TestAdvertisedIP: the agent publishes MY_HOST_IP when set, its loopback bind address as
// it is, and otherwise the reference's local address.
func TestAdvertisedIP(t *testing.T) {
	for _, tc := range []struct {
		env        map[string]string
		host, want string
	}{
		{map[string]string{"MY_HOST_IP": "10.1.2.3"}, "127.0.0.1", "10.1.2.3"},
		{nil, "127.0.0.1", "127.0.0.1"},
		{nil, "::1", "::1"},
		{map[string]string{"MY_HOST_IP": "10.1.2.3"}, "::", "10.1.2.3"},
	} {
		if got := advertisedIP(config.MapEnv(tc.env), tc.host); got != tc.want {
			t.Errorf("env %v, agent_host %s: %q, want %q", tc.env, tc.host, got, tc.want)
		}
	}
	if got := advertisedIP(config.MapEnv(nil), "::"); got == "::" || got == "" {
		t.Errorf("agent_host ::, no MY_HOST_IP: %q, want the local address", got)
	}
}
