package storetest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// The conversation-aware delivery cases: per-scope order, newest wins for
// supersede runs, and debounce. The rules live in the scope document, so
// every store must keep them, for several ledgers (processes) at once.

type convEvent struct {
	scope, id string
	contextAt time.Time
	mode      ledger.Mode
	order     ledger.Order
	debounce  ledger.Debounce
	hold      bool
}

func enqueueConv(t *testing.T, e *env, ev convEvent) ledger.Enqueued {
	t.Helper()
	if ev.mode == "" {
		ev.mode = ledger.ModeIndependent
	}
	return must(e.l.Queue().Enqueue(e.ctx, ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: "src", EventID: ev.id, Scope: ev.scope, ReceivedAt: e.clock.Now(), ContextAt: ev.contextAt,
			Body: []byte(ev.id)},
		Run:      ledger.RunOptions{RunID: "src:" + ev.id, Mode: ev.mode, ContextAt: ev.contextAt},
		Claim:    ledger.ClaimRequest{Key: queueKey(ev.scope, ev.id), Conflict: ledger.ConflictNone, PendingTTL: testLease},
		Hold:     ev.hold,
		MaxAge:   72 * time.Hour,
		Order:    ev.order,
		Debounce: ev.debounce,
	}))
}

func dueIDs(t *testing.T, e *env) string {
	t.Helper()
	var ids []string
	for _, q := range must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 100})) {
		ids = append(ids, q.EventID)
	}
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

func itemOf(t *testing.T, e *env, scope, id string) ledger.QueueItem {
	t.Helper()
	return must(e.l.Queue().FindDelivery(e.ctx, scope, "src", id))
}

func take(t *testing.T, e *env, scope, id string) ledger.Taken {
	t.Helper()
	return must(e.l.Queue().TakeDelivery(e.ctx, scope, itemOf(t, e, scope, id).EntryID, testLease))
}

// testScopeOrder: with order scope, one delivery per scope is in flight at
// a time, in contextAt order whatever the receipt order; a failing head
// holds back only its own scope; a dead head lets the scope move on.
func testScopeOrder(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	enqueueConv(t, e, convEvent{scope: "o", id: "o2", contextAt: at(2), order: ledger.OrderScope})
	e.clock.Advance(time.Millisecond)
	enqueueConv(t, e, convEvent{scope: "o", id: "o1", contextAt: at(1), order: ledger.OrderScope})
	e.clock.Advance(time.Millisecond)
	enqueueConv(t, e, convEvent{scope: "o", id: "o3", contextAt: at(1), order: ledger.OrderScope}) // a tie: receipt order
	held := enqueueConv(t, e, convEvent{scope: "o", id: "o4", contextAt: at(3), order: ledger.OrderScope, hold: true})
	if held.Run != nil || held.Claim.Acquired() {
		t.Fatalf("an event behind others on its scope was held for forwarding: %+v", held)
	}
	if held.Depth != 4 {
		t.Fatalf("scope depth after the fourth event: %d", held.Depth)
	}
	enqueueConv(t, e, convEvent{scope: "p", id: "p1", contextAt: at(5), order: ledger.OrderScope})
	if got := dueIDs(t, e); got != "o1 p1" {
		t.Fatalf("due: %q, want only each scope's head (o1 p1)", got)
	}
	if tk := take(t, e, "o", "o2"); tk.OK {
		t.Fatal("took o2 while o1, ordered before it, was queued")
	}
	// Of many dispatchers racing over every item of the scope, one wins.
	ledgers := make([]*ledger.Ledger, 6)
	for i := range ledgers {
		ledgers[i] = ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	}
	var mu sync.Mutex
	var won []ledger.Taken
	var wg sync.WaitGroup
	for i, l := range ledgers {
		for _, id := range []string{"o1", "o2", "o3", "o4"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tk, err := l.Queue().TakeDelivery(e.ctx, "o", itemOf(t, e, "o", id).EntryID, testLease)
				if err != nil {
					t.Errorf("ledger %d take %s: %v", i, id, err)
					return
				}
				if tk.OK {
					mu.Lock()
					won = append(won, tk)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(won) != 1 || won[0].Item.EventID != "o1" {
		var ids []string
		for _, w := range won {
			ids = append(ids, w.Item.EventID)
		}
		t.Fatalf("racing dispatchers took %v, want exactly [o1]", ids)
	}
	head := won[0]
	if got := dueIDs(t, e); got != "p1" {
		t.Fatalf("due while o1 is in flight: %q, want p1", got)
	}
	// The head fails: its scope waits for its retry, the other scope not.
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: head, Status: ledger.DeliveryQueued, NextAt: e.clock.Now().Add(5 * time.Second)}))
	if got := dueIDs(t, e); got != "p1" {
		t.Fatalf("due while o1 waits for its retry: %q, want p1", got)
	}
	p1 := take(t, e, "p", "p1")
	if !p1.OK {
		t.Fatal("a failing head on scope o held back scope p")
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: p1, Status: ledger.DeliveryDelivered}))
	e.clock.Advance(5 * time.Second)
	if got := dueIDs(t, e); got != "o1" {
		t.Fatalf("due at o1's retry: %q", got)
	}
	if head = take(t, e, "o", "o1"); !head.OK {
		t.Fatal("o1 was not taken at its retry")
	}
	// The head's holder crashes: once its claim runs out it is the head
	// again, and still the only one due on its scope.
	e.clock.Advance(testLease)
	if got := dueIDs(t, e); got != "o1" {
		t.Fatalf("due after the head's claim ran out: %q, want o1 alone", got)
	}
	head = take(t, e, "o", "o1")
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: head, Status: ledger.DeliveryDead}))
	// Dead letter: the scope moves on, to the tie broken by receipt (o3
	// was received after o1 with the same contextAt, before o2's context).
	if got := dueIDs(t, e); got != "o3" {
		t.Fatalf("due after the head went to dead letter: %q, want o3", got)
	}
	o3 := take(t, e, "o", "o3")
	// An event whose context is older than the one in flight arrives: it
	// waits for the one in flight, then goes before everything later.
	enqueueConv(t, e, convEvent{scope: "o", id: "o0", contextAt: at(0), order: ledger.OrderScope})
	if got := dueIDs(t, e); got != "" {
		t.Fatalf("due while o3 is in flight: %q, want nothing", got)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: o3, Status: ledger.DeliveryDelivered}))
	var order []string
	for range 3 {
		due := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 100}))
		if len(due) != 1 {
			t.Fatalf("due on one ordered scope: %+v", due)
		}
		tk := must(e.l.Queue().TakeDelivery(e.ctx, "o", due[0].EntryID, testLease))
		order = append(order, tk.Item.EventID)
		must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}))
	}
	if got := strings.Join(order, " "); got != "o0 o2 o4" {
		t.Fatalf("delivered %q after o3, want o0 o2 o4", got)
	}
	// The holder of a delivery crashes while an event ordered before it
	// waits: once the claim runs out the scope is due again (the store's
	// due index must say so), and the earlier event goes first.
	enqueueConv(t, e, convEvent{scope: "q", id: "q2", contextAt: at(2), order: ledger.OrderScope})
	if !take(t, e, "q", "q2").OK {
		t.Fatal("q2 not taken")
	}
	enqueueConv(t, e, convEvent{scope: "q", id: "q1", contextAt: at(1), order: ledger.OrderScope})
	if got := dueIDs(t, e); got != "" {
		t.Fatalf("due while q2 is in flight: %q", got)
	}
	e.clock.Advance(testLease)
	if got := dueIDs(t, e); got != "q1" {
		t.Fatalf("due once q2's claim ran out: %q, want q1", got)
	}
	// Without order, the same scope's events go out side by side.
	enqueueConv(t, e, convEvent{scope: "u", id: "u1", contextAt: at(1)})
	enqueueConv(t, e, convEvent{scope: "u", id: "u2", contextAt: at(2)})
	if !take(t, e, "u", "u2").OK || !take(t, e, "u", "u1").OK {
		t.Fatal("an unordered scope was held to one in flight")
	}
}

// testNewestWins: with supersede runs, a waiting event whose run a newer
// event's run supersedes is settled superseded and never forwarded; the
// delivery in flight is told through its next claim.
func testNewestWins(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	first := enqueueConv(t, e, convEvent{scope: "chat", id: "m1", contextAt: at(0), mode: ledger.ModeSupersede, hold: true})
	if first.Run == nil {
		t.Fatal("the first event of an idle scope was not held for forwarding")
	}
	e.clock.Advance(100 * time.Millisecond)
	r2 := enqueueConv(t, e, convEvent{scope: "chat", id: "m2", contextAt: at(100), mode: ledger.ModeSupersede})
	if len(r2.Superseded) != 0 {
		t.Fatalf("m2 superseded the event in flight: %+v", r2.Superseded)
	}
	// The delivery in flight is reported once, to the caller that can tell
	// its agent, with the token its claims carry.
	if len(r2.Interrupted) != 1 || r2.Interrupted[0].Item.EventID != "m1" || r2.Interrupted[0].Token != first.Run.Token || r2.Interrupted[0].By != "src:m2" {
		t.Fatalf("interrupted by m2: %+v", r2.Interrupted)
	}
	e.clock.Advance(100 * time.Millisecond)
	r3 := enqueueConv(t, e, convEvent{scope: "chat", id: "m3", contextAt: at(200), mode: ledger.ModeSupersede})
	if len(r3.Superseded) != 1 || r3.Superseded[0].EventID != "m2" || r3.Superseded[0].SupersededBy != "src:m3" {
		t.Fatalf("superseded by m3: %+v", r3.Superseded)
	}
	if len(r3.Interrupted) != 0 {
		t.Fatalf("the delivery in flight was reported again: %+v", r3.Interrupted)
	}
	if got := dueIDs(t, e); got != "m3" {
		t.Fatalf("due: %q, want only the newest (m3)", got)
	}
	// The run in flight learns it on its next claim.
	c := must(e.l.RunRef("chat", first.Run.ID, first.Run.Token).Claim(e.ctx, "reply", "hello", ledger.OnceOptions{}))
	wantStatus(t, "claim of the superseded run in flight", c.Result, ledger.StatusRefused, ledger.ReasonSuperseded)
	// Another process sees the same settlement; a redelivery of m2 is a
	// duplicate; the superseded event is listed by scope.
	other := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	if q := must(other.Queue().FindDelivery(e.ctx, "chat", "src", "m2")); q.Status != ledger.DeliverySuperseded || q.Attempts != 0 {
		t.Fatalf("m2 as another process sees it: %+v", q)
	}
	if dup := enqueueConv(t, e, convEvent{scope: "chat", id: "m2", contextAt: at(100), mode: ledger.ModeSupersede}); dup.Status != ledger.EnqueueDuplicate || dup.Item.Status != ledger.DeliverySuperseded {
		t.Fatalf("redelivery of a superseded event: %+v", dup)
	}
	var statuses []string
	for _, q := range must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{Scope: "chat"})) {
		statuses = append(statuses, q.EventID+"="+string(q.Status))
	}
	if got := fmt.Sprint(statuses); got != "[m1=delivering m2=superseded m3=queued]" {
		t.Fatalf("listed: %s", got)
	}
	// The newest run's own delivery goes through and may write.
	tk := take(t, e, "chat", "m3")
	if !tk.OK {
		t.Fatal("the newest event could not be taken")
	}
	c = must(e.l.RunRef("chat", tk.Run.ID, tk.Run.Token).Claim(e.ctx, "reply", "answer to all", ledger.OnceOptions{Conflict: ledger.ConflictSameIntent}))
	wantStatus(t, "claim of the newest run", c.Result, ledger.StatusClaimed, "")

	// A run begun by other means (the API) supersedes a waiting event too,
	// found at take time: the take settles it instead.
	enqueueConv(t, e, convEvent{scope: "chat2", id: "n1", contextAt: at(300), mode: ledger.ModeSupersede})
	must(e.l.Begin(e.ctx, "chat2", ledger.RunOptions{RunID: "api", Mode: ledger.ModeSupersede, ContextAt: at(400)}))
	got := take(t, e, "chat2", "n1")
	if got.OK || !got.Superseded || got.Item.Status != ledger.DeliverySuperseded {
		t.Fatalf("take of an event superseded meanwhile: %+v", got)
	}
	if q := itemOf(t, e, "chat2", "n1"); q.Status != ledger.DeliverySuperseded || q.SupersededBy != "api" {
		t.Fatalf("after the take: %+v", q)
	}
	// Independent runs never supersede.
	enqueueConv(t, e, convEvent{scope: "ind", id: "i1", contextAt: at(0)})
	if r := enqueueConv(t, e, convEvent{scope: "ind", id: "i2", contextAt: at(100)}); len(r.Superseded) != 0 {
		t.Fatalf("independent runs superseded: %+v", r.Superseded)
	}
}

// testDebounce: a burst is held until the scope is quiet (or the first
// held event has waited max wait) and goes out once, as its newest event,
// covering every event of the burst; the covered ones are settled
// coalesced, naming it. Held events are durable like any queued event.
func testDebounce(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	deb := ledger.Debounce{Quiet: 2 * time.Second, MaxWait: 10 * time.Second}
	var last ledger.Enqueued
	for i := 1; i <= 5; i++ {
		last = enqueueConv(t, e, convEvent{scope: "burst", id: fmt.Sprintf("b%d", i), contextAt: e.clock.Now(), debounce: deb, hold: true})
		if last.Run != nil {
			t.Fatalf("a debounced event was held for forwarding at once: %+v", last)
		}
		if got := dueIDs(t, e); got != "" {
			t.Fatalf("due during the burst: %q", got)
		}
		e.clock.Advance(200 * time.Millisecond)
	}
	if len(last.Coalesced) != 1 || last.Coalesced[0].EventID != "b4" || last.Depth != 1 {
		t.Fatalf("fifth enqueue: coalesced %+v depth %d", last.Coalesced, last.Depth)
	}
	// A crash now loses nothing: another ledger over the store (a
	// restarted process) finds the held event and its covers.
	other := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	e.clock.Advance(2*time.Second - time.Millisecond - 200*time.Millisecond) // 1 ms before the quiet time ends
	if due := must(other.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})); len(due) != 0 {
		t.Fatalf("due before the scope was quiet: %+v", due)
	}
	e.clock.Advance(time.Millisecond)
	due := must(other.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10}))
	if len(due) != 1 || due[0].EventID != "b5" {
		t.Fatalf("due once quiet: %+v", due)
	}
	tk := must(other.Queue().TakeDelivery(e.ctx, "burst", due[0].EntryID, testLease))
	if !tk.OK || tk.Item.CoverCount != 5 || strings.Join(tk.Item.Covers, " ") != "b1 b2 b3 b4 b5" || tk.Run.Delivery != 1 {
		t.Fatalf("the covering take: %+v", tk)
	}
	for i := 1; i <= 4; i++ {
		q := itemOf(t, e, "burst", fmt.Sprintf("b%d", i))
		if q.Status != ledger.DeliveryCoalesced || q.CoveredBy != "b5" || q.Attempts != 0 {
			t.Fatalf("covered event b%d: %+v", i, q)
		}
	}
	must(other.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}))
	if got := dueIDs(t, e); got != "" {
		t.Fatalf("due after the covering delivery: %q", got)
	}
	// A redelivery of a covered event is a duplicate.
	if dup := enqueueConv(t, e, convEvent{scope: "burst", id: "b2", contextAt: e.clock.Now(), debounce: deb}); dup.Status != ledger.EnqueueDuplicate || dup.Item.Status != ledger.DeliveryCoalesced {
		t.Fatalf("redelivery of a covered event: %+v", dup)
	}

	// A scope that never goes quiet is delivered max wait after its first
	// held event, and the events after that start a new hold.
	first := e.clock.Now()
	for i := range 12 {
		enqueueConv(t, e, convEvent{scope: "chatty", id: fmt.Sprintf("c%02d", i), contextAt: e.clock.Now(), debounce: deb})
		if e.clock.Now().Sub(first) < deb.MaxWait {
			if got := dueIDs(t, e); got != "" {
				t.Fatalf("due %s after the first held event: %q", e.clock.Now().Sub(first), got)
			}
		}
		e.clock.Advance(time.Second)
		if e.clock.Now().Sub(first) == deb.MaxWait {
			break
		}
	}
	due = must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10}))
	if len(due) != 1 || due[0].EventID != "c09" || due[0].CoverCount != 10 {
		t.Fatalf("due at max wait: %+v", due)
	}
	// Debounce off: nothing is coalesced.
	enqueueConv(t, e, convEvent{scope: "plain", id: "x1", contextAt: e.clock.Now()})
	if r := enqueueConv(t, e, convEvent{scope: "plain", id: "x2", contextAt: e.clock.Now()}); len(r.Coalesced) != 0 {
		t.Fatalf("coalesced without debounce: %+v", r.Coalesced)
	}
	if got := dueIDs(t, e); !strings.Contains(got, "x1 x2") {
		t.Fatalf("due without debounce: %q", got)
	}
}

// testLongDebounceBurst: a burst longer than the document keeps of
// finished items still names its newest event as what covers each of its
// events, the oldest ones included, whatever moved out of the document
// meanwhile (each new event folds the held one into itself, and points
// what the held one covered at itself).
func testLongDebounceBurst(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	deb := ledger.Debounce{Quiet: time.Minute, MaxWait: time.Hour}
	const n = 80
	for i := range n {
		enqueueConv(t, e, convEvent{scope: "storm", id: fmt.Sprintf("s%02d", i), contextAt: e.clock.Now(), debounce: deb})
		e.clock.Advance(10 * time.Millisecond)
	}
	newest := fmt.Sprintf("s%02d", n-1)
	items := must(e.l.Queue().QueueItems(e.ctx, "storm"))
	if len(items) != n {
		t.Fatalf("%d items listed, want %d", len(items), n)
	}
	for _, q := range items {
		if q.EventID == newest {
			if q.Status != ledger.DeliveryQueued || q.CoverCount != n {
				t.Fatalf("the held event: %+v", q)
			}
			continue
		}
		if q.Status != ledger.DeliveryCoalesced || q.CoveredBy != newest {
			t.Fatalf("%s: status %s covered by %q, want coalesced into %s", q.EventID, q.Status, q.CoveredBy, newest)
		}
		if got := itemOf(t, e, "storm", q.EventID); got.CoveredBy != newest {
			t.Fatalf("FindDelivery(%s): covered by %q, want %s", q.EventID, got.CoveredBy, newest)
		}
	}
}
