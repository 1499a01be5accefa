package zk

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/internal/zktest"
)

// TestWatchSet: a path is watched once however often it is asked for, each child is
// reported once with its full path, and after Stop the set watches again.
func TestWatchSet(t *testing.T) {
	srv := zktest.Start(t)
	c := connectClient(t, srv.Servers())
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.EnsurePath(ctx, "/ws/a"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	record := func(_ context.Context, child string) { mu.Lock(); got = append(got, child); mu.Unlock() }
	snapshot := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
	s := NewWatchSet(c)
	for range 2 {
		if err := s.NewChildren(ctx, "/ws", record); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.EnsurePath(ctx, "/ws/b"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return slices.Equal(snapshot(), []string{"/ws/a", "/ws/b"}) },
		func() string { return fmt.Sprintf("children reported %q, want [/ws/a /ws/b] once each", snapshot()) })
	calls := 0
	for range 2 {
		if err := s.Data(ctx, "/ws/a", func([]byte, *Stat, DataEvent) bool { calls++; return true }); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Errorf("Data twice on one path: %d first calls, want 1", calls)
	}
	s.Stop()
	if err := s.NewChildren(ctx, "/ws", record); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return len(snapshot()) == 4 }, func() string { return fmt.Sprintf("after Stop: %q", snapshot()) })
	s.Stop()
	if err := s.NewChildren(ctx, "/missing", record); err == nil {
		t.Error("watching a missing node succeeded")
	}
}
