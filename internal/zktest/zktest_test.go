package zktest

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServer(t *testing.T) {
	start := time.Now()
	s := Start(t)
	t.Logf("server %s up in %v", s.Addr(), time.Since(start).Round(time.Millisecond))
	if got := s.FourLetter(t, "ruok"); got != "imok" {
		t.Errorf("ruok = %q", got)
	}
	c := s.Connect(t)
	if _, err := c.Create("/x", []byte("y"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if b, _, err := c.Get("/x"); err != nil || string(b) != "y" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if !s.HasSession(t, c.SessionID()) {
		t.Errorf("session %#x not in dump:\n%s", c.SessionID(), s.FourLetter(t, "dump"))
	}
}

// TestExpireSessions checks the proxy: a session behind it expires on the server (its
// ephemeral node disappears for a direct client), and the client learns it on reconnect.
func TestExpireSessions(t *testing.T) {
	s := Start(t)
	p := s.NewProxy(t)
	direct := s.Connect(t)

	conn, events, err := zk.Connect(p.Servers(), time.Minute, zk.WithLogInfo(false), zk.WithLogger(NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitState(t, events, zk.StateHasSession)
	if _, err := conn.Create("/e", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	old := conn.SessionID()
	begin := time.Now()
	p.ExpireSessions(t, old)
	t.Logf("expired in %v", time.Since(begin).Round(time.Millisecond))
	// The direct client's own 1 s session can expire too on a loaded machine (go-zookeeper
	// then reconnects with a new one): retry its errors, within a bound.
	for deadline := time.Now().Add(20 * time.Second); ; {
		ok, _, err := direct.Exists("/e")
		if err == nil {
			if ok {
				t.Fatal("ephemeral node still exists after expiry")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ephemeral node after expiry: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitState(t, events, zk.StateExpired)
	waitState(t, events, zk.StateHasSession)
	if conn.SessionID() == old {
		t.Error("same session after expiry")
	}
	if _, err := conn.Create("/e", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create on the new session: %v", err)
	}
	// The direct client's own 1 s session can expire on a loaded machine (go-zookeeper then
	// reconnects with a new one): look until it answers, within a bound.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, _, err := direct.Exists("/e")
		if ok && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node on the new session (exists=%t, err=%v)", ok, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitState(t *testing.T, events <-chan zk.Event, want zk.State) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %v event", want)
		}
	}
}

func TestHasSessionParsesDump(t *testing.T) {
	s := Start(t)
	c := s.Connect(t)
	dump := s.FourLetter(t, "dump")
	if !strings.Contains(dump, "SessionTracker") {
		t.Fatalf("unexpected dump:\n%s", dump)
	}
	if s.HasSession(t, c.SessionID()+1) {
		t.Error("an unknown session is reported")
	}
}

// TestRestart: a restarted server keeps its port and its persistent nodes.
func TestRestart(t *testing.T) {
	s := Start(t)
	c := s.Connect(t)
	if _, err := c.Create("/p", []byte("kept"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s.Restart(t, 200*time.Millisecond)
	fresh := s.Connect(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _, err := fresh.Get("/p")
		if err == nil {
			if string(data) != "kept" {
				t.Fatalf("persistent node after restart holds %q", data)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("persistent node after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
