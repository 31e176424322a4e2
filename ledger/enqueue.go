package ledger

import (
	"context"
	"fmt"
	"time"
)

// EnqueueRequest is an accepted event to record with its run and claim.
type EnqueueRequest struct {
	Event QueuedEvent
	Run   RunOptions
	// Claim is the deliver claim: its Key names the event; PendingTTL is
	// the lease a dispatcher holds it for. It is always redeliverable and
	// never fenced by a run (the run comes from Run).
	Claim ClaimRequest
	// Hold says the caller forwards the event at once, under the claim
	// granted here, for the claim's TTL. Without it the claim is recorded
	// already run out, so any dispatcher may take the event right away.
	Hold bool
	// MaxAge is how long the event may wait undelivered; retention starts
	// after it.
	MaxAge time.Duration
	// Order and Debounce are the source's conversation rules
	// (conversation.go). With Debounce the event is never held: it waits
	// for its scope to be quiet.
	Order    Order
	Debounce Debounce
}

// EnqueueStatus is what Enqueue did.
type EnqueueStatus string

// Enqueue statuses.
const (
	EnqueueQueued    EnqueueStatus = "queued"    // recorded now
	EnqueueDuplicate EnqueueStatus = "duplicate" // recorded (or delivered inline) before
	EnqueueInFlight  EnqueueStatus = "in_flight" // an inline delivery of it is in progress
)

// Enqueued is Enqueue's answer.
type Enqueued struct {
	Status EnqueueStatus
	// Item is the queued delivery (the earlier one for a duplicate; empty
	// when the event was handled inline before).
	Item QueueItem
	// Run and Claim are set when Hold was asked, the event is new, and
	// the scope's rules let it go out now (no order or debounce holds it
	// back): only then may the caller forward it.
	Run   *Run
	Claim Claim
	// Superseded and Coalesced are the waiting events of the scope that
	// this step settled without forwarding (the new one may be among
	// them); Depth is the scope's deliveries waiting or in flight after it.
	Superseded []QueueItem
	Coalesced  []QueueItem
	Depth      int
	// Interrupted lists the deliveries in flight on the scope whose run
	// this step's new run superseded: they are not stopped (their next
	// claim is refused), but the gateway may tell their agent.
	Interrupted []Interrupted
}

// Interrupted is a delivery in flight whose run a newer one superseded.
type Interrupted struct {
	Item     QueueItem
	Token    uint64 // the fencing token of the delivery in flight
	Delivery int
	By       string // the superseding run
}

// Enqueue records an accepted event, begins its run and claims its
// delivery, all in one store step: once it returns without error the event
// is durable, and it is never stored without its claim.
func (qu Queue) Enqueue(ctx context.Context, req EnqueueRequest) (Enqueued, error) {
	l := qu.l
	req.Claim.Redeliverable = true
	in, err := l.claimInput(req.Claim)
	if err != nil {
		return Enqueued{}, err
	}
	if in.runID != "" {
		return Enqueued{}, fmt.Errorf("%w: Enqueue takes the run from Run, not the claim", ErrInvalid)
	}
	bin, err := l.beginInput(req.Run)
	if err != nil {
		return Enqueued{}, err
	}
	if req.MaxAge < 0 {
		return Enqueued{}, fmt.Errorf("%w: max age must not be negative", ErrInvalid)
	}
	if err := req.Order.valid(); err != nil {
		return Enqueued{}, err
	}
	if err := req.Debounce.valid(); err != nil {
		return Enqueued{}, err
	}
	rec, err := encodeEvent(req.Event)
	if err != nil {
		return Enqueued{}, err
	}
	nonce := newNonce()
	var out Enqueued
	lk := lookupFor(in.key)
	lk.runs, lk.waits = bin.named(), true
	err = l.transactFind(ctx, in.key.scope, lk, func(d *document, now time.Time, blobs *blobSet, v *spillView) (bool, error) {
		out = Enqueued{}
		if d.parkedEntry(lk.ids...) || d.parkedRun(bin.runID) {
			// A delivery again of a parked event, or its run.
			return false, errNeedAllWaits
		}
		if q := d.Queue[in.key.id]; q != nil {
			out.Status, out.Item = EnqueueDuplicate, *q
			return false, nil
		}
		if e := d.Entries[in.key.id]; e != nil {
			switch {
			case e.State == StateCommitted:
				out.Status = EnqueueDuplicate
				return false, nil
			case e.State == StatePending && now.Before(e.Deadline()), e.State == StateAmbiguous:
				out.Status = EnqueueInFlight
				return false, nil
			}
		}
		before := d.supersededInFlight(now)
		bin := bin
		bin.lands = v.lands
		r, _ := decideBegin(d, bin, now, l.opts)
		e := claimEntry(d, in, nil, now, l.opts)
		e.RunID, e.Token, e.Delivery = r.ID, r.Token, r.Delivery
		for id, n := range d.supersededInFlight(now) {
			if _, was := before[id]; !was {
				p, pr := d.Queue[id], d.Runs[d.Queue[id].RunID]
				out.Interrupted = append(out.Interrupted, Interrupted{Item: *p, Token: pr.Token, Delivery: pr.Delivery, By: n})
			}
		}
		q := &QueueItem{
			EntryID: e.ID, Scope: d.Scope, Source: req.Event.Source, EventID: req.Event.EventID, RunID: r.ID,
			Intent: in.key.intent, Payload: in.key.payload, Blob: nonce, Status: DeliveryQueued,
			ReceivedAt: req.Event.ReceivedAt, ContextAt: r.ContextAt, NextAt: now, MaxAge: req.MaxAge,
			BodySize: len(req.Event.Body),
		}
		if q.ReceivedAt.IsZero() {
			q.ReceivedAt = now
		}
		q.Order, q.Quiet = string(req.Order), req.Debounce.Quiet
		d.Queue[e.ID] = q
		if q.Quiet > 0 {
			out.Coalesced = copyItems(d.coalesce(q, req.Debounce, now))
		}
		out.Superseded = copyItems(d.supersedeWaiting(now))
		if req.Hold && q.Status == DeliveryQueued && q.Quiet == 0 && !d.blocked(q, now) {
			q.Status, q.Attempts, q.LeaseUntil, q.NextAt = DeliveryDelivering, 1, e.Deadline(), time.Time{}
			out.Run = l.runFrom(d.Scope, r, "")
			out.Claim = claimFrom(d.Scope, decision{result: Result{Status: StatusClaimed, Entry: e}})
		} else {
			// Recorded as a claim that has already run out: redeliverable,
			// so the first dispatcher to come takes it over.
			e.PendingTTL = 0
		}
		if d.embedsEvent(len(rec)) {
			q.embed(rec)
		} else {
			blobs.set(eventBlob(nonce), rec)
		}
		out.Status, out.Item, out.Depth = EnqueueQueued, *q, d.depth()
		return true, nil
	})
	if err != nil {
		return Enqueued{}, err
	}
	l.observe(Event{Type: "enqueue_" + string(out.Status), Scope: in.key.scope, EntryID: in.key.id, Intent: in.key.intent, RunID: bin.runID})
	return out, nil
}
