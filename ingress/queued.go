package ingress

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ledger"
)

// DeliveryMode is how a source hands events to its agent.
type DeliveryMode string

// Delivery modes.
const (
	// ModeInline: the provider's request waits for the agent; an agent
	// failure is a 503 and the provider's retry is the queue.
	ModeInline DeliveryMode = "inline"
	// ModeQueued: the event is recorded with its run and claim in one store
	// step, the provider hears 202, and a dispatcher delivers it with
	// retries.
	ModeQueued DeliveryMode = "queued"
)

// DefaultMode is the mode of a source that names none, from the file or
// from a program alike.
const DefaultMode = ModeQueued

// Queue defaults.
const (
	DefaultConcurrency = 16
	// DefaultAcceptWait and MaxAcceptWait bound forward.accept_wait: well
	// inside every provider's answer budget.
	DefaultAcceptWait = 50 * time.Millisecond
	MaxAcceptWait     = time.Second
	// MinRetryAfter and MaxRetryAfter clamp an agent's Retry-After in
	// queued mode: sooner than a second is a busy loop, and later than six
	// hours is better left to the schedule and an operator.
	MinRetryAfter = time.Second
	MaxRetryAfter = 6 * time.Hour
)

// DefaultSchedule is the Standard Webhooks retry schedule: the first
// attempt at once, then these delays after each failure (about 3 days in
// all). Each delay gets ±20 % jitter.
var DefaultSchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// QueueConfig is a source's delivery mode and, in queued mode, its
// dispatch and retry policy. Its keys are written under forward.
type QueueConfig struct {
	Mode        DeliveryMode `yaml:"mode"`        // default DefaultMode
	Concurrency int          `yaml:"concurrency"` // requests to the agent in flight per process; default 16
	// AcceptWait is how long an accept may wait for the dispatcher to
	// take its event over when every place is taken and the agent is fast
	// (see ingress/dispatch), at most MaxAcceptWait. Nil: DefaultAcceptWait;
	// zero: never wait (the event is stored and swept).
	AcceptWait *time.Duration `yaml:"accept_wait"`
	Retry      Retry          `yaml:"retry"`
	// Reject lists agent statuses that reject an event for good, besides
	// 400, 413, 415 and 422.
	Reject []int `yaml:"reject"`
	// Conversation-aware delivery (queued mode only): Order scope keeps
	// one delivery per scope in flight, in contextAt order; Debounce holds
	// a burst and delivers its newest event for all; Cancel notify posts
	// a cancellation notice when a newer event supersedes the run in
	// flight (runs: supersede).
	Order    ledger.Order    `yaml:"order"`
	Debounce ledger.Debounce `yaml:"debounce"`
	Cancel   CancelMode      `yaml:"cancel"`
}

// Retry is how long a queued event is retried (forward.retry).
type Retry struct {
	// Schedule lists the delay before each attempt: Schedule[0] before the
	// first (normally 0), Schedule[k] after the k-th failure. An event that
	// fails its last scheduled attempt goes to dead letter. Default
	// DefaultSchedule.
	Schedule []time.Duration `yaml:"schedule"`
	// MaxAge ends retrying earlier: an attempt that would start later than
	// MaxAge after receipt is not made (dead letter). Zero: the schedule
	// alone decides.
	MaxAge time.Duration `yaml:"max_age"`
}

// AcceptWaitOf is a pointer to d, for QueueConfig.AcceptWait.
func AcceptWaitOf(d time.Duration) *time.Duration { return &d }

// withDefaults fills in the queue policy's defaults.
func (q QueueConfig) withDefaults() QueueConfig {
	if q.Mode == "" {
		q.Mode = DefaultMode
	}
	if q.Concurrency == 0 {
		q.Concurrency = DefaultConcurrency
	}
	if q.AcceptWait == nil {
		q.AcceptWait = AcceptWaitOf(DefaultAcceptWait)
	}
	if len(q.Retry.Schedule) == 0 {
		q.Retry.Schedule = DefaultSchedule
	}
	return q
}

// validate checks a policy with its defaults filled in; path is the
// source's forward section.
func (q QueueConfig) validate(path string) error {
	switch q.Mode {
	case ModeInline, ModeQueued:
	default:
		return field.Errorf(path+".mode", "%q is not one of queued, inline", q.Mode)
	}
	if q.Concurrency < 0 {
		return field.Errorf(path+".concurrency", "must be positive")
	}
	if w := *q.AcceptWait; w < 0 || w > MaxAcceptWait {
		return field.Errorf(path+".accept_wait", "%s is not between 0 and %s", w, MaxAcceptWait)
	}
	for i, d := range q.Retry.Schedule {
		if d < 0 {
			return field.Errorf(fmt.Sprintf("%s.retry.schedule[%d]", path, i), "must not be negative")
		}
	}
	if q.Retry.MaxAge < 0 {
		return field.Errorf(path+".retry.max_age", "must not be negative")
	}
	if q.Order != ledger.OrderNone && q.Order != ledger.OrderScope {
		return field.Errorf(path+".order", "%q is not %q (or empty)", q.Order, ledger.OrderScope)
	}
	if q.Order != ledger.OrderNone && q.Mode != ModeQueued {
		return field.Errorf(path+".order", "needs forward.mode queued")
	}
	switch d := q.Debounce; {
	case d == ledger.Debounce{}:
	case q.Mode != ModeQueued:
		return field.Errorf(path+".debounce", "needs forward.mode queued")
	case d.Quiet <= 0:
		return field.Errorf(path+".debounce.quiet", "must be positive")
	case d.MaxWait == 0:
		return field.Errorf(path+".debounce.max_wait", "required: without it a scope that never goes quiet is never delivered")
	case d.MaxWait < d.Quiet:
		return field.Errorf(path+".debounce.max_wait", "%s is shorter than quiet %s", d.MaxWait, d.Quiet)
	}
	switch q.Cancel {
	case CancelNone:
	case CancelNotify:
		if q.Mode != ModeQueued {
			return field.Errorf(path+".cancel", "needs forward.mode queued")
		}
	default:
		return field.Errorf(path+".cancel", "%q is not %q (or empty)", q.Cancel, CancelNotify)
	}
	for i, st := range q.Reject {
		if st < 400 || st > 499 {
			return field.Errorf(fmt.Sprintf("%s.reject[%d]", path, i), "%d is not a 4xx status", st)
		}
		if slices.Contains([]int{401, 403, 404, 405, 410, 408, 409, 425, 429}, st) {
			return field.Errorf(fmt.Sprintf("%s.reject[%d]", path, i), "%d says the setup or the moment is wrong, never the event", st)
		}
	}
	return nil
}

// Queue returns the source's delivery mode and queue policy.
func (s *Source) Queue() QueueConfig { return s.cfg.Forward.Queue }

// Lease is how long a delivery's claim is held: the forward timeout plus a
// margin, so a live forward is never taken for dead.
func (s *Source) Lease() time.Duration { return s.cfg.Forward.Timeout + deliverMargin }

// HoldsAhead says whether a dispatcher may hold this source's deliveries
// ahead of a free request place (and make accepts wait for one). Not with
// runs: supersede: a held delivery is in flight as far as the ledger can
// tell, so a newer event could no longer settle it superseded while it
// waits, and the agent would get a turn that newest-wins should drop.
func (s *Source) HoldsAhead() bool { return s.cfg.Runs != ledger.ModeSupersede }

// StartBy is the latest time a delivery whose claim runs out at leaseUntil
// may start its forward: a forward that takes its whole timeout then still
// leaves half the margin to record its outcome within the claim.
func (s *Source) StartBy(leaseUntil time.Time) time.Time {
	return leaseUntil.Add(-s.cfg.Forward.Timeout - deliverMargin/2)
}

// KeepFor is how long an undelivered event is kept before retention
// starts: its max age, or the whole schedule with its jitter and leases.
func (s *Source) KeepFor() time.Duration {
	q := s.cfg.Forward.Queue
	if q.Retry.MaxAge > 0 {
		return q.Retry.MaxAge
	}
	var total time.Duration
	for _, d := range q.Retry.Schedule {
		total += d*6/5 + s.Lease()
	}
	return total
}

// ForwardRequest builds the request that delivers a queued event under a
// taken claim: the same request inline mode sends.
func (s *Source) ForwardRequest(ev ledger.QueuedEvent, t ledger.Taken) forward.Request {
	f := s.cfg.Forward
	return forward.Request{
		URL: f.URL, Timeout: f.Timeout, Body: ev.Body, ContentType: ev.ContentType,
		Header: http.Header(ev.Header), StaticHeaders: f.Headers,
		Source: s.Name, EventID: ev.EventID, Scope: t.Item.Scope, RunID: t.Run.ID, Delivery: t.Run.Delivery,
		FencingToken: t.Run.Token, ContextAt: t.Run.ContextAt, IdempotencyKey: t.Claim.IdempotencyKey,
		SigningSecret: f.SigningSecret, Final: f.Queue.Reject,
		Covers: t.Item.Covers, CoverCount: t.Item.CoverCount,
	}
}

// Handoff is what queued mode needs from the process's dispatcher.
type Handoff interface {
	// Reserve asks for a free delivery slot of source; it may wait
	// briefly for one, never past ctx. With one, the gateway records the
	// event with its claim held and hands the delivery straight to the
	// slot; without one, the event waits in the store for any dispatcher.
	Reserve(ctx context.Context, source string) (Slot, bool)
	// Notify says an event was queued without a slot, so a dispatcher
	// looks for due work now rather than at its next poll.
	Notify()
}

// Slot is one reserved delivery slot. Exactly one of Deliver and Release
// must be called.
type Slot interface {
	Deliver(t ledger.Taken, ev ledger.QueuedEvent)
	Release()
}

// statusQueued is the answer to an event recorded for queued delivery:
// 202 Accepted, for every source, since the agent has not seen it yet.
const statusQueued = http.StatusAccepted

func (g *Gateway) enqueue(c echo.Context, d *delivery, src *Source, body []byte, contextAt, now time.Time) error {
	ctx := c.Request().Context()
	var slot Slot
	if g.handoff != nil {
		if s, ok := g.handoff.Reserve(ctx, src.Name); ok {
			slot = s
		}
	}
	release := func() {
		if slot != nil {
			slot.Release()
			slot = nil
		}
	}
	defer release()
	req := c.Request()
	ev := ledger.QueuedEvent{Source: src.Name, EventID: d.eventID, Scope: d.scope, ContentType: req.Header.Get("Content-Type"),
		Header: pickHeaders(req.Header, src.passHeaders), ReceivedAt: now, ContextAt: contextAt, Body: body}
	rememberTrace(ctx, ev.Header)
	key := ledger.Key{Scope: d.scope, Intent: IntentDeliver, Payload: map[string]string{"source": src.Name, "eventId": d.eventID}}
	ectx, span := g.startStep(ctx, SpanEnqueue, d)
	res, err := g.ledger.Enqueue(ectx, ledger.EnqueueRequest{
		Event:    ev,
		Run:      ledger.RunOptions{RunID: d.runID, Mode: src.cfg.Runs, ContextAt: contextAt},
		Claim:    ledger.ClaimRequest{Key: key, Conflict: ledger.ConflictNone, PendingTTL: src.Lease(), MaxAttempts: deliverAttempts},
		Hold:     slot != nil,
		MaxAge:   src.KeepFor(),
		Order:    src.cfg.Forward.Queue.Order,
		Debounce: src.cfg.Forward.Queue.Debounce,
	})
	endStep(span, err, "store error", string(res.Status))
	if err != nil {
		g.metrics.storeErrors.WithLabelValues(src.Name).Inc()
		d.decision = "store_error"
		return &Error{Status: http.StatusServiceUnavailable, Message: "ledger unavailable", Reason: "store", RetryAfter: src.cfg.RetryAfter, Cause: err}
	}
	switch res.Status {
	case ledger.EnqueueQueued:
		g.metrics.queued.WithLabelValues(src.Name).Inc()
		g.metrics.Conversation.settled(src.Name, res)
		g.notifyCancels(res, d.eventID)
		d.decision = "queued"
		if slot != nil && res.Run != nil {
			d.deliveryN = res.Run.Delivery
			slot.Deliver(ledger.Taken{OK: true, Item: res.Item, Run: res.Run, Claim: res.Claim}, ev)
			slot = nil
		} else if g.handoff != nil {
			// The scope's rules held the event back (or no slot was
			// free): the slot goes back, and a sweep finds whatever is
			// due now.
			release()
			g.handoff.Notify()
		}
		d.status = statusQueued
		a := answer{Status: "queued", EventID: d.eventID, RunID: d.runID}
		if d.collect != nil { // an element of a batch: the batch answers for all
			*d.collect = a
			return nil
		}
		return writeJSON(c, statusQueued, a)
	case ledger.EnqueueDuplicate:
		g.metrics.duplicates.WithLabelValues(src.Name).Inc()
		d.decision = "duplicate"
		return g.ok(c, d, answer{Status: "duplicate", EventID: d.eventID, RunID: d.runID, Outcome: string(res.Item.Status)})
	default:
		g.metrics.inFlight.WithLabelValues(src.Name).Inc()
		d.decision = "in_flight"
		return &Error{Status: http.StatusServiceUnavailable, Message: "this event is being delivered inline by another request", Reason: "in_flight", RetryAfter: src.cfg.RetryAfter}
	}
}
