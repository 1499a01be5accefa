package train

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/client"
)

// Metrics are a training job's Prometheus metrics (monolith train --metrics-listen):
// steps, examples and log loss as the workers apply them, examples/s and the mean loss of
// the last summary interval, the global step, the last evaluation, the PS calls of the
// job's clients (latency by method and code, retries) and the controller's. It is safe for
// concurrent use. The counters are the process's: a second job on the same registry adds
// to them.
//
// Workers count into the Metrics of the process they run in. Run hands its Metrics to the
// pipeline's workers through the context of the run, which Beam passes to the DoFns'
// Setup when they run in the submitting process (the embedded runner, LOOPBACK); workers
// in other processes count nothing here.
type Metrics struct {
	steps, examples, lossSum           prometheus.Counter
	loss, examplesPerSec, globalStep   prometheus.Gauge
	evalAUC, evalLogLoss, evalExamples prometheus.Gauge
	PS                                 *client.Metrics
	reg                                prometheus.Registerer
}

// NewMetrics registers a job's metrics on reg, or takes over those registered before.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &Metrics{reg: reg}
	var err error
	for _, c := range []struct {
		dst  *prometheus.Counter
		name string
		help string
	}{
		{&m.steps, "monolith_train_steps_total", "Training steps applied by this process's workers."},
		{&m.examples, "monolith_train_examples_total", "Examples of the applied training steps."},
		{&m.lossSum, "monolith_train_loss_sum_total", "Summed per-example log loss of the applied steps (its rate over the examples' rate is the mean loss)."},
	} {
		if *c.dst, err = metricsrv.Register(reg, counter(c.name, c.help)); err != nil {
			return nil, fmt.Errorf("pipelines/train: register metrics: %w", err)
		}
	}
	for _, g := range []struct {
		dst  *prometheus.Gauge
		name string
		help string
	}{
		{&m.loss, "monolith_train_loss", "Mean per-example log loss over the last summary interval."},
		{&m.examplesPerSec, "monolith_train_examples_per_second", "Examples per second over the last summary interval."},
		{&m.globalStep, "monolith_train_global_step", "The PS global step at the last summary."},
		{&m.evalAUC, "monolith_train_eval_auc", "AUC of the last evaluation."},
		{&m.evalLogLoss, "monolith_train_eval_logloss", "Log loss of the last evaluation."},
		{&m.evalExamples, "monolith_train_eval_examples", "Examples of the last evaluation."},
	} {
		if *g.dst, err = metricsrv.Register(reg, gauge(g.name, g.help)); err != nil {
			return nil, fmt.Errorf("pipelines/train: register metrics: %w", err)
		}
	}
	if m.PS, err = client.NewMetrics(reg); err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	return m, nil
}

// controllerMetrics registers the controller's metrics for one run's barrier; the caller
// unregisters them when the run ends.
func (m *Metrics) controllerMetrics(barrier controller.Barrier) (*controller.Metrics, error) {
	cm, err := controller.NewMetrics(m.reg, barrier)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: register controller metrics: %w", err)
	}
	return cm, nil
}

// observeStep counts one applied step of rows examples with summed log loss loss.
func (m *Metrics) observeStep(rows int, loss float64) {
	if m == nil {
		return
	}
	m.steps.Inc()
	m.examples.Add(float64(rows))
	m.lossSum.Add(loss)
}

// totals reads the step counters.
func (m *Metrics) totals() (steps, examples int64, loss float64) {
	return int64(value(m.steps)), int64(value(m.examples)), value(m.lossSum)
}

// value is a counter's or gauge's current value.
func value(c prometheus.Metric) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return 0
	}
	if d.Counter != nil {
		return d.GetCounter().GetValue()
	}
	return d.GetGauge().GetValue()
}

// metricsKey is the context key of the run's Metrics.
type metricsKey struct{}

// withMetrics returns ctx carrying m for the workers that run in this process.
func withMetrics(ctx context.Context, m *Metrics) context.Context {
	return context.WithValue(ctx, metricsKey{}, m)
}

// metricsFrom returns the Metrics a run put in ctx (nil: none).
func metricsFrom(ctx context.Context) *Metrics {
	m, _ := ctx.Value(metricsKey{}).(*Metrics)
	return m
}
