package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrDeliveryInFlight is returned by ReplayDelivery for a delivery that a
// dispatcher holds right now.
var ErrDeliveryInFlight = errors.New("ledger: the delivery is in flight")

// ReplayDelivery makes a queued delivery due now, whatever it came to
// (delivered, rejected, dead, or waiting for a retry), with its place in
// the retry schedule reset. The next take is a new delivery of the same
// run, with a newer fencing token, so a fenced agent still writes once.
func (qu Queue) ReplayDelivery(ctx context.Context, scope, entryID string) (QueueItem, error) {
	l := qu.l
	if scope == "" || entryID == "" {
		return QueueItem{}, fmt.Errorf("%w: scope and entry id are required", ErrInvalid)
	}
	var out QueueItem
	// A finished item may have left the document with its entry
	// (spill.go): the lookup puts both back, and the replay keeps them.
	err := l.transactEntry(ctx, scope, lookup{ids: []string{entryID}, lazy: true}, func(d *document, now time.Time, _ *blobSet) (bool, error) {
		q := d.Queue[entryID]
		if q == nil {
			return false, fmt.Errorf("%w: no queued delivery %q on scope %q", ErrUnknownEntry, entryID, scope)
		}
		if q.Inline {
			return false, fmt.Errorf("%s %s: %w", q.Source, q.EventID, ErrInline)
		}
		if q.Status == DeliveryDelivering && now.Before(q.LeaseUntil) {
			return false, fmt.Errorf("%w: %s %s until %s", ErrDeliveryInFlight, q.Source, q.EventID, q.LeaseUntil.Format(time.RFC3339))
		}
		q.Status, q.NextAt, q.Failures, q.FinishedAt, q.LeaseUntil = DeliveryQueued, now, 0, time.Time{}, time.Time{}
		q.Parked = false // due now; a dispatcher parks it again if its source is still paused
		q.Replays++
		out = *q
		return true, nil
	})
	if err != nil {
		return QueueItem{}, err
	}
	l.observe(Event{Type: "replay", Scope: scope, EntryID: entryID, Intent: out.Intent, RunID: out.RunID})
	return out, nil
}

// rerunnable reports whether the entry id, even once committed, can be
// claimed again: a queued delivery (not an inline one) stands for it, which
// an operator's ReplayDelivery makes due again, and whose next take makes
// the entry pending, in whatever process. No process may then answer a
// claim for it "replayed" from memory (replayCache), since the store may
// no longer say so. A decision that looks the entry up has its spilled
// item back in the document (spill.go), so this sees it.
func (d *document) rerunnable(id string) bool {
	q := d.Queue[id]
	return q != nil && !q.Inline
}
