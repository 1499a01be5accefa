package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/internal/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 20 * time.Second // bound of every wait on ZooKeeper

// TestZKBackendSurvivesExpiry cuts the ZK backend's session: its registration is re-created
// in the new session, and a reader on another connection sees the node go and come back.
func TestZKBackendSurvivesExpiry(t *testing.T) {
	srv := zktest.Start(t)
	log := zktest.NewLogger(t).Slog()
	proxy := srv.NewProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	z, err := NewZK(ctx, "exp", proxy.Addr(), "", log)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := z.Register(ctx, "ps", 1, "ps1:7000"); err != nil {
		t.Fatal(err)
	}
	reader, err := NewZK(ctx, "exp", srv.Addr(), "", log)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if got, err := reader.Query(ctx, "ps"); err != nil || got[1] != "ps1:7000" {
		t.Fatalf("before the cut: %v, %v", got, err)
	}
	old := z.c.SessionID()
	proxy.ExpireSessions(t, old)
	deadline := time.Now().Add(wait)
	for {
		got, err := reader.Query(ctx, "ps")
		if err == nil && got[1] == "ps1:7000" && z.c.SessionID() != old && z.c.SessionID() != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no re-registration after the session expired: %v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestZKDigestAuth: with ZK_AUTH the registration belongs to that digest user: a client
// with the same credentials reads it, one without them can neither read the membership
// nor replace the registration, and a malformed auth is an error.
func TestZKDigestAuth(t *testing.T) {
	srv := zktest.Start(t)
	log := zktest.NewLogger(t).Slog()
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	env := func(auth string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == "ZK_AUTH" && auth != "" {
				return auth, true
			}
			return "", false
		}
	}
	open := func(auth string) Backend {
		b, _, err := New(ctx, Config{Type: TypeZK, JobName: "secure", ZKServers: srv.Addr(), Logger: log}, env(auth))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	owner := open("alice:secret")
	if err := owner.Register(ctx, "ps", 0, "127.0.0.1:7000"); err != nil {
		t.Fatal(err)
	}
	if got, err := open("alice:secret").Query(ctx, "ps"); err != nil || got[0] != "127.0.0.1:7000" {
		t.Fatalf("the same user reads %v, %v", got, err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
	defer qcancel()
	for name, auth := range map[string]string{"no auth": "", "another user": "mallory:x"} {
		intruder := open(auth)
		if got, err := intruder.Query(qctx, "ps"); err == nil {
			t.Errorf("%s reads the membership: %v", name, got)
		}
		if err := intruder.Register(qctx, "ps", 0, "127.0.0.1:6666"); err == nil {
			t.Errorf("%s replaced the registration", name)
		}
	}
	if got, err := open("alice:secret").Query(ctx, "ps"); err != nil || got[0] != "127.0.0.1:7000" {
		t.Fatalf("after the intruders: %v, %v", got, err)
	}
	if _, _, err := New(ctx, Config{Type: TypeZK, JobName: "secure2", ZKServers: srv.Addr(), Logger: log}, env("nocolon")); err == nil ||
		!strings.Contains(err.Error(), "not user:password") || strings.Contains(err.Error(), "nocolon") {
		t.Errorf("malformed ZK_AUTH: %v (want an error that does not print it)", err)
	}
}
