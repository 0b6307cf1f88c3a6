package daemon

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolagent/toolagent/internal/approval"
	"github.com/toolagent/toolagent/internal/dispatch"
)

// approvalMetrics are the metrics of the approval queue, to alert on a
// held call nobody decides: toolagent_approvals_pending (read from the
// store at each scrape, so every replica of a shared store says the
// same), toolagent_approvals_decided_total{decision} and
// toolagent_approval_wait_seconds (how long a request waited for its
// decision; both counted by the replica that recorded the decision).
type approvalMetrics struct {
	reg     prometheus.Registerer
	decides *prometheus.CounterVec
	wait    prometheus.Histogram
}

func newApprovalMetrics(reg prometheus.Registerer) *approvalMetrics {
	m := &approvalMetrics{
		reg: reg,
		decides: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolagent_approvals_decided_total",
			Help: "Decisions on held calls recorded by this daemon, by decision (approved, denied).",
		}, []string{"decision"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolagent_approval_wait_seconds",
			Help:    "How long a held call waited for its decision.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600},
		}),
	}
	reg.MustRegister(m.decides, m.wait)
	for _, d := range []string{"approved", "denied"} {
		m.decides.WithLabelValues(d) // both series exist from the start, at 0
	}
	return m
}

// decided counts a decision (dispatch.Options.OnDecided).
func (m *approvalMetrics) decided(a dispatch.Approval) {
	decision := "approved"
	if a.Status == approval.Denied {
		decision = "denied"
	}
	m.decides.WithLabelValues(decision).Inc()
	m.wait.Observe(a.DecidedAt.Sub(a.CreatedAt).Seconds())
}

// watch registers toolagent_approvals_pending, read from d's queue at
// each scrape.
func (m *approvalMetrics) watch(d *dispatch.Dispatcher) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolagent_approvals_pending",
		Help: "Held calls waiting for a decision now (NaN when the approval store cannot be read).",
	}, func() float64 {
		as, err := d.Approvals(true)
		if err != nil {
			return math.NaN()
		}
		return float64(len(as))
	}))
}
