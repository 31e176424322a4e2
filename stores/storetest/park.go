package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testDueBetween: ScopesDueBetween lists only the scopes whose DueAt lies
// in its range, earliest first, also far in the future.
func testDueBetween(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	write := func(scope string, due time.Time) {
		t.Helper()
		noErr(t, s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{}`), TTL: time.Hour, DueAt: due}, nil
		}))
	}
	parkA, parkB := ledger.ParkedAt("a"), ledger.ParkedAt("b")
	write("now", start)
	write("a1", parkA)
	write("b1", parkB)
	write("a2", parkA)
	if got := must(s.ScopesDueBetween(ctx, parkA, parkA, 10)); fmt.Sprint(got) != "[a1 a2]" {
		t.Fatalf("scopes parked at a's time: %v, want [a1 a2]", got)
	}
	if got := must(s.ScopesDueBetween(ctx, parkA, parkA, 1)); len(got) != 1 {
		t.Fatalf("limit 1: %v", got)
	}
	if got := must(s.ScopesDueBetween(ctx, start.Add(time.Millisecond), start.Add(time.Hour), 10)); len(got) != 0 {
		t.Fatalf("a range after a scope's due time lists it: %v", got)
	}
	if got := must(s.ScopesDueBetween(ctx, start, start, 10)); fmt.Sprint(got) != "[now]" {
		t.Fatalf("range [start, start]: %v, want [now]", got)
	}
	if got := must(s.ScopesDue(ctx, start.Add(24*time.Hour), 10)); fmt.Sprint(got) != "[now]" {
		t.Fatalf("parked scopes are due: %v", got)
	}
}

// testParkAndUnpark: a parked delivery is not due and does not stand in
// the due index's way, operators still list it as queued, and unparking
// its source makes it due again as it was: its attempts untouched.
func testParkAndUnpark(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	enqueue(t, e, "a", "ev-a", false)
	enqueue(t, e, "b", "ev-b", false)
	if n := must(e.l.Queue().ParkDeliveries(e.ctx, "a", "other")); n != 0 {
		t.Fatalf("parked %d deliveries of another source", n)
	}
	if n := must(e.l.Queue().ParkDeliveries(e.ctx, "a", "src")); n != 1 {
		t.Fatalf("parked %d, want 1", n)
	}
	if got := dueEventIDs(e); got != "[ev-b]" {
		t.Fatalf("due with ev-a parked: %s", got)
	}
	if got := must(e.store.ScopesDue(e.ctx, e.clock.Now().Add(365*24*time.Hour), 10)); fmt.Sprint(got) != "[b]" {
		t.Fatalf("the due index still lists the parked scope: %v", got)
	}
	listed := must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{Status: ledger.DeliveryQueued}))
	if len(listed) != 2 {
		t.Fatalf("operators see %d queued deliveries, want 2 (parked ones included)", len(listed))
	}
	items := must(e.l.Queue().QueueItems(e.ctx, "a"))
	if tk := must(e.l.Queue().TakeDelivery(e.ctx, "a", items[0].EntryID, testLease)); tk.OK {
		t.Fatal("a parked delivery was taken")
	}
	if n := must(e.l.Queue().UnparkSource(e.ctx, "src", 10)); n != 1 {
		t.Fatalf("unparked %d scopes, want 1", n)
	}
	if n := must(e.l.Queue().UnparkSource(e.ctx, "src", 10)); n != 0 {
		t.Fatalf("a second unpark found %d scopes", n)
	}
	if got := dueEventIDs(e); got != "[ev-a ev-b]" {
		t.Fatalf("due after unparking: %s, want [ev-a ev-b] (back at its old time)", got)
	}
	tk := must(e.l.Queue().TakeDelivery(e.ctx, "a", items[0].EntryID, testLease))
	if !tk.OK || tk.Item.Attempts != 1 || tk.Run.Delivery != 1 {
		t.Fatalf("take after unparking: %+v", tk)
	}
	// A delivery whose holder crashed is parked too, and comes back due.
	e.clock.Advance(testLease + time.Second)
	if n := must(e.l.Queue().ParkDeliveries(e.ctx, "a", "src")); n != 1 {
		t.Fatalf("parked %d abandoned deliveries, want 1", n)
	}
	if got := dueEventIDs(e); got != "[ev-b]" {
		t.Fatalf("due with the abandoned ev-a parked: %s", got)
	}
	must(e.l.Queue().UnparkSource(e.ctx, "src", 10))
	tk2 := must(e.l.Queue().TakeDelivery(e.ctx, "a", items[0].EntryID, testLease))
	if !tk2.OK || tk2.Run.Token <= tk.Run.Token {
		t.Fatalf("take of the unparked abandoned delivery: %+v", tk2)
	}
}
