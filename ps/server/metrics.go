package server

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/monolith-go/monolith/ps/table"
)

// Latency buckets (seconds): requests from 50 µs to 1.6 s, barrier waits from 1 ms to
// 4.4 min, checkpoint saves from 10 ms to 82 s.
var (
	requestBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)
	barrierBuckets = prometheus.ExponentialBuckets(1e-3, 4, 10)
	saveBuckets    = prometheus.ExponentialBuckets(10e-3, 2, 14)
)

// Label values of monolith_ps_request_limit and monolith_ps_rejected_requests_total.
const (
	limitFidsPerRequest = "fids_per_request"
	limitMessageBytes   = "message_bytes"
	limitSubRequests    = "sub_requests"
	limitRequestIDBytes = "request_id_bytes"
	limitReplyBytes     = "reply_bytes"
	limitDedupWindow    = "dedup_window"
)

// metrics are the server's Prometheus metrics (package client_golang), registered on
// Options.Registry with the constant labels shard and num_shards. The collectors are
// safe for concurrent use; there is no lock.
type metrics struct {
	lookups, lookupErrors, lookupFids prometheus.Counter
	lookupLatency                     prometheus.Histogram
	applies, applyErrors, applyFids   prometheus.Counter
	applyLatency                      prometheus.Histogram
	barriers, barrierTimeouts         prometheus.Counter
	barrierErrors                     prometheus.Counter
	barrierLatency                    prometheus.Histogram
	trainingBarrier                   *prometheus.CounterVec // by op
	rejected                          *prometheus.CounterVec // by limit
	saves, saveErrors                 prometheus.Counter
	saveLatency                       prometheus.Histogram
	evicted                           prometheus.Counter
	duplicates                        prometheus.Counter // requests skipped for an applied request id
	globalSteps                       prometheus.Counter // GlobalStep requests, duplicates included
	nonFinite                         prometheus.Counter // applies rejected for a NaN or Inf gradient or rate
	nonFiniteSkipped                  prometheus.Counter // fids left out of applies for a NaN or Inf gradient (skip policy)

	collectors []prometheus.Collector // everything above plus the scrape-time gauges
}

func newMetrics(s *Server) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	m := &metrics{
		lookups:         counter("monolith_ps_lookup_requests_total", "Lookup requests, batch sub-requests included."),
		lookupErrors:    counter("monolith_ps_lookup_errors_total", "Lookup requests answered with a failure status."),
		lookupFids:      counter("monolith_ps_lookup_fids_total", "Fids looked up."),
		lookupLatency:   hist("monolith_ps_lookup_latency_seconds", "Lookup handling time (a batch sub-request counts once).", requestBuckets),
		applies:         counter("monolith_ps_apply_requests_total", "ApplyGradients requests, batch sub-requests and failures included."),
		applyErrors:     counter("monolith_ps_apply_errors_total", "ApplyGradients requests answered with a failure status."),
		applyFids:       counter("monolith_ps_apply_fids_total", "Fids in ApplyGradients requests."),
		applyLatency:    hist("monolith_ps_apply_latency_seconds", "ApplyGradients handling time (a batch sub-request counts once).", requestBuckets),
		barriers:        counter("monolith_ps_barrier_requests_total", "Barrier requests."),
		barrierTimeouts: counter("monolith_ps_barrier_timeouts_total", "Barrier requests that timed out."),
		barrierErrors:   counter("monolith_ps_barrier_errors_total", "Barrier requests rejected or failed."),
		barrierLatency:  hist("monolith_ps_barrier_latency_seconds", "Time a Barrier request waited for its generation.", barrierBuckets),
		trainingBarrier: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_ps_training_barrier_requests_total",
			Help: "TrainingBarrier requests by operation (status, join, leave, place, remove, wait)."}, []string{"op"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_ps_rejected_requests_total",
			Help: "Requests rejected for exceeding a request limit, by limit."}, []string{"limit"}),
		saves:       counter("monolith_ps_checkpoint_saves_total", "Checkpoints written."),
		saveErrors:  counter("monolith_ps_checkpoint_save_errors_total", "Checkpoint saves that failed."),
		saveLatency: hist("monolith_ps_checkpoint_save_seconds", "Time to write a checkpoint (successful saves).", saveBuckets),
		evicted:     counter("monolith_ps_evicted_entries_total", "Entries removed by expiry."),
		duplicates: counter("monolith_ps_duplicate_requests_total",
			"ApplyGradients (batch sub-requests included) and GlobalStep requests skipped because their request id was already applied."),
		globalSteps: counter("monolith_ps_global_step_requests_total", "GlobalStep requests, duplicates included."),
		nonFinite: counter("monolith_ps_nonfinite_gradient_requests_total",
			"ApplyGradients (batch sub-requests included) rejected because a gradient or learning rate was NaN or infinite."),
		nonFiniteSkipped: counter("monolith_ps_nonfinite_gradients_skipped_total",
			"Fids left out of ApplyGradients (batch sub-requests included) because their gradient row held a NaN or infinity (policy skip)."),
	}
	m.rejected.WithLabelValues(limitFidsPerRequest) // present at 0 from the start
	m.collectors = []prometheus.Collector{
		m.lookups, m.lookupErrors, m.lookupFids, m.lookupLatency,
		m.applies, m.applyErrors, m.applyFids, m.applyLatency,
		m.barriers, m.barrierTimeouts, m.barrierErrors, m.barrierLatency, m.trainingBarrier, m.rejected,
		m.saves, m.saveErrors, m.saveLatency, m.evicted, m.duplicates, m.globalSteps, m.nonFinite, m.nonFiniteSkipped,
		stateCollector{s},
	}
	return m
}

// register adds the collectors to reg with the shard's constant labels. On failure
// nothing stays registered.
func (m *metrics) register(reg prometheus.Registerer) error {
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.collectors {
		reg.Unregister(c)
	}
}

// observeLookup records one lookup (a batch sub-request counts as one).
func (m *metrics) observeLookup(start time.Time, fids int, failed bool) {
	m.lookups.Inc()
	m.lookupFids.Add(float64(fids))
	m.lookupLatency.Observe(time.Since(start).Seconds())
	if failed {
		m.lookupErrors.Inc()
	}
}

// observeApply records one apply, failed ones included (spec/ps.md §8.3).
func (m *metrics) observeApply(start time.Time, fids int, failed bool) {
	m.applies.Inc()
	m.applyFids.Add(float64(fids))
	m.applyLatency.Observe(time.Since(start).Seconds())
	if failed {
		m.applyErrors.Inc()
	}
}

// read returns a metric's current value: a counter's or gauge's value, or a histogram's
// sample count and sum in seconds (GetStats and tests).
func read(c prometheus.Metric) (value float64, count uint64) {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return 0, 0
	}
	switch {
	case d.Counter != nil:
		return d.GetCounter().GetValue(), 0
	case d.Histogram != nil:
		return d.GetHistogram().GetSampleSum(), d.GetHistogram().GetSampleCount()
	case d.Gauge != nil:
		return d.GetGauge().GetValue(), 0
	}
	return 0, 0
}

// count is a counter's value as an int64.
func count(c prometheus.Counter) int64 { v, _ := read(c); return int64(v) }

// avgMicros is a histogram's mean in microseconds (0 before its first sample), and its count.
func avgMicros(h prometheus.Histogram) (float64, int64) {
	sum, n := read(h)
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n) * 1e6, int64(n)
}

// stateCollector reports, at scrape time, the shard's global step, its request limits and
// every table's size and memory.
type stateCollector struct{ s *Server }

var (
	descGlobalStep = prometheus.NewDesc("monolith_ps_global_step",
		"The shard's global step: GlobalStep increments and the largest ApplyGradients global_step.", nil, nil)
	descLimit = prometheus.NewDesc("monolith_ps_request_limit",
		"A configured request limit: fids per request (summed over batch sub-requests), gRPC message bytes (requests, and lookup replies), request ids in the duplicate window, sub-requests per batch call, request id bytes.",
		[]string{"limit"}, nil)
	descTrainingBarrier = prometheus.NewDesc("monolith_ps_training_barrier_placed",
		"1 while the training barrier is placed (its action as a label), else 0.", []string{"action"}, nil)
	descTrainingWorkers = prometheus.NewDesc("monolith_ps_training_barrier_workers",
		"Workers joined to the training barrier, by state (blocked: paused at the barrier).", []string{"state"}, nil)
	tableGauges = []struct {
		desc  *prometheus.Desc
		value func(table.Stats) float64
	}{
		{prometheus.NewDesc("monolith_ps_table_entries", "Entries of a table.", []string{"table"}, nil),
			func(st table.Stats) float64 { return float64(st.Size) }},
		{prometheus.NewDesc("monolith_ps_table_memory_bytes", "Bytes a table holds: entries, index and filter.", []string{"table"}, nil),
			func(st table.Stats) float64 { return float64(st.MemoryBytes) }},
		{prometheus.NewDesc("monolith_ps_table_raw_bytes", "Embedding and optimizer-state bytes of a table's entries.", []string{"table"}, nil),
			func(st table.Stats) float64 { return float64(st.RawBytes) }},
		{prometheus.NewDesc("monolith_ps_table_dim", "Embedding dimension of a table.", []string{"table"}, nil),
			func(st table.Stats) float64 { return float64(st.Dim) }},
		{prometheus.NewDesc("monolith_ps_table_max_update_time_seconds", "Newest update time of a table (Unix seconds).", []string{"table"}, nil),
			func(st table.Stats) float64 { return float64(st.MaxUpdateTime) }},
	}
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGlobalStep
	ch <- descLimit
	ch <- descTrainingBarrier
	ch <- descTrainingWorkers
	for _, g := range tableGauges {
		ch <- g.desc
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	ch <- prometheus.MustNewConstMetric(descGlobalStep, prometheus.GaugeValue, float64(s.step.Load()))
	for _, l := range []struct {
		name string
		v    int
	}{{limitFidsPerRequest, s.opts.MaxFidsPerRequest}, {limitMessageBytes, s.opts.MaxMessageBytes}, {limitDedupWindow, s.opts.DedupWindow},
		{limitSubRequests, s.opts.MaxSubRequests}, {limitRequestIDBytes, s.opts.MaxRequestIDBytes}} {
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(l.v), l.name)
	}
	st := s.pause.Status()
	placed := 0.0
	if st.Placed {
		placed = 1
	}
	ch <- prometheus.MustNewConstMetric(descTrainingBarrier, prometheus.GaugeValue, placed, st.Action)
	ch <- prometheus.MustNewConstMetric(descTrainingWorkers, prometheus.GaugeValue, float64(len(st.Blocked)), "blocked")
	ch <- prometheus.MustNewConstMetric(descTrainingWorkers, prometheus.GaugeValue, float64(len(st.Unblocked)), "running")
	for _, t := range s.tables {
		stats := t.Stats()
		for _, g := range tableGauges {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(stats), stats.Name)
		}
	}
}

// shardLabels are the constant labels of a shard's metrics.
func shardLabels(shard, numShards int) prometheus.Labels {
	return prometheus.Labels{"shard": fmt.Sprint(shard), "num_shards": fmt.Sprint(numShards)}
}
