package ledger

import (
	"context"
	"fmt"
	"time"
)

// AttemptRecord is what one delivery attempt came to, kept for operators.
type AttemptRecord struct {
	N           int           `json:"n"` // which attempt of the item (QueueItem.Attempts when taken)
	At          time.Time     `json:"at"`
	Delivery    int           `json:"delivery"`
	Token       uint64        `json:"token"`
	Outcome     string        `json:"outcome"` // delivered, rejected, retry, dead, ...
	AgentStatus int           `json:"agentStatus,omitempty"`
	Latency     time.Duration `json:"latency"`
	Error       string        `json:"error,omitempty"`
	Answer      []byte        `json:"answer,omitempty"` // the first bytes of the agent's answer
	Late        bool          `json:"late,omitempty"`   // another delivery had taken over meanwhile
	// To is set on a trial (RecordTrial): the URL the event was sent to
	// instead of its source's agent. N then counts the item's trials.
	To string `json:"to,omitempty"`
}

// Finish settles a taken delivery.
type Finish struct {
	Taken Taken
	// Status is delivered or rejected (the deliver entry commits with
	// Value), queued (failed; due again at NextAt) or dead.
	Status DeliveryStatus
	NextAt time.Time
	Value  any
	Record AttemptRecord
	// Interrupted says the attempt was cut short by a shutdown, not
	// failed by the agent: it does not move the item along its schedule.
	Interrupted bool
}

// FinishDelivery records how a taken delivery ended, with its attempt
// record, in one store step. When another delivery took the item over
// meanwhile (this one's lease ran out), only the record is kept: the item
// belongs to the newer delivery. The result says LateSettle then.
func (qu Queue) FinishDelivery(ctx context.Context, f Finish) (Result, error) {
	l := qu.l
	t := f.Taken
	if !t.OK {
		return Result{}, fmt.Errorf("%w: finishing a delivery that was not taken", ErrInvalid)
	}
	outcome := OutcomeNotApplied
	var raw []byte
	switch f.Status {
	case DeliveryDelivered, DeliveryRejected:
		outcome = OutcomeCommitted
		var err error
		if raw, err = encodeValue(f.Value); err != nil {
			return Result{}, err
		}
	case DeliveryQueued:
		if f.NextAt.IsZero() {
			return Result{}, fmt.Errorf("%w: a delivery queued again needs its next time", ErrInvalid)
		}
	case DeliveryDead:
	default:
		return Result{}, fmt.Errorf("%w: delivery status %q cannot finish an attempt", ErrInvalid, f.Status)
	}
	rec := f.Record
	rec.N, rec.Delivery, rec.Token = t.Item.Attempts, t.Run.Delivery, t.Run.Token
	ref := t.Claim.Ref()
	// What the decision reads of f and t, copied out: a closure that
	// named them would move both (an item and its event record) to the
	// heap on every finish.
	attempts, status, interrupted, nextAt := t.Item.Attempts, f.Status, f.Interrupted, f.NextAt
	var res Result
	// A late settle may come after another delivery finished the item and
	// it left the document with its entry (spill.go): the lookup puts both
	// back for the record.
	err := l.transactEntry(ctx, ref.Scope, lookup{ids: []string{ref.EntryID}, lazy: true, waits: true}, func(d *document, now time.Time, blobs *blobSet) (bool, error) {
		if d.parkedEntry(ref.EntryID) {
			return false, errNeedAllWaits
		}
		q := d.Queue[ref.EntryID]
		if q == nil {
			return false, fmt.Errorf("%w: no queued delivery %q on scope %q", ErrUnknownEntry, ref.EntryID, ref.Scope)
		}
		e := d.Entries[ref.EntryID]
		current := e != nil && e.Attempt == ref.Attempt && q.Attempts == attempts
		var derr error
		res, _, derr = decideSettle(d, ref.EntryID, ref.Attempt, outcome, raw, rec.Error, now)
		if derr != nil {
			return false, derr
		}
		if !current {
			res.LateSettle = true
		}
		rec.Late = res.LateSettle
		if rec.At.IsZero() {
			rec.At = now
		}
		if err := q.keepRecord(rec, blobs); err != nil {
			return false, err
		}
		if !current {
			return true, nil
		}
		q.LastStatus, q.LastError, q.LeaseUntil = rec.AgentStatus, rec.Error, time.Time{}
		q.Status = status
		switch status {
		case DeliveryQueued:
			if !interrupted {
				q.Failures++
			}
			q.NextAt = nextAt
		case DeliveryDead:
			q.Failures++
			q.FinishedAt = now
		default:
			q.FinishedAt = now
		}
		return true, nil
	})
	if err != nil {
		return Result{}, err
	}
	l.observe(Event{Type: "finish_" + string(f.Status), Scope: ref.Scope, EntryID: ref.EntryID, Intent: t.Item.Intent, RunID: t.Item.RunID, LateSettle: res.LateSettle})
	return res, nil
}
