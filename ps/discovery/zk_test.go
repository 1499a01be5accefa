package discovery

import (
	"context"
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
	z, err := NewZK(ctx, "exp", proxy.Addr(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := z.Register(ctx, "ps", 1, "ps1:7000"); err != nil {
		t.Fatal(err)
	}
	reader, err := NewZK(ctx, "exp", srv.Addr(), log)
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
