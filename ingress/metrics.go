package ingress

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replyonce/gateway/ingress/dispatch"
)

// Metrics are the gateway's Prometheus instruments. They register on the
// registry given to NewMetrics, never on the global one.
type Metrics struct {
	requests       *prometheus.CounterVec
	verifyFailures *prometheus.CounterVec
	duplicates     *prometheus.CounterVec
	inFlight       *prometheus.CounterVec
	forwards       *prometheus.CounterVec
	forwardLatency *prometheus.HistogramVec
	storeErrors    *prometheus.CounterVec
	queued         *prometheus.CounterVec
	ignored        *prometheus.CounterVec
	replays        *prometheus.CounterVec
	// Conversation counts conversation-aware delivery; the dispatcher
	// shares it (dispatch.Options.Conversation).
	Conversation *dispatch.ConversationMetrics
}

// NewMetrics creates and registers the instruments.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_requests_total", Help: "Webhook requests answered, by source and HTTP status.",
		}, []string{"source", "status"}),
		verifyFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_verification_failures_total", Help: "Requests refused for their signature, by source and reason.",
		}, []string{"source", "reason"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_duplicates_suppressed_total", Help: "Redeliveries of events already delivered or rejected, answered without forwarding.",
		}, []string{"source"}),
		inFlight: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_in_flight_total", Help: "Deliveries answered 503 because the same event was in flight elsewhere.",
		}, []string{"source"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_forwards_total", Help: "Forwards to agents, by source and outcome (delivered, rejected, retry).",
		}, []string{"source", "outcome"}),
		forwardLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "replyonce_forward_duration_seconds", Help: "Time to forward an event and read the agent's answer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"source"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_store_errors_total", Help: "Ledger store failures, by source; each was answered 503.",
		}, []string{"source"}),
		queued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_events_queued_total", Help: "Events recorded for queued delivery and answered 202, by source.",
		}, []string{"source"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_events_ignored_total", Help: "Verified events answered 200 ignored and not forwarded, by source and rule (a rule's name or ignore[i], preset:NAME, echo_of).",
		}, []string{"source", "rule"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replyonce_replays_refused_total", Help: "Requests answered duplicate because another event id already carried their signed content (a replayed request), by source.",
		}, []string{"source"}),
	}
	m.Conversation = dispatch.NewConversationMetrics(reg)
	if reg != nil {
		reg.MustRegister(m.requests, m.verifyFailures, m.duplicates, m.inFlight, m.forwards, m.forwardLatency, m.storeErrors, m.queued, m.ignored, m.replays)
	}
	return m
}
