package ingress

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
)

// Handoff is what queued mode needs from the process's dispatcher
// (*dispatch.Dispatcher).
type Handoff interface {
	// Reserve asks for a free delivery slot of source; it may wait
	// briefly for one, never past ctx. With one, the gateway records the
	// event with its claim held and hands the delivery straight to the
	// slot; without one, the event waits in the store for any dispatcher.
	Reserve(ctx context.Context, source string) (*dispatch.Slot, bool)
	// Notify says an event was queued without a slot, so a dispatcher
	// looks for due work now rather than at its next poll.
	Notify()
	// SendCancel posts a cancellation notice for a delivery in flight
	// whose run a newer event superseded (forward.cancel: notify).
	SendCancel(src *dispatch.Source, n dispatch.CancelNotice)
}

// statusQueued is the answer to an event recorded for queued delivery:
// 202 Accepted, for every source, since the agent has not seen it yet.
const statusQueued = http.StatusAccepted

func (g *Gateway) enqueue(c echo.Context, d *delivery, src *Source, body []byte, contextAt, now time.Time) error {
	ctx := c.Request().Context()
	var slot *dispatch.Slot
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
	dispatch.RememberTrace(ctx, ev.Header)
	key := ledger.Key{Scope: d.scope, Intent: IntentDeliver, Payload: map[string]string{"source": src.Name, "eventId": d.eventID}}
	rctx, rcancel, err := g.recordCtx(ctx, d, src)
	if err != nil {
		return err
	}
	defer rcancel()
	ectx, span := g.startStep(rctx, SpanEnqueue, d)
	res, err := g.ledger.Queue().Enqueue(ectx, ledger.EnqueueRequest{
		Event:    ev,
		Run:      ledger.RunOptions{RunID: d.runID, Mode: src.cfg.Runs, ContextAt: contextAt},
		Claim:    ledger.ClaimRequest{Key: key, Conflict: ledger.ConflictNone, PendingTTL: src.queued.Lease(), MaxAttempts: deliverAttempts},
		Hold:     slot != nil,
		MaxAge:   src.queued.KeepFor(),
		Order:    src.queued.Policy.Order,
		Debounce: src.queued.Policy.Debounce,
	})
	endStep(span, err, "store error", string(res.Status))
	if err == nil {
		g.confirmContent(ctx, d, src)
	}
	if err != nil {
		g.metrics.storeErrors.WithLabelValues(src.Name).Inc()
		d.decision = decStoreError
		return &Error{Status: http.StatusServiceUnavailable, Message: "ledger unavailable", Reason: "store", RetryAfter: src.cfg.RetryAfter, Cause: err}
	}
	switch res.Status {
	case ledger.EnqueueQueued:
		g.metrics.queued.WithLabelValues(src.Name).Inc()
		g.metrics.Conversation.Settled(src.Name, res)
		g.notifyCancels(res, d.eventID)
		d.decision = decQueued
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
		d.decision = decDuplicate
		return g.ok(c, d, answer{Status: "duplicate", EventID: d.eventID, RunID: d.runID, Outcome: string(res.Item.Status)})
	default:
		g.metrics.inFlight.WithLabelValues(src.Name).Inc()
		d.decision = decInFlight
		return &Error{Status: http.StatusServiceUnavailable, Message: "this event is being delivered inline by another request", Reason: "in_flight", RetryAfter: src.cfg.RetryAfter}
	}
}
