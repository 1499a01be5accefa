package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/internal/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait on ZooKeeper (the machine is shared and slow).
const wait = 30 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	t.Cleanup(cancel)
	return ctx
}

func connectClient(t *testing.T, servers []string) *Client {
	t.Helper()
	return connectWithMetrics(t, servers, nil)
}

func connectWithMetrics(t *testing.T, servers []string, m *Metrics) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := Connect(ctx, Options{Servers: servers, SessionTimeout: zktest.SessionTimeout, Logger: zktest.NewLogger(t).Slog(), Metrics: m})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// eventually polls cond until it holds, failing after wait with msg().
func eventually(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", wait, msg())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// calls records callback arguments.
type calls[T any] struct {
	mu  sync.Mutex
	all []T
}

func (c *calls[T]) add(v T) {
	c.mu.Lock()
	c.all = append(c.all, v)
	c.mu.Unlock()
}

func (c *calls[T]) get() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

func (c *calls[T]) last() (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.all) == 0 {
		var zero T
		return zero, false
	}
	return c.all[len(c.all)-1], true
}

// TestNodesHoldEmptyBuffers: every node the client creates or sets without data holds an
// empty buffer, as Monolith's kazoo writes, not ZooKeeper's null data (which a Python peer
// reads as None): the parents EnsurePath and makepath create, and nodes created with nil.
func TestNodesHoldEmptyBuffers(t *testing.T) {
	srv := zktest.Start(t)
	c := connectClient(t, srv.Servers())
	ctx := testCtx(t)
	if err := c.EnsurePath(ctx, "/e/f"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, "/g/h/i", nil, true); err != nil {
		t.Fatal(err)
	}
	raw, _, err := gozk.Connect(srv.Servers(), 5*time.Second, gozk.WithLogger(discardZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, p := range []string{"/e", "/e/f", "/g", "/g/h", "/g/h/i"} {
		data, _, err := raw.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		if data == nil { // go-zookeeper decodes null data (length -1) as nil, empty as []byte{}
			t.Errorf("%s holds null data, want an empty buffer", p)
		}
	}
}

func TestClientOperations(t *testing.T) {
	srv := zktest.Start(t)
	c := connectClient(t, srv.Servers())
	ctx := testCtx(t)

	if err := c.EnsurePath(ctx, "/a/b/c"); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsurePath(ctx, "/a/b/c"); err != nil {
		t.Fatalf("EnsurePath twice: %v", err)
	}
	if err := c.Create(ctx, "/x/y/z", []byte("1"), true); err != nil {
		t.Fatalf("Create makepath: %v", err)
	}
	err := c.Create(ctx, "/x/y/z", []byte("2"), true)
	if !errors.Is(err, ErrNodeExists) || !strings.Contains(err.Error(), "/x/y/z") {
		t.Errorf("Create on an existing node = %v, want ErrNodeExists naming the path", err)
	}
	if err := c.Create(ctx, "/nope/child", nil, false); !errors.Is(err, ErrNoNode) {
		t.Errorf("Create without makepath under a missing parent = %v", err)
	}
	if err := c.CreateOrSet(ctx, "/x/y/z", []byte("3")); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateOrSet(ctx, "/p/q", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if data, stat, err := c.Get(ctx, "/x/y/z"); err != nil || string(data) != "3" || stat.EphemeralOwner != 0 {
		t.Errorf("Get = %q, %+v, %v", data, stat, err)
	}
	if err := c.Set(ctx, "/p/q", []byte("set")); err != nil {
		t.Fatal(err)
	}
	if data, _, _ := c.Get(ctx, "/p/q"); string(data) != "set" {
		t.Errorf("after Set: %q", data)
	}
	_, _, err = c.Get(ctx, "/missing/node")
	if !errors.Is(err, ErrNoNode) || !strings.Contains(err.Error(), "/missing/node") {
		t.Errorf("Get missing = %v, want ErrNoNode naming the path", err)
	}
	for _, n := range []string{"c", "a", "b"} {
		if err := c.EnsurePath(ctx, "/kids/"+n+"/deep"); err != nil {
			t.Fatal(err)
		}
	}
	if kids, err := c.Children(ctx, "/kids"); err != nil || !slices.Equal(kids, []string{"a", "b", "c"}) {
		t.Errorf("Children = %q, %v", kids, err)
	}
	if err := c.Delete(ctx, "/kids", false); !errors.Is(err, gozk.ErrNotEmpty) {
		t.Errorf("non-recursive Delete of a parent = %v", err)
	}
	if err := c.Delete(ctx, "/kids", true); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Exists(ctx, "/kids"); ok || err != nil {
		t.Errorf("Exists after recursive Delete = %v, %v", ok, err)
	}
	for _, bad := range []string{"", "rel", "/", "/a/", "/a//b"} {
		if err := c.EnsurePath(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("EnsurePath(%q) = %v", bad, err)
		}
	}
	// A context that ends bounds every call.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.Get(done, "/p/q"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled ctx = %v", err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := c.Get(ctx, "/p/q"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v", err)
	}
	if _, err := c.WatchChildren(ctx, "/p", func([]string) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Errorf("WatchChildren after Close = %v", err)
	}
}

func TestConnectFailsWithinContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	// Nothing listens on port 1 of the loopback.
	_, err := Connect(ctx, Options{Servers: []string{"127.0.0.1:1"}, Logger: zktest.NewLogger(t).Slog()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect = %v", err)
	}
	if _, err := Connect(ctx, Options{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Connect without servers = %v", err)
	}
}

// Without a deadline of its own, Connect gives up after ConnectTimeout (kazoo's start()
// timeout) instead of hanging on an unreachable server.
func TestConnectTimeout(t *testing.T) {
	_, err := Connect(context.Background(), Options{Servers: []string{"127.0.0.1:1"}, ConnectTimeout: 300 * time.Millisecond, Logger: zktest.NewLogger(t).Slog()})
	if err == nil || !strings.Contains(err.Error(), "no session within 300ms") {
		t.Fatalf("Connect = %v", err)
	}
}

func TestWatchChildren(t *testing.T) {
	srv := zktest.Start(t)
	c := connectClient(t, srv.Servers())
	ctx := testCtx(t)

	if _, err := c.WatchChildren(ctx, "/w", func([]string) bool { return true }); !errors.Is(err, ErrNoNode) {
		t.Fatalf("WatchChildren on a missing node = %v", err)
	}
	if err := c.EnsurePath(ctx, "/w/b"); err != nil {
		t.Fatal(err)
	}
	var rec calls[[]string]
	stopAt := 4
	w, err := c.WatchChildren(ctx, "/w", func(ch []string) bool {
		rec.add(ch)
		return len(rec.get()) < stopAt
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.get(); len(got) != 1 || !slices.Equal(got[0], []string{"b"}) {
		t.Fatalf("first call %q, want [[b]] before WatchChildren returns", got)
	}
	for _, step := range []struct {
		do   func() error
		want []string
	}{
		{func() error { return c.EnsurePath(ctx, "/w/a") }, []string{"a", "b"}},
		{func() error { return c.Delete(ctx, "/w/b", false) }, []string{"a"}},
		{func() error { return c.EnsurePath(ctx, "/w/c") }, []string{"a", "c"}}, // the 4th call returns false
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() bool { l, _ := rec.last(); return slices.Equal(l, step.want) },
			func() string { return "calls " + strings.Join(flat(rec.get()), " ") })
	}
	select {
	case <-w.Done():
	case <-time.After(wait):
		t.Fatal("the watch did not stop after its callback returned false")
	}
	if err := c.EnsurePath(ctx, "/w/d"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rec.get()); n != 4 {
		t.Errorf("%d calls after the callback returned false, want 4", n)
	}

	// Deleting the watched node ends the watch (kazoo's ChildrenWatch).
	if err := c.EnsurePath(ctx, "/gone"); err != nil {
		t.Fatal(err)
	}
	w2, err := c.WatchChildren(ctx, "/gone", func([]string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/gone", false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2.Done():
	case <-time.After(wait):
		t.Fatal("the watch survived the deletion of its node")
	}
	// Stop from outside.
	w3, err := c.WatchChildren(ctx, "/w", func([]string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	w3.Stop()
	<-w3.Done()
	if !w3.Stopped() || w3.Path() != "/w" {
		t.Errorf("Stopped = %v, Path = %q", w3.Stopped(), w3.Path())
	}
}

func flat(x [][]string) []string {
	out := make([]string, len(x))
	for i, s := range x {
		out[i] = "[" + strings.Join(s, ",") + "]"
	}
	return out
}

type dataCall struct {
	data    string
	present bool
	ev      DataEvent
}

func TestWatchData(t *testing.T) {
	srv := zktest.Start(t)
	c := connectClient(t, srv.Servers())
	ctx := testCtx(t)
	var rec calls[dataCall]
	w, err := c.WatchData(ctx, "/d/node", func(data []byte, stat *Stat, ev DataEvent) bool {
		rec.add(dataCall{string(data), stat != nil, ev})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	steps := []struct {
		do   func() error
		want dataCall
	}{
		{func() error { return c.CreateOrSet(ctx, "/d/node", []byte("v1")) }, dataCall{"v1", true, DataCreated}},
		{func() error { return c.Set(ctx, "/d/node", []byte("v2")) }, dataCall{"v2", true, DataChanged}},
		{func() error { return c.Delete(ctx, "/d/node", false) }, dataCall{"", false, DataDeleted}},
		{func() error { return c.Create(ctx, "/d/node", []byte("v3"), false) }, dataCall{"v3", true, DataCreated}},
	}
	if got := rec.get(); len(got) != 1 || got[0] != (dataCall{"", false, DataInitial}) {
		t.Fatalf("first call %+v", got)
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() bool { l, _ := rec.last(); return l == s.want }, func() string {
			l, _ := rec.last()
			return "last call " + l.ev.String() + " " + l.data + ", want " + s.want.ev.String()
		})
	}
	if n := len(rec.get()); n != 5 {
		t.Errorf("%d calls, want 5: %+v", n, rec.get())
	}
}

// TestSessionExpiryClient expires the client's session behind a proxy: its ephemeral
// nodes come back in the new session (S7), Lost is set then cleared, and its watches are
// re-armed and report what changed during the outage.
func TestSessionExpiryClient(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := connectWithMetrics(t, proxy.Servers(), m)
	direct := connectClient(t, srv.Servers())
	ctx := testCtx(t)

	if err := c.SetEphemeral(ctx, "/eph/one", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetEphemeral(ctx, "/eph/two", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetEphemeral(ctx, "/eph/gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteEphemeral(ctx, "/eph/gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteEphemeral(ctx, "/eph/gone"); err != nil {
		t.Fatalf("DeleteEphemeral of a missing node: %v", err)
	}
	if err := direct.EnsurePath(ctx, "/watched/a"); err != nil {
		t.Fatal(err)
	}
	var kids calls[[]string]
	if _, err := c.WatchChildren(ctx, "/watched", func(ch []string) bool { kids.add(ch); return true }); err != nil {
		t.Fatal(err)
	}
	var datas calls[dataCall]
	if _, err := c.WatchData(ctx, "/watched/a", func(d []byte, s *Stat, ev DataEvent) bool {
		datas.add(dataCall{string(d), s != nil, ev})
		return true
	}); err != nil {
		t.Fatal(err)
	}

	old := c.SessionID()
	again := c.Reregistered()
	proxy.Cut()
	// Changes during the outage.
	if err := direct.EnsurePath(ctx, "/watched/b"); err != nil {
		t.Fatal(err)
	}
	if err := direct.Set(ctx, "/watched/a", []byte("during")); err != nil {
		t.Fatal(err)
	}
	expireBehind(t, proxy, direct, "/eph/one")
	select {
	case <-again:
	case <-time.After(wait):
		t.Fatal("no re-registration after the session expired")
	}
	if c.SessionID() == old || c.Lost() || c.Reregistrations() < 1 {
		t.Errorf("session %#x (old %#x), Lost = %v, Reregistrations = %d", c.SessionID(), old, c.Lost(), c.Reregistrations())
	}
	// The metrics, scraped over HTTP: one expiry, at least a reconnect into the new session
	// (the cut may cost a reconnect of the old one too), the re-registrations.
	ms, err := metricsrv.Listen("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	fams, err := metricsrv.Scrape(ctx, ms.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name     string
		labels   []string
		min, max float64
	}{
		{"monolith_zk_session_expiries_total", nil, 1, 1},
		{"monolith_zk_session_events_total", []string{"state", "expired"}, 1, 1},
		{"monolith_zk_reconnects_total", nil, 1, 10},
		{"monolith_zk_session_events_total", []string{"state", "has_session"}, 2, 11},
		{"monolith_zk_reregistrations_total", nil, float64(c.Reregistrations()), float64(c.Reregistrations())},
	} {
		if got, ok := metricsrv.Value(fams, w.name, w.labels...); !ok || got < w.min || got > w.max {
			t.Errorf("%s%v = %v (present %v), want %v..%v", w.name, w.labels, got, ok, w.min, w.max)
		}
	}
	for path, want := range map[string]string{"/eph/one": "1", "/eph/two": "2"} {
		eventually(t, func() bool {
			data, stat, err := direct.Get(ctx, path)
			return err == nil && string(data) == want && stat.EphemeralOwner == c.SessionID()
		}, func() string { return path + " is not back with its data in the new session" })
	}
	if ok, _ := direct.Exists(ctx, "/eph/gone"); ok {
		t.Error("a deleted ephemeral node came back")
	}
	eventually(t, func() bool { l, _ := kids.last(); return slices.Equal(l, []string{"a", "b"}) },
		func() string { return "children calls " + strings.Join(flat(kids.get()), " ") })
	eventually(t, func() bool { l, _ := datas.last(); return l == dataCall{"during", true, DataChanged} },
		func() string { l, _ := datas.last(); return "data call " + l.data })
	// The re-armed watches keep working.
	if err := direct.EnsurePath(ctx, "/watched/c"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { l, _ := kids.last(); return slices.Equal(l, []string{"a", "b", "c"}) },
		func() string { return "children calls " + strings.Join(flat(kids.get()), " ") })
	// Updating an owned node in the new session keeps it owned.
	if err := c.SetEphemeral(ctx, "/eph/one", []byte("1b")); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		data, stat, err := direct.Get(ctx, "/eph/one")
		return err == nil && string(data) == "1b" && stat.EphemeralOwner == c.SessionID()
	}, func() string { return "/eph/one does not hold 1b in the current session" })
}

// TestConnectionLoss cuts the connection briefly: operations and watches carry on once it
// is back, whether or not the server kept the session.
func TestConnectionLoss(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	c := connectClient(t, proxy.Servers())
	direct := connectClient(t, srv.Servers())
	ctx := testCtx(t)
	if err := c.SetEphemeral(ctx, "/cl/me", []byte("m")); err != nil {
		t.Fatal(err)
	}
	var kids calls[[]string]
	if _, err := c.WatchChildren(ctx, "/cl", func(ch []string) bool { kids.add(ch); return true }); err != nil {
		t.Fatal(err)
	}
	old := c.SessionID()
	proxy.Cut()
	if err := direct.EnsurePath(ctx, "/cl/other"); err != nil {
		t.Fatal(err)
	}
	// An operation issued during the outage completes after it.
	res := make(chan error, 1)
	go func() { res <- c.CreateOrSet(ctx, "/cl/during", []byte("d")) }()
	time.Sleep(150 * time.Millisecond)
	proxy.Heal()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("CreateOrSet across the outage: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("CreateOrSet did not complete after the outage")
	}
	eventually(t, func() bool {
		l, _ := kids.last()
		return slices.Equal(l, []string{"during", "me", "other"})
	}, func() string { return "children calls " + strings.Join(flat(kids.get()), " ") })
	eventually(t, func() bool {
		_, stat, err := direct.Get(ctx, "/cl/me")
		return err == nil && stat.EphemeralOwner == c.SessionID()
	}, func() string { return "the ephemeral node is not owned by the current session" })
	t.Logf("session kept: %v", c.SessionID() == old)
}

// TestEphemeralSequential: the created node is numbered and owned by the session; a
// retried create finds the node of this session with its data instead of making a second
// one (another session's is not taken); DeleteEphemeral removes it.
func TestEphemeralSequential(t *testing.T) {
	srv := zktest.Start(t)
	c := connectClient(t, srv.Servers())
	other := connectClient(t, srv.Servers())
	ctx := testCtx(t)
	theirs, err := other.CreateEphemeralSequential(ctx, "/seq/n-", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateEphemeralSequential(ctx, "/seq/n-", []byte("a"))
	if err != nil || p == theirs || !strings.HasPrefix(p, "/seq/n-") || len(p) != len("/seq/n-")+10 {
		t.Fatalf("CreateEphemeralSequential = %q, %v (the other session's: %q)", p, err, theirs)
	}
	if _, stat, err := other.Get(ctx, p); err != nil || stat.EphemeralOwner != c.SessionID() {
		t.Errorf("%s: %v, owner %#x, want %#x", p, err, stat.EphemeralOwner, c.SessionID())
	}
	if got, ok := c.findSequential("/seq", "n-", []byte("a")); !ok || got != p {
		t.Errorf("a retry would adopt %q (%v), want %q", got, ok, p)
	}
	if got, ok := c.findSequential("/seq", "n-", []byte("b")); ok {
		t.Errorf("a retry with other data would adopt %q", got)
	}
	if err := c.DeleteEphemeral(ctx, p); err != nil {
		t.Fatal(err)
	}
	if kids, err := other.Children(ctx, "/seq"); err != nil || !slices.Equal(kids, []string{strings.TrimPrefix(theirs, "/seq/")}) {
		t.Errorf("after DeleteEphemeral /seq holds %q, %v", kids, err)
	}
}

// TestSetEphemeralReplacesStale: a node at the path held by another session (a previous
// run whose session lives on) is replaced, so it cannot vanish later with that session.
func TestSetEphemeralReplacesStale(t *testing.T) {
	srv := zktest.Start(t)
	a := connectClient(t, srv.Servers())
	b := connectClient(t, srv.Servers())
	ctx := testCtx(t)
	if err := a.SetEphemeral(ctx, "/stale/n", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.SetEphemeral(ctx, "/stale/n", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if data, stat, err := a.Get(ctx, "/stale/n"); err != nil || string(data) != "b" || stat.EphemeralOwner != b.SessionID() {
		t.Fatalf("node %q owner %#x (%v), want b's", data, stat.EphemeralOwner, err)
	}
	_ = a.Close()
	if data, _, err := b.Get(ctx, "/stale/n"); err != nil || string(data) != "b" {
		t.Fatalf("after the old session closed: %q, %v", data, err)
	}
}

// expireBehind cuts proxy until the server has expired the session owning the ephemeral
// node at path (seen from direct, which does not go through the proxy), then heals it.
// (zktest's ExpireSessions polls the server's "dump", which times out on a loaded machine.)
func expireBehind(t *testing.T, proxy *zktest.Proxy, direct *Client, path string) {
	t.Helper()
	proxy.Cut()
	defer proxy.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		ok, err := direct.Exists(ctx, path)
		if err != nil {
			t.Fatalf("waiting for the expiry: %v", err)
		}
		if !ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still exists %v after the cut", path, wait)
		case <-time.After(zktest.TickTime / 2):
		}
	}
}

// discardZK silences the raw go-zookeeper connection of a test.
type discardZK struct{}

func (discardZK) Printf(string, ...any) {}

// TestReconnectWithWatchesAndTraffic cuts the connection of a client that holds watches
// while requests are in flight, several times. On reconnect the library re-arms the
// watches from the last zxid it saw while the new connection's replies update it; under
// -race this pins that the two goroutines share that zxid safely (go-zookeeper v1.0.4
// did not: see third_party/go-zookeeper/zk/PATCHES.md).
func TestReconnectWithWatchesAndTraffic(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	c := connectClient(t, proxy.Servers())
	direct := connectClient(t, srv.Servers())
	ctx := testCtx(t)
	if err := direct.EnsurePath(ctx, "/rw/a"); err != nil {
		t.Fatal(err)
	}
	var kids calls[[]string]
	if _, err := c.WatchChildren(ctx, "/rw", func(ch []string) bool { kids.add(ch); return true }); err != nil {
		t.Fatal(err)
	}
	const rounds = 4
	for i := range rounds {
		proxy.Cut()
		// Requests issued as the connection breaks fail on its socket (a broken pipe the
		// client must retry); those issued once the library has noticed are queued and go
		// out first on the new connection, so their replies race the re-arming of the
		// watches.
		res := make(chan error, 6)
		for j := range 6 {
			if j == 3 {
				time.Sleep(50 * time.Millisecond)
			}
			go func() { res <- c.CreateOrSet(ctx, fmt.Sprintf("/rw/n%d-%d", i, j), []byte("x")) }()
		}
		time.Sleep(300 * time.Millisecond)
		proxy.Heal()
		for range 6 {
			select {
			case err := <-res:
				if err != nil {
					t.Fatalf("round %d: CreateOrSet across the outage: %v", i, err)
				}
			case <-time.After(wait):
				t.Fatalf("round %d: CreateOrSet did not complete after the outage", i)
			}
		}
	}
	eventually(t, func() bool { l, _ := kids.last(); return len(l) == 1+6*rounds }, func() string {
		l, _ := kids.last()
		return fmt.Sprintf("last children call has %d nodes, want %d", len(l), 1+6*rounds)
	})
}

// TestTransient: connection and session losses are retried, the socket error of a write on
// a broken connection among them (the library returns it as it is); answers of the server
// and the caller's own cancellation are not.
func TestTransient(t *testing.T) {
	brokenPipe := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection closed", gozk.ErrConnectionClosed, true},
		{"no server", gozk.ErrNoServer, true},
		{"session expired", gozk.ErrSessionExpired, true},
		{"session moved", fmt.Errorf("create /a: %w", gozk.ErrSessionMoved), true},
		{"broken pipe on write", brokenPipe, true},
		{"no node", gozk.ErrNoNode, false},
		{"node exists", gozk.ErrNodeExists, false},
		{"bad version", gozk.ErrBadVersion, false},
		{"canceled", context.Canceled, false},
		{"caller's deadline", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestZKLoggerStops: the library's messages reach the logger until Close stops it, and
// none after (its connection goroutine can still log once Conn.Close has returned).
func TestZKLoggerStops(t *testing.T) {
	var buf strings.Builder
	z := &zkLogger{l: slog.New(slog.NewTextHandler(&buf, nil))}
	z.Printf("connected to %s", "127.0.0.1:2181")
	if !strings.Contains(buf.String(), "zookeeper client: connected to 127.0.0.1:2181") {
		t.Fatalf("before stop: %q", buf.String())
	}
	z.stop()
	before := buf.String()
	z.Printf("failed to connect to %s", "127.0.0.1:2181")
	if buf.String() != before {
		t.Errorf("logged after stop: %q", strings.TrimPrefix(buf.String(), before))
	}
}
