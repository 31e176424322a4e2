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

// ConversationMetrics count what conversation-aware delivery did. One set
// serves the gateway (settled at accept) and the dispatcher (settled at
// take), so each figure has one name.
type ConversationMetrics struct {
	superseded *prometheus.CounterVec
	coalesced  *prometheus.CounterVec
	depth      *prometheus.HistogramVec
	movedOn    *prometheus.CounterVec
	cancels    *prometheus.CounterVec
}

// NewConversationMetrics creates and registers the instruments (reg may
// be nil: unregistered). The gateway's ingress.NewMetrics makes one;
// share that one with the dispatcher (Options.Conversation).
func NewConversationMetrics(reg prometheus.Registerer) *ConversationMetrics {
	m := &ConversationMetrics{
		superseded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_events_superseded_total", Help: "Queued events settled superseded before delivery: a newer event's run on the scope superseded theirs (runs: supersede).",
		}, []string{"source"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_events_coalesced_total", Help: "Queued events settled coalesced: a newer debounced event on the scope covers them and is delivered in their place.",
		}, []string{"source"}),
		depth: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "replyonce_scope_queue_depth", Help: "Deliveries waiting or in flight on an event's scope once it is recorded (one observation per queued event; no per-scope label).",
			Buckets: []float64{1, 2, 3, 5, 8, 13, 21, 34, 55, 100},
		}, []string{"source"}),
		movedOn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_scope_moved_on_total", Help: "Dead letters at the head of an ordered scope (forward.order: scope): the scope's later events went on without it.",
		}, []string{"source"}),
		cancels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_cancel_notices_total", Help: "Cancellation notices posted to agents (forward.cancel: notify), by source and outcome (delivered, failed).",
		}, []string{"source", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.superseded, m.coalesced, m.depth, m.movedOn, m.cancels)
	}
	return m
}

// Superseded counts events of source settled superseded.
func (m *ConversationMetrics) Superseded(source string, n int) {
	if n > 0 {
		m.superseded.WithLabelValues(source).Add(float64(n))
	}
}

// Coalesced counts events of source settled coalesced.
func (m *ConversationMetrics) Coalesced(source string, n int) {
	if n > 0 {
		m.coalesced.WithLabelValues(source).Add(float64(n))
	}
}

// MovedOn counts a dead head of an ordered scope.
func (m *ConversationMetrics) MovedOn(source string) { m.movedOn.WithLabelValues(source).Inc() }

// CancelNotice counts a cancellation notice by outcome.
func (m *ConversationMetrics) CancelNotice(source, outcome string) {
	m.cancels.WithLabelValues(source, outcome).Inc()
}

// Settled counts what one Enqueue settled, per source of the settled
// events, and the scope's depth.
func (m *ConversationMetrics) Settled(source string, res ledger.Enqueued) {
	for _, q := range res.Superseded {
		m.Superseded(q.Source, 1)
	}
	for _, q := range res.Coalesced {
		m.Coalesced(q.Source, 1)
	}
	if res.Status == ledger.EnqueueQueued {
		m.depth.WithLabelValues(source).Observe(float64(res.Depth))
	}
}
