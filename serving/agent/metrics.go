package agent

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/internal/metricsrv"
)

// Metrics are the agent's Prometheus metrics (monolith agent --metrics-listen): the state
// of every model or replica it reports (one-hot: monolith_agent_model_state{model,state}
// is 1 for the current state), the state changes it reported, and v3's layout changes and
// reload requests. ZooKeeper's session metrics come with the client (zk.Options.Metrics).
// A nil *Metrics records nothing; it is safe for concurrent use.
type Metrics struct {
	state   *prometheus.GaugeVec
	reports *prometheus.CounterVec
	layouts prometheus.Counter
	reloads *prometheus.CounterVec

	mu  sync.Mutex
	cur map[string]string // model → its reported state
}

// NewMetrics registers the agent's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "monolith_agent_model_state",
			Help: "1 for the state (TF Serving's ModelVersionStatus.State) the agent last reported for a model or replica path."}, []string{"model", "state"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_agent_state_reports_total",
			Help: "State changes the agent reported (v1: replica nodes written; v3: sub-graphs seen in a new state), by new state."}, []string{"state"}),
		layouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "monolith_agent_layout_changes_total",
			Help: "Layout callbacks that rewrote TF Serving's model config (v3)."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_agent_reload_requests_total",
			Help: "HandleReloadConfigRequest calls to TF Serving (v3), by result (ok, error)."}, []string{"result"}),
		cur: map[string]string{},
	}
	var err error
	if m.state, err = metricsrv.Register(reg, m.state); err == nil {
		if m.reports, err = metricsrv.Register(reg, m.reports); err == nil {
			if m.layouts, err = metricsrv.Register(reg, m.layouts); err == nil {
				m.reloads, err = metricsrv.Register(reg, m.reloads)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("serving/agent: register metrics: %w", err)
	}
	return m, nil
}

// Report records state as the reported state of model; a change counts as a report.
func (m *Metrics) Report(model, state string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.cur[model]
	if ok && old == state {
		return
	}
	if ok {
		m.state.DeleteLabelValues(model, old)
	}
	m.cur[model] = state
	m.state.WithLabelValues(model, state).Set(1)
	m.reports.WithLabelValues(state).Inc()
}

// Forget drops a model that is no longer reported.
func (m *Metrics) Forget(model string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.cur[model]; ok {
		m.state.DeleteLabelValues(model, old)
		delete(m.cur, model)
	}
}

func (m *Metrics) layoutChanged() {
	if m != nil {
		m.layouts.Inc()
	}
}

func (m *Metrics) reloaded(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
}
