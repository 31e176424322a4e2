package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// Cross-process queue tests: stores shared by several processes (Postgres,
// Redis) run QueueChild in each of several OS processes at once and then
// check, outside the ledger, that every event was taken exactly once.

// QueueScopes and QueueEvents shape the cross-process queue run: every
// child enqueues all QueueEvents events (so all but one copy of each are
// duplicates), spread over QueueScopes scopes, then dispatches until all
// are delivered.
const (
	QueueScopes = 4
	QueueEvents = 40
)

// QueueEventID names event i of the run.
func QueueEventID(i int) string { return fmt.Sprintf("ev-%d", i) }

// QueueChild is one process's part: enqueue every event, then take due
// deliveries until every one is delivered, calling took once per take
// while the take is held (the effect the parent counts). No lease runs out
// during the run, so a second take of any event is a broken lease.
func QueueChild(ctx context.Context, l *ledger.Ledger, took func(ctx context.Context, eventID string) error) error {
	scopeOf := func(i int) string { return fmt.Sprintf("queue-scope-%d", i%QueueScopes) }
	for i := range QueueEvents {
		id := QueueEventID(i)
		_, err := l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "src", EventID: id, Body: []byte(id)},
			Run:   ledger.RunOptions{RunID: "src:" + id, Mode: ledger.ModeIndependent},
			Claim: ledger.ClaimRequest{Key: queueKey(scopeOf(i), id), Conflict: ledger.ConflictNone, PendingTTL: time.Minute},
		})
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", id, err)
		}
	}
	for {
		due, err := l.Queue().Due(ctx, ledger.DueQuery{Limit: 16})
		if err != nil {
			return err
		}
		for _, q := range due {
			tk, err := l.Queue().TakeDelivery(ctx, q.Scope, q.EntryID, time.Minute)
			if err != nil {
				return fmt.Errorf("take %s: %w", q.EventID, err)
			}
			if !tk.OK {
				continue
			}
			if err := took(ctx, q.EventID); err != nil {
				return err
			}
			if _, err := l.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}); err != nil {
				return fmt.Errorf("finish %s: %w", q.EventID, err)
			}
		}
		done := 0
		for s := range QueueScopes {
			items, err := l.Queue().QueueItems(ctx, scopeOf(s))
			if err != nil {
				return err
			}
			for _, q := range items {
				if q.Status == ledger.DeliveryDelivered {
					done++
				}
			}
		}
		if done == QueueEvents {
			return nil
		}
		if len(due) == 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%d of %d delivered: %w", done, QueueEvents, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}
