package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// The effect's context ends when its claim would read as abandoned, so a
// hung effect stops instead of racing the next attempt; what it did is then
// unknown, and recorded as ambiguous.
func TestEffectContextEndsAtTheClaimDeadline(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{PendingTTL: 100 * time.Millisecond})
	var deadline time.Time
	r, err := l.Once(context.Background(), ledger.Key{Scope: "s", Intent: "slow", Payload: 1},
		func(ctx context.Context, c ledger.Call) (any, error) {
			deadline, _ = ctx.Deadline()
			<-ctx.Done()
			return nil, ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != ledger.StatusAmbiguous || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("hung effect: %s %v, want ambiguous after its deadline", r.Status, r.Err)
	}
	if deadline.IsZero() {
		t.Fatal("the effect's context had no deadline")
	}
}
