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

// An inline delivery's settle keeps its event in the received index with
// every attempt, in the same store step; the item is never due, cannot be
// replayed, and keeps its body only when asked.
func TestSettleInlineKeepsTheEvent(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store := memory.New(clock.Now)
	l := ledger.New(store, ledger.Options{Clock: clock.Now})
	claim := func(id string) (*ledger.Run, ledger.Claim) {
		t.Helper()
		run, c, err := l.BeginClaim(ctx, ledger.RunOptions{RunID: "src:" + id},
			ledger.ClaimRequest{Key: ledger.Key{Scope: "conv", Intent: "deliver", Payload: id}, Conflict: ledger.ConflictNone,
				PendingTTL: time.Minute, Redeliverable: true, MaxAttempts: 100})
		if err != nil || !c.Acquired() {
			t.Fatalf("claim %s: %v %+v", id, err, c)
		}
		return run, c
	}
	rec := func(id string, status ledger.DeliveryStatus, agent int, keep bool) ledger.InlineRecord {
		return ledger.InlineRecord{Event: ledger.QueuedEvent{Source: "src", EventID: id, Scope: "conv", ContentType: "application/json",
			ReceivedAt: clock.Now(), Body: []byte(`{"id":"` + id + `"}`)}, KeepBody: keep, Status: status,
			Attempt: ledger.AttemptRecord{Outcome: string(status), AgentStatus: agent, Latency: 3 * time.Millisecond, Answer: make([]byte, 500)}}
	}

	// e1: the agent fails once (the provider retries), then takes it.
	run, c := claim("e1")
	if _, err := l.SettleInline(ctx, c.Ref(), ledger.OutcomeNotApplied, nil, errors.New("agent answered 503"), rec("e1", ledger.DeliveryFailed, 503, false)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	run2, c := claim("e1")
	if _, err := l.SettleInline(ctx, c.Ref(), ledger.OutcomeCommitted, "ok", nil, rec("e1", ledger.DeliveryDelivered, 200, false)); err != nil {
		t.Fatal(err)
	}
	items, err := l.Queue().ListDeliveries(ctx, ledger.DeliveryFilter{})
	if err != nil || len(items) != 1 {
		t.Fatalf("listed %d items (%v), want the inline event", len(items), err)
	}
	q := items[0]
	if !q.Inline || q.Status != ledger.DeliveryDelivered || q.Attempts != 2 || q.EventID != "e1" || q.RunID != run.ID || q.Due(clock.Now().Add(time.Hour)) {
		t.Fatalf("item %+v", q)
	}
	atts, err := l.Queue().AttemptsOf(ctx, q)
	if err != nil || len(atts) != 2 {
		t.Fatalf("attempts %+v (%v)", atts, err)
	}
	if atts[0].N != 1 || atts[0].AgentStatus != 503 || atts[0].Error == "" || atts[1].N != 2 || atts[1].AgentStatus != 200 ||
		atts[1].Delivery != run2.Delivery || atts[1].Token != run2.Token || len(atts[1].Answer) != ledger.MaxInlineAnswer {
		t.Fatalf("attempts %+v", atts)
	}
	ev, err := l.Queue().QueuedEventOf(ctx, q)
	if err != nil || ev.Body != nil || ev.EventID != "e1" {
		t.Fatalf("event without keep_body: %+v (%v)", ev, err)
	}
	if _, err := l.Queue().ReplayDelivery(ctx, "conv", q.EntryID); !errors.Is(err, ledger.ErrInline) || !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("replay of an inline event: %v", err)
	}
	if due, err := l.Queue().Due(ctx, ledger.DueQuery{Limit: 10}); err != nil || len(due) != 0 {
		t.Fatalf("due: %+v (%v)", due, err)
	}

	// e2: rejected, body kept.
	_, c = claim("e2")
	if _, err := l.SettleInline(ctx, c.Ref(), ledger.OutcomeCommitted, "no", nil, rec("e2", ledger.DeliveryRejected, 422, true)); err != nil {
		t.Fatal(err)
	}
	q, err = l.Queue().FindDelivery(ctx, "conv", "src", "e2")
	if err != nil || q.Status != ledger.DeliveryRejected {
		t.Fatalf("e2: %+v (%v)", q, err)
	}
	ev, err = l.Queue().QueuedEventOf(ctx, q)
	if err != nil || string(ev.Body) != `{"id":"e2"}` || ev.ContentType != "application/json" {
		t.Fatalf("event with keep_body: %+v (%v)", ev, err)
	}
	rejected, err := l.Queue().ListDeliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliveryRejected})
	if err != nil || len(rejected) != 1 || rejected[0].EventID != "e2" {
		t.Fatalf("rejected: %+v (%v)", rejected, err)
	}
	// A status that does not fit the outcome is refused.
	_, c = claim("e3")
	if _, err := l.SettleInline(ctx, c.Ref(), ledger.OutcomeNotApplied, nil, nil, rec("e3", ledger.DeliveryDelivered, 200, false)); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("delivered settled not applied: %v", err)
	}
}
