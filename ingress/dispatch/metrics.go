package dispatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replyonce/gateway/ledger"
)

// Metrics are the dispatcher's Prometheus instruments, registered on the
// registry given to NewMetrics, never the global one.
type Metrics struct {
	attempts       *prometheus.CounterVec
	dead           *prometheus.CounterVec
	lag            *prometheus.HistogramVec
	forwardLatency *prometheus.HistogramVec
	storeErrors    *prometheus.CounterVec
	sweepErrors    prometheus.Counter
	due            *prometheus.GaugeVec
	oldestDue      *prometheus.GaugeVec
	dueScopes      prometheus.Gauge
}

// NewMetrics creates and registers the instruments.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_delivery_attempts_total", Help: "Queued delivery attempts, by source and outcome (delivered, rejected, retry, fault, dead, given_back: held but not sent in time, due again, ...).",
		}, []string{"source", "outcome"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_dead_letters_total", Help: "Queued events whose retry schedule ran out, by source.",
		}, []string{"source"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "replyonce_dispatch_lag_seconds", Help: "Time from a delivery falling due to a dispatcher taking it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 12),
		}, []string{"source"}),
		forwardLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "replyonce_dispatch_forward_duration_seconds", Help: "Time to forward a queued event and read the agent's answer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"source"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_dispatch_store_errors_total", Help: "Store failures while delivering a queued event; it is due again once its claim runs out.",
		}, []string{"source"}),
		sweepErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replyonce_dispatch_sweep_errors_total", Help: "Failed reads of the store's due index; the dispatcher backs off.",
		}),
		due: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "replyonce_queue_due", Help: "Due deliveries seen by this process's last full read of the due index (every 5 s at most), by source; at most one batch (64) in all.",
		}, []string{"source"}),
		oldestDue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "replyonce_queue_oldest_due_seconds", Help: "How long the oldest due delivery seen by the last full read of the due index has been due, by source.",
		}, []string{"source"}),
		dueScopes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "replyonce_queue_due_scopes", Help: "Scopes with a delivery due now, all sources, counted in the store's due index (every 5 s at most): the whole due backlog, where replyonce_queue_due sees one page.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.dead, m.lag, m.forwardLatency, m.storeErrors, m.sweepErrors, m.due, m.oldestDue, m.dueScopes)
	}
	return m
}

func (m *Metrics) observeDue(items []ledger.QueueItem, now time.Time) {
	count := map[string]int{}
	oldest := map[string]time.Duration{}
	for _, q := range items {
		count[q.Source]++
		oldest[q.Source] = max(oldest[q.Source], now.Sub(dueAt(q)))
	}
	m.due.Reset()
	m.oldestDue.Reset()
	for s, n := range count {
		m.due.WithLabelValues(s).Set(float64(n))
		m.oldestDue.WithLabelValues(s).Set(oldest[s].Seconds())
	}
}
