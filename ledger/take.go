package ledger

import (
	"context"
	"fmt"
	"time"
)

// Taken is a queued delivery a dispatcher now holds.
type Taken struct {
	OK bool // false: not due (taken elsewhere, finished, not yet time, or held back by its scope's order)
	// Superseded: the item was due but a newer run superseded its run;
	// it was settled superseded instead of taken (Item says so).
	Superseded bool
	Item       QueueItem
	Run        *Run
	Claim      Claim
}

// TakeDelivery claims a due queued delivery for lease: a new delivery of
// the event's run (a newer fencing token) and a new attempt of its deliver
// entry, both in one store step, so that two dispatchers anywhere never
// hold the same delivery at once. The first take of an event accepted
// without Hold uses the delivery Enqueue began.
func (qu Queue) TakeDelivery(ctx context.Context, scope, entryID string, lease time.Duration) (Taken, error) {
	l := qu.l
	if scope == "" || entryID == "" {
		return Taken{}, fmt.Errorf("%w: scope and entry id are required", ErrInvalid)
	}
	if lease <= 0 {
		return Taken{}, fmt.Errorf("%w: a delivery lease must be positive", ErrInvalid)
	}
	var out Taken
	err := l.transactFind(ctx, scope, lookup{waits: true}, func(d *document, now time.Time, _ *blobSet, v *spillView) (bool, error) {
		out = Taken{}
		if d.parkedEntry(entryID) {
			return false, errNeedAllWaits
		}
		q := d.Queue[entryID]
		if q == nil || !q.Due(now) {
			return false, nil
		}
		if q.waiting(now) && len(d.supersedeWaiting(now)) > 0 {
			if q.Status == DeliverySuperseded {
				out = Taken{Superseded: true, Item: *q}
			}
			if !d.takeable(q, now) {
				return true, nil
			}
		}
		if d.blocked(q, now) {
			return false, nil
		}
		if err := v.needRun(d, q.RunID); err != nil {
			return false, err // a replayed event whose run left
		}
		r := d.Runs[q.RunID]
		// A run ended or cancelled by hand before its event's first take
		// is as final as one ended after a failed attempt: decideBegin
		// says so, and nothing delivers the event.
		if q.Attempts > 0 || r == nil || r.Ended || r.Cancelled {
			mode := ModeIndependent
			if r != nil {
				mode = r.Mode
			}
			var reason Reason
			r, reason = decideBegin(d, beginInput{runID: q.RunID, mode: mode, contextAt: q.ContextAt, lands: v.lands}, now, l.opts)
			if reason == ReasonRunEnded || reason == ReasonRunCancelled {
				// Someone finished the run by hand: nothing may deliver it.
				q.Status, q.LastError, q.FinishedAt, q.LeaseUntil = DeliveryDead, "run "+string(reason), now, time.Time{}
				return true, nil
			}
		}
		in := claimInput{key: resolvedKey{scope: scope, intent: q.Intent, payload: q.Payload, id: entryID},
			conflict: ConflictNone, pendingTTL: lease, redeliverable: true}
		if e := d.Entries[entryID]; e != nil {
			in.maxAttempts = e.MaxAttempts
		}
		e := claimEntry(d, in, nil, now, l.opts)
		e.RunID, e.Token, e.Delivery = r.ID, r.Token, r.Delivery
		q.Attempts++
		q.Status, q.LeaseUntil, q.NextAt = DeliveryDelivering, e.Deadline(), time.Time{}
		out = Taken{OK: true, Item: *q, Run: l.runFrom(scope, r, ""),
			Claim: claimFrom(scope, decision{result: Result{Status: StatusClaimed, Entry: e}})}
		return true, nil
	})
	if err != nil {
		return Taken{}, err
	}
	if out.OK {
		l.observe(Event{Type: "take", Scope: scope, EntryID: entryID, Intent: out.Item.Intent, RunID: out.Item.RunID})
	}
	if out.Superseded {
		l.observe(Event{Type: "superseded", Scope: scope, EntryID: entryID, Intent: out.Item.Intent, RunID: out.Item.RunID})
	}
	return out, nil
}
