package metricsrv

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"9100", "127.0.0.1:9100"},
		{":9100", "127.0.0.1:9100"},
		{"0.0.0.0:9100", "0.0.0.0:9100"},
		{"[::1]:9100", "[::1]:9100"},
		{"localhost:0", "localhost:0"},
	} {
		if got := Addr(tc.in); got != tc.want {
			t.Errorf("Addr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"a:b:c", "[::1"} {
		if err := Validate(bad); err == nil {
			t.Errorf("Validate(%q) = nil, want an error", bad)
		}
	}
}

func TestServeAndScrape(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_requests_total", Help: "Requests."}, []string{"method"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t_latency_seconds", Help: "Latency.", Buckets: []float64{0.1, 1}})
	reg.MustRegister(c, h)
	c.WithLabelValues("get").Add(3)
	h.Observe(0.5)
	h.Observe(2)

	s, err := Listen(":0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if host, _, _ := net.SplitHostPort(s.Addr()); host != "127.0.0.1" {
		t.Errorf("bound %s, want 127.0.0.1", s.Addr())
	}
	fams, err := Scrape(context.Background(), s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := Value(fams, "t_requests_total", "method", "get"); !ok || v != 3 {
		t.Errorf("t_requests_total{method=get} = %v, %v; want 3", v, ok)
	}
	if _, ok := Value(fams, "t_requests_total", "method", "put"); ok {
		t.Error("a sample for method=put that was never observed")
	}
	hf := fams["t_latency_seconds"]
	if hf.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("t_latency_seconds is %v, want a histogram", hf.GetType())
	}
	hist := hf.GetMetric()[0].GetHistogram()
	if hist.GetSampleCount() != 2 || hist.GetSampleSum() != 2.5 || hist.GetBucket()[1].GetCumulativeCount() != 1 {
		t.Errorf("histogram count %d sum %v buckets %v", hist.GetSampleCount(), hist.GetSampleSum(), hist.GetBucket())
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "go_memstats_alloc_bytes"} {
		if _, ok := Value(fams, name); !ok {
			t.Errorf("%s missing (Go and process collectors)", name)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := Scrape(context.Background(), s.Addr()); err == nil {
		t.Error("scrape after Close succeeded")
	}
}

func TestAddressInUse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, err = Listen(lis.Addr().String(), NewRegistry(), nil)
	if err == nil || !strings.Contains(err.Error(), lis.Addr().String()) {
		t.Fatalf("Listen on a used address: %v, want an error naming %s", err, lis.Addr())
	}
	if _, err := Listen("no:such:addr", NewRegistry(), nil); err == nil || !strings.Contains(err.Error(), "no:such:addr") {
		t.Fatalf("Listen on a malformed address: %v", err)
	}
}

func TestRegisterReuses(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "t_total", Help: "T."}
	a, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	a.Inc()
	b.Inc()
	if a != b {
		t.Fatal("the second registration did not return the first counter")
	}
	// A different metric under the same name is a conflict.
	if _, err := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "t_total", Help: "Other."})); err == nil {
		t.Fatal("a gauge registered over a counter of the same name")
	}
}
