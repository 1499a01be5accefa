package zkserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartRestartStop runs a real server: it serves, survives a restart on the same
// address, and stops.
func TestStartRestartStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir(), TickTime: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if out, err := s.FourLetter("ruok", 5*time.Second); err != nil || out != "imok" {
		t.Fatalf("ruok: %q, %v", out, err)
	}
	addr := s.Addr()
	if err := s.Restart(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if out, err := s.FourLetter("srvr", 5*time.Second); err != nil || !strings.Contains(out, "Mode: standalone") || s.Addr() != addr {
		t.Fatalf("after restart at %s (was %s): %q, %v", s.Addr(), addr, out, err)
	}
	s.Stop()
	if _, err := s.FourLetter("ruok", time.Second); err == nil {
		t.Error("the server answers after Stop")
	}
	if _, err := Start(ctx, Options{}); err == nil {
		t.Error("Start without a directory succeeded")
	}
}
