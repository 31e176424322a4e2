package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testDuplicateSeesEveryProcess: a redelivery of a queued event is answered
// from what the store holds, never from what one process remembers of the
// event's delivery, even by ledgers that remember committed entries (as
// the gateway's do). Another process sharing the store may change the
// event's item after this one saw it delivered: an operator's replay or
// trial, the late finish of a delivery whose lease ran out. A replay also
// makes the deliver entry pending again at its next take, so a claim for
// it is no longer answered "replayed" (issue #29: this is why queued
// duplicates still read the store where inline ones need not).
//
// Here a and b are two processes, each remembering committed entries;
// fresh remembers nothing, so its answers are the store's. Every answer of
// a (and b) must be fresh's.
func testDuplicateSeesEveryProcess(t *testing.T, newStore NewStore) {
	opts := ledger.Options{ReplayCache: ledger.DefaultReplayCache, Retention: 24 * time.Hour}
	e := setup(t, newStore, opts)
	opts.Clock = e.clock.Now
	eb, ef := *e, *e
	eb.l = ledger.New(e.store, opts)
	opts.ReplayCache = -1
	ef.l = ledger.New(e.store, opts)
	const scope, event = "dup-procs", "ev"
	run := ledger.RunOptions{RunID: "src:" + event, Mode: ledger.ModeIndependent}
	claim := ledger.ClaimRequest{Key: queueKey(scope, event), Conflict: ledger.ConflictNone, PendingTTL: testLease, Redeliverable: true}
	same := func(step string, wantItem ledger.DeliveryStatus, wantClaim ledger.Status) ledger.Enqueued {
		t.Helper()
		want := enqueue(t, &ef, scope, event, false)
		if want.Status != ledger.EnqueueDuplicate || want.Item.Status != wantItem {
			t.Fatalf("%s: the store answers %s with item %s, want duplicate with item %s", step, want.Status, want.Item.Status, wantItem)
		}
		wantC := must(ef.l.Claim(e.ctx, claim))
		_, wantB := must2(ef.l.BeginClaim(e.ctx, run, claim))
		if wantC.Status != wantClaim || wantB.Status != wantClaim {
			t.Fatalf("%s: the store answers a claim %s and an inline one %s, want %s", step, wantC.Status, wantB.Status, wantClaim)
		}
		for _, p := range []*env{e, &eb} {
			if got := enqueue(t, p, scope, event, false); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: a duplicate was answered\n%+v\nwhere the store says\n%+v", step, got, want)
			}
			if got := must(p.l.Claim(e.ctx, claim)); !reflect.DeepEqual(got, wantC) {
				t.Fatalf("%s: a claim was answered\n%+v\nwhere the store says\n%+v", step, got, wantC)
			}
			if _, got := must2(p.l.BeginClaim(e.ctx, run, claim)); !reflect.DeepEqual(got, wantB) {
				t.Fatalf("%s: an inline delivery's claim was answered\n%+v\nwhere the store says\n%+v", step, got, wantB)
			}
		}
		return want
	}
	first := enqueue(t, e, scope, event, false)
	id := first.Item.EntryID
	tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, id, testLease))
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered, Value: "ok",
		Record: ledger.AttemptRecord{Outcome: "delivered", AgentStatus: 200}}))
	same("delivered by a", ledger.DeliveryDelivered, ledger.StatusReplayed)

	e.clock.Advance(time.Second)
	must(eb.l.Queue().ReplayDelivery(e.ctx, scope, id))
	if got := same("replayed by b", ledger.DeliveryQueued, ledger.StatusReplayed); got.Item.Replays != 1 {
		t.Fatalf("replayed item: %+v", got.Item)
	}
	tkB := must(eb.l.Queue().TakeDelivery(e.ctx, scope, id, testLease))
	if !tkB.OK {
		t.Fatalf("b could not take the replayed delivery: %+v", tkB)
	}
	same("taken again by b", ledger.DeliveryDelivering, ledger.StatusInFlight)

	// b's lease runs out; a takes the delivery over and finishes it, then
	// b's late finish leaves its record on the item.
	e.clock.Advance(testLease + time.Second)
	tkA := must(e.l.Queue().TakeDelivery(e.ctx, scope, id, testLease))
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tkA, Status: ledger.DeliveryDelivered, Value: "again"}))
	before := same("delivered again by a", ledger.DeliveryDelivered, ledger.StatusReplayed)
	late := must(eb.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tkB, Status: ledger.DeliveryDelivered, Value: "late",
		Record: ledger.AttemptRecord{Outcome: "delivered", AgentStatus: 202}}))
	if !late.LateSettle {
		t.Fatalf("b's finish after a took over: %+v", late)
	}
	after := same("finished late by b", ledger.DeliveryDelivered, ledger.StatusReplayed)
	if reflect.DeepEqual(before.Item, after.Item) && before.Item.Records != nil {
		t.Fatalf("b's late record is not on the item it rides with: %+v", after.Item)
	}

	must(eb.l.Queue().RecordTrial(e.ctx, scope, id, ledger.AttemptRecord{To: "http://staging.test/events", Outcome: "delivered", AgentStatus: 200}))
	if got := same("tried by b", ledger.DeliveryDelivered, ledger.StatusReplayed); got.Item.Trials != 1 {
		t.Fatalf("tried item: %+v", got.Item)
	}

	// An inline delivery (its source switched modes) takes over a queued
	// delivery whose lease ran out and settles it, through SettleInline
	// and through Settle: the item stays the queued one, so a replay can
	// still make the entry pending again.
	for _, inline := range []bool{true, false} {
		step := map[bool]string{true: "settled inline by a", false: "settled by a"}[inline]
		must(eb.l.Queue().ReplayDelivery(e.ctx, scope, id))
		must(eb.l.Queue().TakeDelivery(e.ctx, scope, id, testLease))
		e.clock.Advance(testLease + time.Second)
		_, c := must2(e.l.BeginClaim(e.ctx, run, claim))
		if !c.Acquired() {
			t.Fatalf("%s: no claim after the lease ran out: %+v", step, c)
		}
		if inline {
			must(e.l.SettleInline(e.ctx, c.Ref(), ledger.OutcomeCommitted, "inline", nil, ledger.InlineRecord{
				Event: ledger.QueuedEvent{Source: "src", EventID: event, Scope: scope}, Status: ledger.DeliveryDelivered}))
		} else {
			must(e.l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, "settled", nil))
		}
		same(step, ledger.DeliveryDelivering, ledger.StatusReplayed)
		e.clock.Advance(time.Second)
		must(eb.l.Queue().ReplayDelivery(e.ctx, scope, id))
		must(eb.l.Queue().TakeDelivery(e.ctx, scope, id, testLease))
		same(step+", then replayed and taken by b", ledger.DeliveryDelivering, ledger.StatusInFlight)
		e.clock.Advance(testLease + time.Second)
	}
}
