package ledger

import (
	"context"
	"fmt"
	"time"
)

// Inline events in the received index. A source that forwards inline
// claims, forwards and settles while the provider waits; without a record
// here its events would be in the scope's history alone, and the operator's
// lists (ListDeliveries, RecentDeliveries) would not show them. So the
// settle of an inline delivery also keeps a QueueItem marked Inline, in the
// same store step: no extra round trip, only the item's bytes in the
// document. Such an item is never due (no dispatcher takes it: the
// provider's retry redelivers an inline event), cannot be replayed, and
// keeps its attempts in the document itself (at most MaxInlineAttempts),
// so that without a kept body it writes no blob at all; a small kept body
// rides in the item too (embedsEvent).

// DeliveryFailed is the status of an inline delivery the agent did not take
// (unreachable, 5xx, timeout, the gateway shutting down): the provider was
// answered 503 and its retry delivers the event again.
const DeliveryFailed DeliveryStatus = "failed"

// MaxInlineAttempts bounds the attempts an inline item keeps, newest kept.
const MaxInlineAttempts = 20

// MaxInlineAnswer bounds the start of the agent's answer an inline attempt
// keeps in the document.
const MaxInlineAnswer = 128

// ErrInline is returned (wrapping ErrInvalid) by ReplayDelivery for an
// event that was forwarded inline: only queued events can be replayed.
var ErrInline = fmt.Errorf("%w: the event was forwarded inline; replay is offered for queued sources only (the provider's retry redelivers an inline event)", ErrInvalid)

// InlineRecord is what the received index keeps of one inline attempt.
type InlineRecord struct {
	// Event describes the event; its Body is kept (as the event blob, read
	// by QueuedEventOf) only when KeepBody is set.
	Event    QueuedEvent
	KeepBody bool
	// Status is delivered, rejected or failed.
	Status DeliveryStatus
	// Attempt is the attempt's outcome; its N, Delivery and Token (from
	// the claim's entry), At and an empty Error (from the settle's error)
	// are filled in here. Answer is clipped to MaxInlineAnswer bytes.
	Attempt AttemptRecord
}

// SettleInline is Settle for an inline delivery: the claim is settled as
// Settle would, and in the same store step the event's item in the
// received index is created or updated with this attempt.
func (l *Ledger) SettleInline(ctx context.Context, ref ClaimRef, outcome Outcome, value any, effectErr error, rec InlineRecord) (Result, error) {
	if ref.Scope == "" || ref.EntryID == "" {
		return Result{}, fmt.Errorf("%w: a claim reference needs scope and entry id", ErrInvalid)
	}
	switch rec.Status {
	case DeliveryDelivered, DeliveryRejected:
		if outcome != OutcomeCommitted {
			return Result{}, fmt.Errorf("%w: an inline delivery %s settles committed", ErrInvalid, rec.Status)
		}
	case DeliveryFailed:
		if outcome == OutcomeCommitted {
			return Result{}, fmt.Errorf("%w: a failed inline delivery does not settle committed", ErrInvalid)
		}
	default:
		return Result{}, fmt.Errorf("%w: inline delivery status %q (want delivered, rejected or failed)", ErrInvalid, rec.Status)
	}
	raw, errText, err := settleInput(outcome, value, effectErr)
	if err != nil {
		return Result{}, err
	}
	var body []byte
	if rec.KeepBody {
		var err error
		if body, err = encodeEvent(rec.Event); err != nil {
			return Result{}, err
		}
	}
	att := rec.Attempt
	if att.Error == "" {
		att.Error = errText
	}
	if len(att.Answer) > MaxInlineAnswer {
		att.Answer = att.Answer[:MaxInlineAnswer]
	}
	var res Result
	var rerun bool
	err = l.transactEntry(ctx, ref.Scope, lookup{ids: []string{ref.EntryID}, lazy: true}, func(d *document, now time.Time, blobs *blobSet) (bool, error) {
		var changed bool
		var derr error
		res, changed, derr = decideSettle(d, ref.EntryID, ref.Attempt, outcome, raw, errText, now)
		if derr != nil {
			return false, derr
		}
		q := d.Queue[ref.EntryID]
		rerun = d.rerunnable(ref.EntryID)
		if q != nil && !q.Inline {
			// A queued item under the same entry: the dispatcher's, not ours.
			return changed, nil
		}
		if q == nil {
			q = &QueueItem{EntryID: ref.EntryID, Scope: d.Scope, Source: rec.Event.Source, EventID: rec.Event.EventID,
				Inline: true, ReceivedAt: rec.Event.ReceivedAt, ContextAt: rec.Event.ContextAt,
				BodySize: len(rec.Event.Body)}
			if e := d.Entries[ref.EntryID]; e != nil {
				q.Intent, q.RunID = e.Intent, e.RunID
			}
			if q.ReceivedAt.IsZero() {
				q.ReceivedAt = now
			}
			d.Queue[ref.EntryID] = q
		}
		if body != nil && q.Blob == "" && !q.carriesEvent() {
			if d.embedsEvent(len(body)) {
				q.embed(body)
			} else {
				q.Blob = newNonce()
				blobs.set(eventBlob(q.Blob), body)
			}
		}
		q.Attempts++
		a := att
		a.N, a.Late = q.Attempts, res.LateSettle
		if e := d.Entries[ref.EntryID]; e != nil {
			a.Delivery, a.Token = e.Delivery, e.Token
		}
		if a.At.IsZero() {
			a.At = now
		}
		q.InlineAttempts = append(q.InlineAttempts, a)
		if len(q.InlineAttempts) > MaxInlineAttempts {
			q.InlineAttempts = q.InlineAttempts[len(q.InlineAttempts)-MaxInlineAttempts:]
		}
		if !res.LateSettle {
			q.Status, q.LastStatus, q.LastError, q.FinishedAt = rec.Status, att.AgentStatus, errText, now
		}
		return true, nil
	})
	if err != nil {
		return Result{}, err
	}
	return l.settled(ref, outcome, res, effectErr, rerun), nil
}

// inlineEvent is the event record of an inline item that kept no body:
// what its item says, with an empty body.
func inlineEvent(q QueueItem) QueuedEvent {
	return QueuedEvent{Source: q.Source, EventID: q.EventID, Scope: q.Scope, ReceivedAt: q.ReceivedAt, ContextAt: q.ContextAt}
}
