package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/monolith-go/monolith/ps/table"
)

// metrics are the server's counters. Every field is updated atomically; there is no lock.
type metrics struct {
	lookups, lookupErrors, lookupFids, lookupNanos atomic.Int64
	applies, applyErrors, applyFids, applyNanos    atomic.Int64
	barriers, barrierTimeouts, barrierErrors       atomic.Int64
	rejected                                       atomic.Int64 // requests over MaxFidsPerRequest
	saves, saveErrors                              atomic.Int64
	evicted                                        atomic.Int64
	duplicates                                     atomic.Int64 // requests skipped for an applied request id
	globalSteps                                    atomic.Int64 // GlobalStep requests, duplicates included
}

// observeLookup records one lookup (a batch sub-request counts as one).
func (m *metrics) observeLookup(start time.Time, fids int, failed bool) {
	m.lookups.Add(1)
	m.lookupFids.Add(int64(fids))
	m.lookupNanos.Add(int64(time.Since(start)))
	if failed {
		m.lookupErrors.Add(1)
	}
}

// observeApply records one apply, failed ones included (spec/ps.md §8.3).
func (m *metrics) observeApply(start time.Time, fids int, failed bool) {
	m.applies.Add(1)
	m.applyFids.Add(int64(fids))
	m.applyNanos.Add(int64(time.Since(start)))
	if failed {
		m.applyErrors.Add(1)
	}
}

// avgMicros is total/count in microseconds, 0 when count is 0.
func avgMicros(totalNanos, count int64) float64 {
	if count == 0 {
		return 0
	}
	return float64(totalNanos) / float64(count) / 1e3
}

// promWriter writes the Prometheus text exposition format (version 0.0.4).
type promWriter struct {
	w      *bufio.Writer
	labels string // constant labels, rendered: shard="0",num_shards="2"
}

func (p *promWriter) header(name, typ, help string) {
	fmt.Fprintf(p.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (p *promWriter) sample(name, extra string, v float64) {
	labels := p.labels
	if extra != "" {
		labels += "," + extra
	}
	fmt.Fprintf(p.w, "%s{%s} %s\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64))
}

func (p *promWriter) counter(name, help string, v int64) {
	p.header(name, "counter", help)
	p.sample(name, "", float64(v))
}

// labelEscaper escapes a label value: backslash, double quote and newline.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// writeMetrics renders every counter and per-table gauge.
func (s *Server) writeMetrics(w io.Writer) error {
	p := &promWriter{w: bufio.NewWriter(w), labels: fmt.Sprintf(`shard="%d",num_shards="%d"`, s.opts.Shard, s.opts.NumShards)}
	m := &s.metrics
	p.counter("monolith_ps_lookup_requests_total", "Lookup requests, batch sub-requests included.", m.lookups.Load())
	p.counter("monolith_ps_lookup_errors_total", "Lookup requests answered with a failure status.", m.lookupErrors.Load())
	p.counter("monolith_ps_lookup_fids_total", "Fids looked up.", m.lookupFids.Load())
	p.header("monolith_ps_lookup_latency_seconds", "summary", "Lookup handling time.")
	p.sample("monolith_ps_lookup_latency_seconds_sum", "", float64(m.lookupNanos.Load())/1e9)
	p.sample("monolith_ps_lookup_latency_seconds_count", "", float64(m.lookups.Load()))
	p.counter("monolith_ps_apply_requests_total", "ApplyGradients requests, batch sub-requests and failures included.", m.applies.Load())
	p.counter("monolith_ps_apply_errors_total", "ApplyGradients requests answered with a failure status.", m.applyErrors.Load())
	p.counter("monolith_ps_apply_fids_total", "Fids in ApplyGradients requests.", m.applyFids.Load())
	p.header("monolith_ps_apply_latency_seconds", "summary", "ApplyGradients handling time.")
	p.sample("monolith_ps_apply_latency_seconds_sum", "", float64(m.applyNanos.Load())/1e9)
	p.sample("monolith_ps_apply_latency_seconds_count", "", float64(m.applies.Load()))
	p.counter("monolith_ps_barrier_requests_total", "Barrier requests.", m.barriers.Load())
	p.counter("monolith_ps_barrier_timeouts_total", "Barrier requests that timed out.", m.barrierTimeouts.Load())
	p.counter("monolith_ps_barrier_errors_total", "Barrier requests rejected or failed.", m.barrierErrors.Load())
	p.counter("monolith_ps_rejected_requests_total", "Requests rejected for exceeding the fids-per-request limit.", m.rejected.Load())
	p.counter("monolith_ps_checkpoint_saves_total", "Checkpoints written.", m.saves.Load())
	p.counter("monolith_ps_checkpoint_save_errors_total", "Checkpoint saves that failed.", m.saveErrors.Load())
	p.counter("monolith_ps_evicted_entries_total", "Entries removed by expiry.", m.evicted.Load())
	p.counter("monolith_ps_duplicate_requests_total", "ApplyGradients (batch sub-requests included) and GlobalStep requests skipped because their request id was already applied.", m.duplicates.Load())
	p.counter("monolith_ps_global_step_requests_total", "GlobalStep requests, duplicates included.", m.globalSteps.Load())
	p.header("monolith_ps_global_step", "gauge", "The shard's global step: GlobalStep increments and the largest ApplyGradients global_step.")
	p.sample("monolith_ps_global_step", "", float64(s.step.Load()))

	stats := make([]table.Stats, len(s.tables))
	for i, t := range s.tables {
		stats[i] = t.Stats()
	}
	for _, g := range []struct {
		name, help string
		value      func(table.Stats) float64
	}{
		{"monolith_ps_table_entries", "Entries of a table.", func(st table.Stats) float64 { return float64(st.Size) }},
		{"monolith_ps_table_memory_bytes", "Bytes a table holds: entries, index and filter.", func(st table.Stats) float64 { return float64(st.MemoryBytes) }},
		{"monolith_ps_table_raw_bytes", "Embedding and optimizer-state bytes of a table's entries.", func(st table.Stats) float64 { return float64(st.RawBytes) }},
		{"monolith_ps_table_dim", "Embedding dimension of a table.", func(st table.Stats) float64 { return float64(st.Dim) }},
		{"monolith_ps_table_max_update_time_seconds", "Newest update time of a table (Unix seconds).", func(st table.Stats) float64 { return float64(st.MaxUpdateTime) }},
	} {
		p.header(g.name, "gauge", g.help)
		for _, st := range stats {
			p.sample(g.name, `table="`+escapeLabel(st.Name)+`"`, g.value(st))
		}
	}
	return p.w.Flush()
}

// metricsHandler serves GET /metrics.
func (s *Server) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := s.writeMetrics(w); err != nil {
			s.log.Debug("write metrics", "err", err)
		}
	})
	return mux
}
