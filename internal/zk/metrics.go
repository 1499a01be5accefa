package zk

import (
	"fmt"
	"strings"

	gozk "github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/internal/metricsrv"
)

// Metrics count a Client's session life: session events by state, reconnects (a session
// established after the first one: after a connection loss or an expiry), expiries, and
// the re-registrations of owned ephemeral nodes. One Metrics may serve several clients
// (Options.Metrics); it is safe for concurrent use, and a nil *Metrics counts nothing.
type Metrics struct {
	events          *prometheus.CounterVec
	reconnects      prometheus.Counter
	expiries        prometheus.Counter
	reregistrations prometheus.Counter
}

// NewMetrics registers the ZooKeeper client metrics on reg (taking over those registered
// before, one series per process).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolith_zk_session_events_total",
			Help: "ZooKeeper session events by state (connecting, connected, has_session, disconnected, expired, …)."}, []string{"state"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "monolith_zk_reconnects_total",
			Help: "ZooKeeper sessions (re-)established after the first one: connection losses and expiries recovered."}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{Name: "monolith_zk_session_expiries_total",
			Help: "ZooKeeper sessions that expired."}),
		reregistrations: prometheus.NewCounter(prometheus.CounterOpts{Name: "monolith_zk_reregistrations_total",
			Help: "Re-creations of the owned ephemeral nodes in a new session."}),
	}
	var err error
	if m.events, err = metricsrv.Register(reg, m.events); err != nil {
		return nil, fmt.Errorf("zk: register metrics: %w", err)
	}
	for _, c := range []*prometheus.Counter{&m.reconnects, &m.expiries, &m.reregistrations} {
		if *c, err = metricsrv.Register(reg, *c); err != nil {
			return nil, fmt.Errorf("zk: register metrics: %w", err)
		}
	}
	return &m, nil
}

// session counts one session event; first reports the client's first session (a
// HasSession event that is not a reconnect).
func (m *Metrics) session(state gozk.State, first bool) {
	if m == nil {
		return
	}
	m.events.WithLabelValues(stateName(state)).Inc()
	switch {
	case state == gozk.StateExpired:
		m.expiries.Inc()
	case state == gozk.StateHasSession && !first:
		m.reconnects.Inc()
	}
}

func (m *Metrics) reregistered() {
	if m != nil {
		m.reregistrations.Inc()
	}
}

// stateName is a state as a label: gozk's name without "State", snake case
// (StateHasSession → has_session).
func stateName(s gozk.State) string {
	name := strings.TrimPrefix(s.String(), "State")
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
