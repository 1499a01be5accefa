package zk

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/serving/datadef"
)

// TestServerRestart: a Client and a Backend survive a ZooKeeper restart, short (the
// session may survive) or long (the session expires on the server): owned ephemeral nodes
// (a bare one, service info, bindings) exist afterwards, Lost clears, and data, children
// and layout watches fire on changes made after the restart.
func TestServerRestart(t *testing.T) {
	for _, down := range []time.Duration{0, 3 * zktest.SessionTimeout} {
		t.Run(fmt.Sprintf("down %v", down), func(t *testing.T) {
			srv := zktest.Start(t)
			c := connectClient(t, srv.Servers())
			b := openTestBackend(t, srv.Servers())
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()

			if err := c.SetEphemeral(ctx, "/eph", []byte("mine")); err != nil {
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
			declare(t, ctx, b, "entry")
			var rec layoutRecorder
			if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); err != nil {
				t.Fatal(err)
			}
			if err := b.ReportServiceInfo(ctx, container, serviceInfo()); err != nil {
				t.Fatal(err)
			}
			if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry")}); err != nil {
				t.Fatal(err)
			}

			srv.Restart(t, down)

			direct := connectClient(t, srv.Servers())
			exists := func(p string) bool { ok, err := direct.Exists(ctx, p); return err == nil && ok }
			binding := sm("entry").BindingPath(bzid, container)
			eventually(t, func() bool {
				return exists("/eph") && exists(container.ServicePath(bzid)) && exists(binding) && !c.Lost() && !b.Client().Lost()
			}, func() string {
				return fmt.Sprintf("after restart: eph %v service %v binding %v lost %v/%v",
					exists("/eph"), exists(container.ServicePath(bzid)), exists(binding), c.Lost(), b.Client().Lost())
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
			if err := direct.EnsurePath(ctx, layoutPath+"/"+sm("entry").String()); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, "entry")
		})
	}
}
