package train

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/monolith-go/monolith/internal/metricsrv"
	kmetrics "github.com/monolith-go/monolith/kernels/metrics"
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
	auc                                prometheus.GaugeFunc
	PS                                 *client.Metrics
	reg                                prometheus.Registerer

	mu       sync.Mutex
	trainAUC *kmetrics.StreamingAUC // Monolith's host-call AUC: every applied row so far
	aucRows  int64                  // rows in trainAUC
}

// NewMetrics registers a job's metrics on reg, or takes over those registered before; a
// nil reg is a private registry.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil || reg == (*prometheus.Registry)(nil) {
		reg = prometheus.NewRegistry()
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &Metrics{reg: reg}
	var err error
	if m.trainAUC, err = kmetrics.NewStreamingAUC(kmetrics.DefaultThresholds); err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
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
	// A second job on reg reads its own AUC: the function is registered again over the last.
	af := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "monolith_train_auc",
		Help: "Streaming AUC (200 thresholds, as tf.metrics.auc) of every row applied by this process's workers, before its update."}, m.TrainAUC)
	err = reg.Register(af)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		reg.Unregister(are.ExistingCollector)
		err = reg.Register(af)
	}
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: register metrics: %w", err)
	}
	m.auc = af
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

// observeStep counts one applied step of rows examples with summed log loss loss, and
// adds its rows to the training AUC (rows whose prediction is not a probability, as after
// a divergence, are left out of it).
func (m *Metrics) observeStep(rows int, loss float64, labels, preds []float32) {
	if m == nil {
		return
	}
	m.steps.Inc()
	m.examples.Add(float64(rows))
	m.lossSum.Add(loss)
	if len(preds) > 0 {
		m.mu.Lock()
		if m.trainAUC.Update(labels, preds) == nil { // on an error it adds nothing
			m.aucRows += int64(len(preds))
		}
		m.mu.Unlock()
	}
}

// TrainAUC is the streaming AUC of every row applied so far (0 before any).
func (m *Metrics) TrainAUC() float64 {
	auc, _ := m.trainAUCRows()
	return auc
}

// trainAUCRows is TrainAUC and the number of rows it covers.
func (m *Metrics) trainAUCRows() (float64, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.trainAUC.Value(), m.aucRows
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
