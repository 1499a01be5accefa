package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/ps/client"
)

// TestMetrics: calls are timed by method and final code, and retries of Unavailable are
// counted; scraped over HTTP and parsed by the Prometheus text parser.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := client.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	// A second Metrics on the same registry records into the same series.
	m2, err := client.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	live := startShard(t, 0, 1, "")
	dead := startShard(t, 0, 1, "")
	deadAddr := dead.srv.Addr()
	dead.srv.Close()

	c := newClient(t, []string{live.srv.Addr()}, client.WithMetrics(m))
	for range 3 {
		if _, err := c.Lookup(ctx(t), "sgd", 2, []int64{1, 2}, client.LookupOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.HealthCheck(ctx(t), "gpu"); err == nil {
		t.Fatal("unknown health component succeeded")
	}
	// The dead shard's call is retried twice, then fails Unavailable.
	d := newClient(t, []string{deadAddr}, client.WithMetrics(m2), client.WithRetries(2), client.WithBackoff(time.Millisecond, 2*time.Millisecond))
	var re *client.RPCError
	if _, err := d.GetStats(ctx(t), false); !errors.As(err, &re) {
		t.Fatalf("dead shard: %v", err)
	}

	srv, err := metricsrv.Listen("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fams, err := metricsrv.Scrape(ctx(t), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"monolith_ps_client_call_seconds", []string{"method", "Lookup", "code", "OK"}, 3},
		{"monolith_ps_client_call_seconds", []string{"method", "HealthCheck", "code", "NotFound"}, 1},
		{"monolith_ps_client_call_seconds", []string{"method", "GetStats", "code", "Unavailable"}, 1},
		{"monolith_ps_client_retries_total", []string{"method", "GetStats"}, 2},
	} {
		if got, ok := metricsrv.Value(fams, w.name, w.labels...); !ok || got != w.want {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	if _, ok := metricsrv.Value(fams, "monolith_ps_client_retries_total", "method", "Lookup"); ok {
		t.Error("retries counted for Lookup, which never failed")
	}
}
