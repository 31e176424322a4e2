package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

// Reconciled is fenced on the attempt, records who resolved the entry, and
// the observer hears of settles and reconciliations with their intent.
func TestReconciledIsFencedAndObserved(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	var events []ledger.Event
	l := ledger.New(memory.New(clock.Now), ledger.Options{Clock: clock.Now, Observe: func(e ledger.Event) { events = append(events, e) }})
	key := ledger.Key{Scope: "s", Intent: "refund", Payload: 1}
	res, err := l.Once(ctx, key, func(context.Context, ledger.Call) (any, error) { return nil, errors.New("reset") })
	if err != nil || res.Status != ledger.StatusAmbiguous {
		t.Fatal(res, err)
	}
	if last := events[len(events)-1]; last.Type != string(ledger.OutcomeUnknown) || last.Intent != "refund" {
		t.Errorf("settle event %+v, want unknown for intent refund", last)
	}
	ref := ledger.ClaimRef{Scope: "s", EntryID: res.Entry.ID, Attempt: 2}
	if _, err := l.Reconciled(ctx, ref, ledger.OutcomeCommitted); !errors.Is(err, ledger.ErrNotAmbiguous) {
		t.Errorf("reconciling attempt 2 of an entry at attempt 1: %v, want ErrNotAmbiguous", err)
	}
	ref.Attempt = 1
	e, err := l.Reconciled(ctx, ref, ledger.OutcomeCommitted)
	if err != nil || e.State != ledger.StateCommitted || e.ResolvedBy != "reconciler" {
		t.Fatalf("reconcile attempt 1: %+v, %v", e, err)
	}
	if last := events[len(events)-1]; last.Type != "reconciled" || last.Intent != "refund" {
		t.Errorf("reconcile event %+v", last)
	}
	if _, err := l.Reconciled(ctx, ref, ledger.OutcomeCommitted); !errors.Is(err, ledger.ErrNotAmbiguous) {
		t.Errorf("reconciling a committed entry: %v, want ErrNotAmbiguous", err)
	}
	// Ambiguous with no limit lists from the default number of scopes.
	if _, err := l.Once(ctx, ledger.Key{Scope: "t", Intent: "x", Payload: 1}, func(context.Context, ledger.Call) (any, error) { return nil, errors.New("reset") }); err != nil {
		t.Fatal(err)
	}
	if list, err := l.Views().Ambiguous(ctx, 0); err != nil || len(list) != 1 || list[0].Scope != "t" {
		t.Errorf("Ambiguous(0): %+v, %v; want the one ambiguous entry", list, err)
	}
}
