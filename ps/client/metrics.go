package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/metricsrv"
)

// callBuckets are the call-latency buckets (seconds): 100 µs to 6.6 s.
var callBuckets = prometheus.ExponentialBuckets(100e-6, 2, 17)

// Metrics are a PS client's Prometheus metrics: per RPC method, the call latency (every
// attempt and backoff of one call included) with the call's final gRPC code, and the
// retries. One Metrics may serve many clients (WithMetrics); it is safe for concurrent use.
type Metrics struct {
	calls   *prometheus.HistogramVec // by method and code
	retries *prometheus.CounterVec   // by method
}

// NewMetrics registers the client metrics monolith_ps_client_call_seconds{method, code}
// and monolith_ps_client_retries_total{method} on reg. When reg holds them already, the
// returned Metrics records into those (one series per process).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := Metrics{
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "monolith_ps_client_call_seconds",
			Help:    "PS RPC calls as the client sees them (all attempts and backoff), by method and final gRPC code; a call to several shards counts once per shard.",
			Buckets: callBuckets}, []string{"method", "code"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_ps_client_retries_total",
			Help: "PS RPC attempts retried after codes.Unavailable, by method."}, []string{"method"}),
	}
	var err error
	if m.calls, err = metricsrv.Register(reg, m.calls); err != nil {
		return nil, fmt.Errorf("ps/client: register metrics: %w", err)
	}
	if m.retries, err = metricsrv.Register(reg, m.retries); err != nil {
		return nil, fmt.Errorf("ps/client: register metrics: %w", err)
	}
	return &m, nil
}

// WithMetrics records the client's calls in m (default: not recorded).
func WithMetrics(m *Metrics) Option { return func(o *options) { o.metrics = m } }

// observe records one call of method that ended with err after start.
func (m *Metrics) observe(method string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(method, callCode(err).String()).Observe(time.Since(start).Seconds())
}

// callCode is the gRPC code a call ended with: a timeout is DeadlineExceeded, the end of
// the caller's context Canceled or DeadlineExceeded.
func callCode(err error) codes.Code {
	var te *TimeoutError
	switch {
	case err == nil:
		return codes.OK
	case errors.As(err, &te), errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return status.Code(err)
}

// retried records one retry of method.
func (m *Metrics) retried(method string) {
	if m != nil {
		m.retries.WithLabelValues(method).Inc()
	}
}
