package ingress

import (
	"encoding/json"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// Conversation-aware delivery, the gateway's side: the source's rules go
// with every queued event into the ledger (which decides), and what the
// ledger settled without forwarding is counted here.

// CancelMode says what the gateway does for a delivery in flight whose
// run a newer event superseded.
type CancelMode string

// Cancel modes.
const (
	// CancelNone: the run learns it from the ledger only (its next claim
	// is refused superseded).
	CancelNone CancelMode = ""
	// CancelNotify: the gateway also POSTs a signed cancellation notice to
	// the agent (a CancelNotice, sent as Source.CancelRequest builds it).
	CancelNotify CancelMode = "notify"
)

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
// be nil: unregistered). NewMetrics makes one; share that one.
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

// settled counts what one Enqueue settled, per source of the settled
// events, and the scope's depth.
func (m *ConversationMetrics) settled(source string, res ledger.Enqueued) {
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

// CancelNotice is the body of the cancellation notice (forward.cancel:
// notify) the gateway POSTs to a source's forward.url when a newer event
// supersedes the run of a delivery the agent is working on. It is signed
// like a forward (Standard Webhooks, webhook-id "cancel_{run id}_{token}")
// and marked Replyonce-Notice: cancel, with the delivery's Replyonce-Scope,
// -Run-Id, -Event-Id and -Fencing-Token. It is sent once, not retried: the
// ledger refusing the run's next claim is what stops it; the notice only
// saves the agent the work.
type CancelNotice struct {
	Type           string `json:"type"`   // "replyonce.cancel"
	Reason         string `json:"reason"` // "superseded"
	Source         string `json:"source"`
	Scope          string `json:"scope"`
	EventID        string `json:"event_id"`
	RunID          string `json:"run_id"`
	Delivery       int    `json:"delivery"`
	FencingToken   uint64 `json:"fencing_token"`
	SupersededBy   string `json:"superseded_by"` // the newer run
	SupersededByID string `json:"superseded_by_event_id"`
}

// Canceller is what a Handoff implements to send cancellation notices
// (the dispatcher: it owns the goroutine and waits for it at shutdown).
type Canceller interface {
	SendCancel(src *Source, n CancelNotice)
}

// CancelRequest builds the notice's request.
func (s *Source) CancelRequest(n CancelNotice) (forward.Request, error) {
	body, err := json.Marshal(n)
	if err != nil {
		return forward.Request{}, err
	}
	return forward.Request{
		URL: s.cfg.Forward.URL, Timeout: s.cfg.Forward.Timeout, Body: body, ContentType: "application/json",
		StaticHeaders: s.cfg.Forward.Headers, Source: s.Name, EventID: n.EventID, Scope: n.Scope, RunID: n.RunID,
		Delivery: n.Delivery, FencingToken: n.FencingToken, SigningSecret: s.cfg.Forward.SigningSecret, Notice: "cancel",
		IdempotencyKey: "cancel_" + n.RunID + "_" + strconv.FormatUint(n.FencingToken, 10),
	}, nil
}

// notifyCancels hands the notices of one Enqueue to the dispatcher.
func (g *Gateway) notifyCancels(res ledger.Enqueued, newEvent string) {
	c, ok := g.handoff.(Canceller)
	if !ok {
		return
	}
	for _, in := range res.Interrupted {
		to := g.sources[in.Item.Source] // the interrupted event's source decides
		if to == nil || to.cfg.Forward.Queue.Cancel != CancelNotify {
			continue
		}
		c.SendCancel(to, CancelNotice{Type: "replyonce.cancel", Reason: "superseded", Source: in.Item.Source,
			Scope: in.Item.Scope, EventID: in.Item.EventID, RunID: in.Item.RunID, Delivery: in.Delivery, FencingToken: in.Token,
			SupersededBy: in.By, SupersededByID: newEvent})
	}
}
