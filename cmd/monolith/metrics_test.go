package main

import (
	"net"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/monolith-go/monolith/internal/metricsrv"
)

// TestPSMetrics: `monolith ps --metrics-listen` serves the shard's counters and latency
// histograms and the Go and process collectors, parsed by the Prometheus text parser.
func TestPSMetrics(t *testing.T) {
	p := startPS(t, "--listen", "127.0.0.1:0", "--tables", psTables, "--metrics-listen", "127.0.0.1:0")
	m := regexp.MustCompile(`metrics=([0-9.:]+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", p.stderr)
	}
	var lk lookupOut
	psClient(t, &lk, "lookup", "--ps", p.addr, "--table", "item", "--dim", "4", "--fids", "1,2,3")
	fams, err := metricsrv.Scrape(t.Context(), m[1])
	if err != nil {
		t.Fatal(err)
	}
	shard := []string{"shard", "0", "num_shards", "1"}
	for _, w := range []struct {
		name   string
		labels []string
		typ    dto.MetricType
		want   float64
	}{
		{"monolith_ps_lookup_latency_seconds", shard, dto.MetricType_HISTOGRAM, 1},
		{"monolith_ps_lookup_fids_total", shard, dto.MetricType_COUNTER, 3},
		{"monolith_ps_apply_latency_seconds", shard, dto.MetricType_HISTOGRAM, 0},
		{"monolith_ps_checkpoint_save_seconds", shard, dto.MetricType_HISTOGRAM, 0},
		{"monolith_ps_request_limit", append(shard, "limit", "fids_per_request"), dto.MetricType_GAUGE, 1 << 20},
	} {
		if got, ok := metricsrv.Value(fams, w.name, w.labels...); !ok || got != w.want || fams[w.name].GetType() != w.typ {
			t.Errorf("%s%v = %v (present %v, %v), want %v %v", w.name, w.labels, got, ok, fams[w.name].GetType(), w.typ, w.want)
		}
	}
	if n, ok := metricsrv.Value(fams, "go_goroutines"); !ok || n < 1 {
		t.Errorf("go_goroutines = %v (present %v)", n, ok)
	}
	if _, ok := metricsrv.Value(fams, "process_cpu_seconds_total"); !ok {
		t.Error("process_cpu_seconds_total missing")
	}
}

// TestMetricsAddressInUse: a metrics address that is taken fails ps and train at start,
// naming the address.
func TestMetricsAddressInUse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	taken := lis.Addr().String()
	_, _, err = runCLI(t, "ps", "--tables", psTables, "--metrics-listen", taken)
	if err == nil || !strings.Contains(err.Error(), taken) {
		t.Errorf("ps --metrics-listen %s: %v, want an error naming it", taken, err)
	}
	_, _, err = runCLI(t, "train", "--config", "../../pipelines/train/configs/planted_fm.yaml", "--data", t.TempDir(), "--metrics-listen", taken)
	if err == nil || !strings.Contains(err.Error(), taken) {
		t.Errorf("train --metrics-listen %s: %v, want an error naming it", taken, err)
	}
}

func TestChildMetricsAddr(t *testing.T) {
	for _, tc := range []struct {
		parent string
		i      int
		want   string
		bad    bool
	}{
		{"9100", 0, "127.0.0.1:9101", false},
		{":9100", 1, "127.0.0.1:9102", false},
		{"0.0.0.0:9100", 2, "0.0.0.0:9103", false},
		{"127.0.0.1:0", 3, "127.0.0.1:0", false},
		{"127.0.0.1:65535", 0, "", true},
		{"a:b:c", 0, "", true},
	} {
		got, err := childMetricsAddr(tc.parent, tc.i)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("childMetricsAddr(%q, %d) = %q, %v; want %q (error %v)", tc.parent, tc.i, got, err, tc.want, tc.bad)
		}
	}
}
