package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/metricsrv"
)

// Metrics are the controller's Prometheus metrics: its RPCs, the consistent saves, and
// the state of the training barrier it reports (GetBlockStatus), read at scrape time.
// A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec // by method and code
	saves    *prometheus.CounterVec // by result
	saveTime prometheus.Histogram
	barrier  *barrierCollector
	reg      prometheus.Registerer
}

// statusTimeout bounds the barrier read of one scrape.
const statusTimeout = 2 * time.Second

// NewMetrics registers the controller's metrics on reg (its counters are the process's:
// those registered before are taken over); barrier is read at each scrape until
// Unregister (nil: no barrier gauges).
func NewMetrics(reg prometheus.Registerer, barrier Barrier) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_controller_requests_total",
			Help: "Controller RPCs served, by method and gRPC code."}, []string{"method", "code"}),
		saves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_controller_saves_total",
			Help: "Consistent checkpoints (barrier, save on every shard at one step, listeners), by result (ok, error)."}, []string{"result"}),
		saveTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "monolith_controller_save_seconds",
			Help:    "Time of a consistent checkpoint, the barrier wait included.",
			Buckets: prometheus.ExponentialBuckets(10e-3, 2, 15)}),
		reg: reg,
	}
	var err error
	if m.requests, err = metricsrv.Register(reg, m.requests); err != nil {
		return nil, fmt.Errorf("controller: register metrics: %w", err)
	}
	if m.saves, err = metricsrv.Register(reg, m.saves); err != nil {
		return nil, fmt.Errorf("controller: register metrics: %w", err)
	}
	if m.saveTime, err = metricsrv.Register(reg, m.saveTime); err != nil {
		return nil, fmt.Errorf("controller: register metrics: %w", err)
	}
	if barrier != nil {
		m.barrier = &barrierCollector{b: barrier}
		if err := reg.Register(m.barrier); err != nil {
			return nil, fmt.Errorf("controller: register metrics: %w", err)
		}
	}
	m.saves.WithLabelValues("ok")
	m.saves.WithLabelValues("error")
	return m, nil
}

// Unregister removes the barrier's gauges from the registry (the barrier goes with its
// job); the counters stay, as the process's.
func (m *Metrics) Unregister() {
	if m != nil && m.barrier != nil {
		m.reg.Unregister(m.barrier)
	}
}

// interceptor counts the controller's RPCs.
func (m *Metrics) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if m != nil {
		m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	}
	return resp, err
}

// observeSave records one save.
func (m *Metrics) observeSave(start time.Time, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.saves.WithLabelValues("error").Inc()
		return
	}
	m.saves.WithLabelValues("ok").Inc()
	m.saveTime.Observe(time.Since(start).Seconds())
}

// barrierCollector reports the training barrier as GetBlockStatus does.
type barrierCollector struct{ b Barrier }

var (
	descPlaced = prometheus.NewDesc("monolith_controller_barrier_placed",
		"1 while the training barrier is placed (the action as a label: \"\" for an operator's stop, save, stop), else 0.", []string{"action"}, nil)
	descWorkers = prometheus.NewDesc("monolith_controller_workers",
		"Workers joined to the training barrier by state: blocked (paused at it) or running.", []string{"state"}, nil)
	descUp = prometheus.NewDesc("monolith_controller_barrier_up",
		"1 when the barrier (on PS shard 0) answered this scrape, else 0.", nil, nil)
)

func (c *barrierCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPlaced
	ch <- descWorkers
	ch <- descUp
}

func (c *barrierCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	st, err := c.b.Status(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	placed := 0.0
	if st.Placed {
		placed = 1
	}
	ch <- prometheus.MustNewConstMetric(descPlaced, prometheus.GaugeValue, placed, st.Action)
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(len(st.Blocked)), "blocked")
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(len(st.Unblocked)), "running")
}
