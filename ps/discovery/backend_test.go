package discovery

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/ps/discovery/discoverytest"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// TestTFConfig: identities and queries of the TF_CONFIG backend, and its errors.
func TestTFConfig(t *testing.T) {
	const cluster = `"cluster": {"chief": ["c:1"], "ps": ["p0:2", "p1:2"], "worker": ["w0:3", "w1:3"]}`
	for _, tc := range []struct {
		js   string
		want Identity
		err  string
	}{
		{`{` + cluster + `, "task": {"type": "chief", "index": 0}}`, Identity{"worker", 0, "c:1"}, ""},
		{`{` + cluster + `, "task": {"type": "worker", "index": 1}}`, Identity{"worker", 2, "w1:3"}, ""},
		{`{` + cluster + `, "task": {"type": "ps", "index": 1}}`, Identity{"ps", 1, "p1:2"}, ""},
		{`{"cluster": {"worker": ["w0:3"]}, "task": {"type": "worker", "index": 0}}`, Identity{"worker", 0, "w0:3"}, ""},
		{`{` + cluster + `, "task": {"type": "ps", "index": 2}}`, Identity{}, "not in cluster.ps"},
		{`{` + cluster + `}`, Identity{}, "task.type and task.index"},
		{`{"cluster": {"ps": ["nope"]}, "task": {"type": "ps", "index": 0}}`, Identity{}, "cluster.ps[0]"},
		{`{`, Identity{}, "tf_config"},
	} {
		b, err := NewTFConfig(tc.js)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: %v, want an error with %q", tc.js, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.js, err)
		}
		if got := b.Identity(); got != tc.want {
			t.Errorf("%s: identity %+v, want %+v", tc.js, got, tc.want)
		}
	}
	b, _ := NewTFConfig(`{` + cluster + `, "task": {"type": "ps", "index": 0}}`)
	ctx := context.Background()
	if w, _ := b.Query(ctx, "worker"); !maps.Equal(w, map[int]string{0: "c:1", 1: "w0:3", 2: "w1:3"}) {
		t.Errorf("workers %v", w)
	}
	if p, _ := b.Query(ctx, "ps"); !maps.Equal(p, map[int]string{0: "p0:2", 1: "p1:2"}) {
		t.Errorf("ps %v", p)
	}
	if _, err := b.Query(ctx, "chief"); err == nil {
		t.Error("query chief succeeded")
	}
	if b.Register(ctx, "ps", 0, "x:1") != nil || b.Close() != nil || b.Close() != nil {
		t.Error("no-ops failed")
	}
	// New dispatches and requires tf_config.
	if _, id, err := New(ctx, Config{Type: TypePrimus, TFConfig: `{` + cluster + `, "task": {"type": "worker", "index": 0}}`}, envOf(nil)); err != nil || id.Index != 1 {
		t.Errorf("New primus: %+v, %v", id, err)
	}
	for _, c := range []Config{{Type: TypePrimus}, {Type: "etcd"}, {Type: TypeConsul}, {Type: TypeMLP}} {
		if _, _, err := New(ctx, c, envOf(nil)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("New(%+v): %v", c, err)
		}
	}
	if b, _, err := New(ctx, Config{IsLocal: true, Type: TypeConsul}, envOf(nil)); b != nil || err != nil {
		t.Errorf("local job: %v, %v", b, err)
	}
}

// TestZKBackend registers workers and a PS against a real ZooKeeper: /monolith/{job}/
// {name}.{index} nodes with "host:port", queries by name, re-registration replacing the
// address, deregistration, Close deleting the nodes (idempotent), and ClearZKPath.
func TestZKBackend(t *testing.T) {
	srv := zktest.Start(t)
	log := zktest.NewLogger(t).Slog()
	ctx := testCtx(t)
	b, _, err := New(ctx, Config{Type: TypeZK, JobName: "job1", ZKServers: srv.Addr(), Logger: log}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	z := b.(*ZK)
	for _, r := range []struct {
		name string
		i    int
		addr string
	}{{"worker", 0, "10.0.0.1:1000"}, {"worker", 1, "10.0.0.2:1000"}, {"ps", 0, "10.0.0.3:2000"}} {
		if err := z.Register(ctx, r.name, r.i, r.addr); err != nil {
			t.Fatal(err)
		}
	}
	if w, err := z.Query(ctx, "worker"); err != nil || !maps.Equal(w, map[int]string{0: "10.0.0.1:1000", 1: "10.0.0.2:1000"}) {
		t.Errorf("workers %v, %v", w, err)
	}
	conn := srv.Connect(t)
	data, st, err := conn.Get("/monolith/job1/ps.0")
	if err != nil || string(data) != "10.0.0.3:2000" || st.EphemeralOwner == 0 {
		t.Fatalf("ps.0 node: %q %+v %v", data, st, err)
	}
	if err := z.Register(ctx, "worker", 1, "10.0.0.9:1000"); err != nil {
		t.Fatal(err)
	}
	if err := z.Deregister(ctx, "worker", 0, ""); err != nil {
		t.Fatal(err)
	}
	if w, _ := z.Query(ctx, "worker"); !maps.Equal(w, map[int]string{1: "10.0.0.9:1000"}) {
		t.Errorf("workers after re-register and deregister: %v", w)
	}
	// Another process's node shows up; an empty one is left out.
	if _, err := conn.Create("/monolith/job1/ps.1", []byte("10.0.0.4:2000"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/monolith/job1/ps.2", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if p, _ := z.Query(ctx, "ps"); !maps.Equal(p, map[int]string{0: "10.0.0.3:2000", 1: "10.0.0.4:2000"}) {
		t.Errorf("ps %v", p)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if ok, _, _ := conn.Exists("/monolith/job1/ps.0"); ok {
		t.Error("Close left ps.0")
	}
	if err := z.Register(ctx, "ps", 5, "1.2.3.4:5"); err == nil {
		t.Error("Register after Close succeeded")
	}
	for _, bad := range [][3]string{{"", "0", "a:1"}, {"a/b", "0", "a:1"}, {"ps", "-1", "a:1"}, {"ps", "0", "nohost"}} {
		b2, err := NewZK(ctx, "job2", srv.Addr(), "", log)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := strconv.Atoi(bad[1])
		if err := b2.Register(ctx, bad[0], i, bad[2]); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Register%v: %v", bad, err)
		}
		b2.Close()
	}
	// ClearZKPath: a job that never ran is nothing to clear; without force an existing job
	// folder is an error naming its children.
	if err := ClearZKPath(ctx, srv.Addr(), "never-ran", false, log); err != nil {
		t.Errorf("ClearZKPath of a job that never ran: %v", err)
	}
	if ok, _, _ := conn.Exists("/monolith/never-ran"); ok {
		t.Error("ClearZKPath created the folder of a job that never ran")
	}
	if err := ClearZKPath(ctx, srv.Addr(), "job1", false, log); err == nil || !strings.Contains(err.Error(), "ps.1") {
		t.Errorf("ClearZKPath without force: %v", err)
	}
	if err := ClearZKPath(ctx, srv.Addr(), "job1", true, log); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := conn.Exists("/monolith/job1"); ok {
		t.Error("ClearZKPath with force left /monolith/job1")
	}
}

// TestMLP: addresses, identity and the register filter from the MLP environment, the MPI
// worker rule, and the PS port wait.
func TestMLP(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, psPort, _ := net.SplitHostPort(lis.Addr().String())
	env := map[string]string{
		"MLP_ROLE": "worker", "MLP_ROLE_INDEX": "1", "MLP_WORKER_NUM": "2", "MLP_PS_NUM": "1",
		"MLP_WORKER_0_PRIMARY_HOST": "10.0.0.1", "MLP_WORKER_0_PORT": "1000",
		"MLP_WORKER_1_PRIMARY_HOST": "'10.0.0.2'", "MLP_WORKER_1_PORT": " 1001 ",
		"MLP_PS_0_PRIMARY_HOST": "127.0.0.1", "MLP_PS_0_PORT": psPort,
	}
	m, err := NewMLP(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if id := m.Identity(); id != (Identity{"worker", 1, "10.0.0.2:1001"}) {
		t.Errorf("identity %+v", id)
	}
	if w, _ := m.Query(ctx, "worker"); !maps.Equal(w, map[int]string{0: "10.0.0.1:1000", 1: "10.0.0.2:1001"}) {
		t.Errorf("workers %v", w)
	}
	if p, err := m.Query(ctx, "ps"); err != nil || !maps.Equal(p, map[int]string{0: lis.Addr().String()}) {
		t.Errorf("ps %v, %v", p, err)
	}
	if err := m.Deregister(ctx, "worker", 0, "localhost:1000"); err != nil {
		t.Fatal(err)
	}
	if w, _ := m.Query(ctx, "worker"); len(w) != 1 {
		t.Errorf("deregistered worker still listed: %v", w)
	}
	if err := m.Register(ctx, "worker", 0, "10.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		i    int
		addr string
	}{{"worker", 0, "10.0.0.1:9"}, {"worker", 0, "10.9.9.9:1000"}, {"worker", 2, "10.0.0.1:1000"}, {"chief", 0, "a:1"}} {
		if err := m.Register(ctx, bad.name, bad.i, bad.addr); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Register(%v): %v", bad, err)
		}
	}
	// A PS that never listens: the wait is bounded.
	lis2, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := lis2.Addr().String()
	lis2.Close()
	h, p, _ := net.SplitHostPort(dead)
	env["MLP_PS_0_PRIMARY_HOST"], env["MLP_PS_0_PORT"] = h, p
	m.PSWait = 300 * time.Millisecond
	if _, err := m.Query(ctx, "ps"); err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("dead PS: %v", err)
	}
	// MPI worker: rank, size, worker 0's port + rank, host by local size.
	mpi := map[string]string{"MLP_ROLE": "WORKER", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
		"MLP_WORKER_0_PORT": "2000", "MLP_WORKER_0_PRIMARY_HOST": "h0", "MLP_WORKER_1_PRIMARY_HOST": "h1"}
	m2, err := NewMLP(envOf(mpi))
	if err != nil {
		t.Fatal(err)
	}
	if id := m2.Identity(); id != (Identity{"worker", 3, "h1:2003"}) {
		t.Errorf("MPI identity %+v", id)
	}
	if w, _ := m2.Query(ctx, "worker"); len(w) != 4 || w[0] != "h0:2000" || w[2] != "h1:2002" {
		t.Errorf("MPI workers %v", w)
	}
	for _, e := range []map[string]string{{}, {"MLP_ROLE": "ps", "MLP_ROLE_INDEX": "x"}} {
		if _, err := NewMLP(envOf(e)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewMLP(%v): %v", e, err)
		}
	}
}

// TestConsul runs the Consul client against a local HTTP server implementing the agent
// endpoints it uses (no Consul server can be installed here): register with tags and a TTL
// check kept passing, lookups grouped by name, an older entry of the same index replaced,
// deregistration, the "blacklisted" error, and the agent address rules.
func TestConsul(t *testing.T) {
	agent := discoverytest.NewConsul(t)
	c := NewConsulAt("my.psm", agent.URL(), agent.Client())
	c.DedupeWait, c.VisiblePoll, c.TTLPass, c.RetryBackoff = time.Millisecond, time.Millisecond, 5*time.Millisecond, time.Millisecond
	ctx := testCtx(t)
	for _, r := range []struct {
		name string
		i    int
		addr string
	}{{"ps", 0, "10.0.0.1:2000"}, {"ps", 1, "10.0.0.2:2001"}, {"worker", 0, "10.0.0.3:3000"}} {
		if err := c.Register(ctx, r.name, r.i, r.addr); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := c.Query(ctx, "ps"); err != nil || !maps.Equal(p, map[int]string{0: "10.0.0.1:2000", 1: "10.0.0.2:2001"}) {
		t.Errorf("ps %v, %v", p, err)
	}
	// PS 1 moves: the older entry is deregistered first.
	if err := c.Register(ctx, "ps", 1, "10.0.0.5:2005"); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Query(ctx, "ps"); !maps.Equal(p, map[int]string{0: "10.0.0.1:2000", 1: "10.0.0.5:2005"}) {
		t.Errorf("ps after the move %v", p)
	}
	deadline := time.Now().Add(wait)
	for {
		if agent.Passes("my.psm-2000") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the TTL check was not passed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Deregister(ctx, "worker", 0, "10.0.0.3:3000"); err != nil {
		t.Fatal(err)
	}
	if w, _ := c.Query(ctx, "worker"); len(w) != 0 {
		t.Errorf("workers after deregister %v", w)
	}
	if err := c.Close(); err != nil || c.Close() != nil {
		t.Errorf("Close: %v", err)
	}
	agent.Hide()
	c.VisibleTries = 3
	if err := c.Register(ctx, "ps", 7, "10.0.0.7:2007"); !errors.Is(err, ErrBlacklisted) {
		t.Errorf("invisible registration: %v", err)
	}
	c.Close()
	// A dead agent: the connection error after the retries.
	dead := NewConsulAt("p", "http://127.0.0.1:1", http.DefaultClient)
	dead.Retries, dead.RetryBackoff = 2, time.Millisecond
	if _, err := dead.Query(ctx, "ps"); err == nil || !strings.Contains(err.Error(), "/v1/lookup/name") {
		t.Errorf("dead agent: %v", err)
	}
	// Agent address rules.
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CONSUL_HTTP_HOST": "10.1.1.1", "CONSUL_HTTP_PORT": "8500"}, "http://10.1.1.1:8500"},
		{map[string]string{"TCE_HOST_IP": "fe80::1"}, "http://[fe80::1]:2280"},
	} {
		c, err := NewConsul("p", envOf(tc.env))
		if err != nil || c.base != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.env, c.base, err, tc.want)
		}
	}
	if !fileExists(consulSocket) {
		if c, _ := NewConsul("p", envOf(nil)); c.base != "http://127.0.0.1:2280" {
			t.Errorf("default agent %q", c.base)
		}
	}
}

func FuzzTFConfig(f *testing.F) {
	f.Add(`{"cluster": {"chief": ["c:1"], "ps": ["p:2"], "worker": ["w:3"]}, "task": {"type": "worker", "index": 0}}`)
	f.Add(`{"task": {"type": "ps", "index": -1}}`)
	f.Fuzz(func(t *testing.T, js string) {
		b, err := NewTFConfig(js)
		if err != nil {
			return
		}
		id := b.Identity()
		if id.Addr == "" || id.Index < 0 {
			t.Fatalf("%s: identity %+v", js, id)
		}
		for _, name := range []string{"ps", "worker"} {
			if _, err := b.Query(context.Background(), name); err != nil {
				t.Fatal(err)
			}
		}
	})
}
