package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// A pause waits for the live dispatchers only: one that has stopped the
// source counts, one that has not is named when the wait ends, a stale
// entry (a process gone without leaving) and one that left are not waited
// for.
func TestWaitPausedWaitsForLiveDispatchers(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	l := ledger.New(memory.New(clock.Now), ledger.Options{Clock: clock.Now})
	now := clock.Now()
	if err := l.Sources().AckPaused(ctx, "gone", nil, now.Add(-ledger.PauseAckLive-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Sources().AckPaused(ctx, "a", map[string]bool{"stripe": true}, now); err != nil {
		t.Fatal(err)
	}
	if err := l.Sources().AckPaused(ctx, "b", map[string]bool{"github": true}, now); err != nil {
		t.Fatal(err)
	}
	w, err := l.Sources().WaitPaused(ctx, "stripe", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.Stopped, []string{"a"}) || !slices.Equal(w.Missing, []string{"b"}) {
		t.Fatalf("with b not stopped: %+v, want stopped [a], missing [b]", w)
	}
	if err := l.Sources().LeavePauseAcks(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if w, err = l.Sources().WaitPaused(ctx, "stripe", time.Hour); err != nil || !slices.Equal(w.Stopped, []string{"a"}) || len(w.Missing) != 0 {
		t.Fatalf("once b left: %+v %v, want stopped [a] at once", w, err)
	}
	// An entry older than a minute is dropped at the next write.
	clock.Advance(2 * time.Minute)
	if err := l.Sources().AckPaused(ctx, "c", nil, clock.Now()); err != nil {
		t.Fatal(err)
	}
	acks, err := l.Sources().PauseAcks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := acks["gone"]; ok || len(acks) != 1 {
		t.Fatalf("entries after two minutes: %v, want c alone", acks)
	}
}
