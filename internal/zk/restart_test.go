package zk

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/zktest"
)

// TestServerRestart: a Client survives a ZooKeeper restart, short (the session may
// survive) or long (the session expires on the server): its owned ephemeral nodes (a plain
// one and a sequential one) exist afterwards, Lost clears, and data and children watches
// fire on changes made after the restart.
func TestServerRestart(t *testing.T) {
	for _, down := range []time.Duration{0, 3 * zktest.SessionTimeout} {
		t.Run(fmt.Sprintf("down %v", down), func(t *testing.T) {
			srv := zktest.Start(t)
			c := connectClient(t, srv.Servers())
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()

			if err := c.SetEphemeral(ctx, "/eph", []byte("mine")); err != nil {
				t.Fatal(err)
			}
			seq, err := c.CreateEphemeralSequential(ctx, "/seq/n-", []byte("s"))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CreateOrSet(ctx, "/watched", []byte("v0")); err != nil {
				t.Fatal(err)
			}
			seen := make(chan string, 16)
			if _, err := c.WatchData(ctx, "/watched", func(data []byte, _ *Stat, _ DataEvent) bool {
				seen <- string(data)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			<-seen // the first call
			var kids calls[[]string]
			if _, err := c.WatchChildren(ctx, "/seq", func(ch []string) bool { kids.add(ch); return true }); err != nil {
				t.Fatal(err)
			}

			srv.Restart(t, down)

			direct := connectClient(t, srv.Servers())
			exists := func(p string) bool { ok, err := direct.Exists(ctx, p); return err == nil && ok }
			eventually(t, func() bool { return exists("/eph") && exists(seq) && !c.Lost() }, func() string {
				return fmt.Sprintf("after restart: eph %v %s %v lost %v", exists("/eph"), seq, exists(seq), c.Lost())
			})
			if err := direct.Set(ctx, "/watched", []byte("v1")); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(wait)
			for got := ""; got != "v1"; {
				select {
				case got = <-seen:
				case <-deadline:
					t.Fatal("data watch silent after the restart")
				}
			}
			if err := direct.EnsurePath(ctx, "/seq/other"); err != nil {
				t.Fatal(err)
			}
			eventually(t, func() bool { l, _ := kids.last(); return len(l) == 2 },
				func() string { return "children calls " + fmt.Sprint(kids.get()) })
		})
	}
}
