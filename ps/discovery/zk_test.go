package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/internal/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 20 * time.Second // bound of every wait on ZooKeeper

// recorder collects onChange calls.
type recorder struct {
	mu    sync.Mutex
	calls [][]string
	ch    chan struct{} // signalled after each call
}

func (r *recorder) onChange(addrs []string) {
	r.mu.Lock()
	r.calls = append(r.calls, addrs)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *recorder) latest() ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return nil, false
	}
	return r.calls[len(r.calls)-1], true
}

// waitFor waits until the latest report equals want.
func (r *recorder) waitFor(t *testing.T, want ...string) {
	t.Helper()
	timeout := time.After(wait)
	for {
		if got, ok := r.latest(); ok && slices.Equal(got, want) {
			return
		}
		select {
		case <-r.ch:
		case <-time.After(100 * time.Millisecond):
		case <-timeout:
			got, _ := r.latest()
			t.Fatalf("watcher reports %q, want %q", got, want)
		}
	}
}

// checkNoRepeats fails when two consecutive reports are equal.
func (r *recorder) checkNoRepeats(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 1; i < len(r.calls); i++ {
		if slices.Equal(r.calls[i], r.calls[i-1]) {
			t.Errorf("reports %d and %d are both %q", i-1, i, r.calls[i])
		}
	}
}

// contains reports whether the reports include want, in order, as a subsequence.
func (r *recorder) contains(want ...[]string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := 0
	for _, c := range r.calls {
		if i < len(want) && slices.Equal(c, want[i]) {
			i++
		}
	}
	return i == len(want)
}

// startWatch runs Watch until the test ends and checks that it returns nil.
func startWatch(t *testing.T, servers []string, root string, n int, logger *slog.Logger) *recorder {
	t.Helper()
	r := &recorder{ch: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, servers, root, n, logger, r.onChange) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch = %v", err)
			}
		case <-time.After(wait):
			t.Error("Watch did not return after cancel")
		}
		r.checkNoRepeats(t)
	})
	return r
}

func register(t *testing.T, servers []string, root string, shard, n int, addr string, logger *slog.Logger) *Registration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	reg, err := Register(ctx, servers, root, shard, n, addr, logger)
	if err != nil {
		t.Fatalf("Register shard %d: %v", shard, err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

func TestRegisterAndWatch(t *testing.T) {
	srv := zktest.Start(t)
	log := zktest.NewLogger(t).Slog()
	direct := srv.Connect(t)
	const root = "/monolith/model/ps"
	w := startWatch(t, srv.Servers(), root, 3, log)
	w.waitFor(t, "", "", "") // the root does not exist yet: no shards

	r0 := register(t, srv.Servers(), root, 0, 3, "10.0.0.1:9000", log)
	r1 := register(t, srv.Servers(), root, 1, 3, "10.0.0.2:9000", log)
	w.waitFor(t, "10.0.0.1:9000", "10.0.0.2:9000", "")

	data, stat, err := direct.Get(root + "/shard-00001")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"shard":1,"num_shards":3,"addr":"10.0.0.2:9000"}`; string(data) != want {
		t.Errorf("node data %s, want %s", data, want)
	}
	if stat.EphemeralOwner == 0 {
		t.Error("the shard node is not ephemeral")
	}
	if r1.Path() != root+"/shard-00001" || r1.Registrations() != 1 {
		t.Errorf("Path = %q, Registrations = %d", r1.Path(), r1.Registrations())
	}

	if err := r1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	w.waitFor(t, "10.0.0.1:9000", "", "")
	if ok, _, _ := direct.Exists(root + "/shard-00001"); ok {
		t.Error("the node survives Close")
	}
	if err := r0.Close(); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, "", "", "")
	// The parents created by Register are persistent.
	if ok, _, _ := direct.Exists(root); !ok {
		t.Error("root vanished")
	}
}

// TestRegistrationSurvivesExpiry expires a registration's session behind a proxy: the
// watcher (connected directly) sees the node go, then come back when the registration has
// reconnected on a new session.
func TestRegistrationSurvivesExpiry(t *testing.T) {
	srv := zktest.Start(t)
	log := zktest.NewLogger(t).Slog()
	proxy := srv.NewProxy(t)
	const root = "/ps"
	w := startWatch(t, srv.Servers(), root, 2, log)
	reg := register(t, proxy.Servers(), root, 1, 2, "ps1:7000", log)
	w.waitFor(t, "", "ps1:7000")

	again := reg.Registered()
	old := reg.c.SessionID()
	begin := time.Now()
	proxy.ExpireSessions(t, old)
	w.waitFor(t, "", "")
	select {
	case <-again:
	case <-time.After(wait):
		t.Fatal("no re-registration after the session expired")
	}
	t.Logf("re-registered %v after the cut", time.Since(begin).Round(time.Millisecond))
	w.waitFor(t, "", "ps1:7000")
	if reg.Registrations() != 2 || reg.c.SessionID() == old {
		t.Errorf("Registrations = %d, session %#x (old %#x)", reg.Registrations(), reg.c.SessionID(), old)
	}
	if !w.contains([]string{"", "ps1:7000"}, []string{"", ""}, []string{"", "ps1:7000"}) {
		t.Errorf("reports %q", w.calls)
	}
}

// TestWatchSurvivesExpiry expires the watcher's session: membership changes made while it
// was cut off are reported once it has a new session.
func TestWatchSurvivesExpiry(t *testing.T) {
	srv := zktest.Start(t)
	log, rec := recordingLogger(t)
	proxy := srv.NewProxy(t)
	const root = "/ps"
	r0 := register(t, srv.Servers(), root, 0, 2, "ps0:7000", log)
	w := startWatch(t, proxy.Servers(), root, 2, log)
	w.waitFor(t, "ps0:7000", "")

	proxy.Cut()
	if err := r0.Close(); err != nil {
		t.Fatal(err)
	}
	register(t, srv.Servers(), root, 1, 2, "ps1:7000", log)
	proxy.ExpireSessions(t) // still cut: the watcher's session expires, then the proxy heals
	w.waitFor(t, "", "ps1:7000")
	if !rec.contains("session has been expired") {
		t.Errorf("the watcher's session did not expire: %q", rec.lines)
	}

	// The re-armed watches keep working.
	register(t, srv.Servers(), root, 0, 2, "ps0:7001", log)
	w.waitFor(t, "ps0:7001", "ps1:7000")
}

// recordingHandler forwards records and keeps them as "LEVEL msg node=…".
type recordingHandler struct {
	slog.Handler
	rec *records
}

type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) contains(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.lines, func(l string) bool { return strings.Contains(l, sub) })
}

func recordingLogger(t *testing.T) (*slog.Logger, *records) {
	rec := &records{}
	return slog.New(recordingHandler{zktest.NewLogger(t).Slog().Handler(), rec}), rec
}

func (h recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "node" {
			line += " node=" + a.Value.String()
		}
		return true
	})
	h.rec.mu.Lock()
	h.rec.lines = append(h.rec.lines, line)
	h.rec.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return recordingHandler{h.Handler.WithAttrs(as), h.rec}
}

func TestMalformedNodesIgnored(t *testing.T) {
	srv := zktest.Start(t)
	log, rec := recordingLogger(t)
	direct := srv.Connect(t)
	const root = "/ps"
	acl := zk.WorldACL(zk.PermAll)
	if _, err := direct.Create(root, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{root + "/shard-00000", `{"shard":0,"num_shards":3,"addr":"ok:1"}`},
		{root + "/shard-00001", `{"shard":1,"num_shards":3,`},
		{root + "/shard-00002", `{"shard":2,"num_shards":4,"addr":"other-ring:1"}`},
		{root + "/shard-3", `{"shard":3,"num_shards":3,"addr":"x:1"}`},
		{root + "/lock", ``},
	} {
		if _, err := direct.Create(kv[0], []byte(kv[1]), 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	w := startWatch(t, srv.Servers(), root, 3, log)
	w.waitFor(t, "ok:1", "", "")
	for _, node := range []string{"/shard-00001", "/shard-00002", "/shard-3", "/lock"} {
		if !rec.contains("WARN ignoring a") || !rec.contains("node="+root+node) {
			t.Errorf("no warning naming %s%s: %q", root, node, rec.lines)
		}
	}

	// Fixing a node's data is seen through its data watch.
	if _, err := direct.Set(root+"/shard-00001", []byte(`{"shard":1,"num_shards":3,"addr":"fixed:1"}`), -1); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, "ok:1", "fixed:1", "")
	// An address change of a live node too.
	if _, err := direct.Set(root+"/shard-00000", []byte(`{"shard":0,"num_shards":3,"addr":"moved:2"}`), -1); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, "moved:2", "fixed:1", "")
	// Deleting the whole root means no shards.
	for _, p := range []string{"/shard-00000", "/shard-00001", "/shard-00002", "/shard-3", "/lock", ""} {
		if err := direct.Delete(root+p, -1); err != nil {
			t.Fatal(err)
		}
	}
	w.waitFor(t, "", "", "")
	register(t, srv.Servers(), root, 2, 3, "back:1", log)
	w.waitFor(t, "", "", "back:1")
}

// TestStaleNodeReplaced: a node left at the shard's path by another session (a previous
// run whose session is still alive) or a persistent one is replaced.
func TestStaleNodeReplaced(t *testing.T) {
	srv := zktest.Start(t)
	log := zktest.NewLogger(t).Slog()
	old := srv.Connect(t)
	acl := zk.WorldACL(zk.PermAll)
	if _, err := old.Create("/ps", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Create("/ps/shard-00000", []byte(`{"shard":0,"num_shards":1,"addr":"old:1"}`), zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Create("/ps/shard-00001", []byte(`persistent`), 0, acl); err != nil {
		t.Fatal(err)
	}
	r0 := register(t, srv.Servers(), "/ps", 0, 2, "new:1", log)
	register(t, srv.Servers(), "/ps", 1, 2, "new:2", log)
	data, stat, err := old.Get("/ps/shard-00000")
	if err != nil || stat.EphemeralOwner != r0.c.SessionID() || !strings.Contains(string(data), "new:1") {
		t.Errorf("node %s owned by %#x, want %#x (err %v)", data, stat.EphemeralOwner, r0.c.SessionID(), err)
	}
	if data, stat, err := old.Get("/ps/shard-00001"); err != nil || stat.EphemeralOwner == 0 || !strings.Contains(string(data), "new:2") {
		t.Errorf("persistent node not replaced: %s (err %v)", data, err)
	}
}

func TestRegisterContext(t *testing.T) {
	srv := zktest.Start(t)
	log := zktest.NewLogger(t).Slog()
	w := startWatch(t, srv.Servers(), "/ps", 1, log)

	// Register's context bounds the registration step only.
	ctx, cancel := context.WithCancel(context.Background())
	reg, err := Register(ctx, srv.Servers(), "/ps", 0, 1, "ps:1", log)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	w.waitFor(t, "ps:1")
	time.Sleep(3 * zktest.TickTime)
	if got, _ := w.latest(); !slices.Equal(got, []string{"ps:1"}) {
		t.Fatalf("after cancelling Register's context the watcher reports %q", got)
	}
	if err := reg.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	w.waitFor(t, "")

	// A server nobody answers on: Register gives up when its context ends.
	proxy := srv.NewProxy(t)
	proxy.Cut()
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if _, err := Register(ctx, proxy.Servers(), "/ps", 0, 1, "ps:1", log); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Register to a cut proxy = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Register took %v to give up", d)
	}
}

func TestInvalidArguments(t *testing.T) {
	ctx := context.Background()
	for i, call := range []func() error{
		func() error { _, err := Register(ctx, nil, "/ps", 0, 1, "h:1", nil); return err },
		func() error { _, err := Register(ctx, []string{"h:1"}, "ps", 0, 1, "h:1", nil); return err },
		func() error { _, err := Register(ctx, []string{"h:1"}, "/ps", 1, 1, "h:1", nil); return err },
		func() error { _, err := Register(ctx, []string{"h:1"}, "/ps", -1, 1, "h:1", nil); return err },
		func() error { _, err := Register(ctx, []string{"h:1"}, "/ps", 0, MaxShards+1, "h:1", nil); return err },
		func() error { _, err := Register(ctx, []string{"h:1"}, "/ps", 0, 1, "h", nil); return err },
		func() error { return Watch(ctx, nil, "/ps", 1, nil, func([]string) {}) },
		func() error { return Watch(ctx, []string{"h:1"}, "/", 1, nil, func([]string) {}) },
		func() error { return Watch(ctx, []string{"h:1"}, "/ps", 0, nil, func([]string) {}) },
	} {
		if err := call(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("call %d: %v, want ErrInvalidArgument", i, err)
		}
	}
}

func Example() {
	servers, err := ParseServers("127.0.0.1:2181")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = servers // Register(ctx, servers, "/monolith/ps", shard, n, addr, logger) on each PS;
	// Watch(ctx, servers, "/monolith/ps", n, logger, onChange) on each client.
	fmt.Println(NodeName(3))
	// Output: shard-00003
}
