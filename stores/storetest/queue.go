package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// The queued-delivery cases: the outbox rides in the scope document, the
// event's bytes in the document or a blob written by the same Transact, and the due index
// is the store's. A store passes them only if all three move together.

const testLease = 10 * time.Second

func queueKey(scope, event string) ledger.Key {
	return ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "src", "eventId": event}}
}

// dueEventIDs lists the event ids Due answers now, in its order.
func dueEventIDs(e *env) string {
	var ids []string
	for _, q := range must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})) {
		ids = append(ids, q.EventID)
	}
	return fmt.Sprint(ids)
}

func enqueue(t *testing.T, e *env, scope, event string, hold bool) ledger.Enqueued {
	t.Helper()
	body := []byte(`{"id":"` + event + `","text":"hello\nworld"}`)
	return must(e.l.Queue().Enqueue(e.ctx, ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: "src", EventID: event, Scope: scope, ContentType: "application/json",
			Header: map[string][]string{"X-Github-Event": {"push"}}, ReceivedAt: e.clock.Now(), Body: body},
		Run:    ledger.RunOptions{RunID: "src:" + event, Mode: ledger.ModeIndependent},
		Claim:  ledger.ClaimRequest{Key: queueKey(scope, event), Conflict: ledger.ConflictNone, PendingTTL: testLease},
		Hold:   hold,
		MaxAge: 72 * time.Hour,
	}))
}

// testBlobs: blobs are written with their document or not at all, deleted
// by a nil value, and gone when the document expires; ReadBlobs reads
// several as ReadBlob reads each.
func testBlobs(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	scope := "blobs"
	refused := errors.New("refused")
	err := s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(`{"n":0}`), Blobs: map[string][]byte{"b": []byte("x")}}, refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("fn error not passed through: %v", err)
	}
	if b := must(s.ReadBlob(ctx, scope, "b")); b != nil {
		t.Fatalf("a refused write stored blob %q", b)
	}
	body := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 1000) // binary, not UTF-8
	write := func(doc string, blobs map[string][]byte, ttl time.Duration) {
		t.Helper()
		noErr(t, s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(doc), TTL: ttl, Blobs: blobs}, nil
		}))
	}
	write(`{"n":1}`, map[string][]byte{"body": body, "small": []byte("s")}, time.Hour)
	if got := must(s.ReadBlob(ctx, scope, "body")); !bytes.Equal(got, body) {
		t.Fatalf("blob came back as %d bytes, want the %d written", len(got), len(body))
	}
	if got := must(s.ReadBlob(ctx, "other", "body")); got != nil {
		t.Fatalf("another scope sees this scope's blob")
	}
	readBlobs := func(scope string, names ...string) [][]byte {
		t.Helper()
		got := must(s.ReadBlobs(ctx, scope, names))
		if len(got) != len(names) {
			t.Fatalf("ReadBlobs(%q) answered %d records for %d names", names, len(got), len(names))
		}
		return got
	}
	if got := readBlobs(scope, "small", "missing", "body", "small"); string(got[0]) != "s" || got[1] != nil ||
		!bytes.Equal(got[2], body) || string(got[3]) != "s" {
		t.Fatalf("ReadBlobs(small, missing, body, small) = %q, %v, %d bytes, %q; want s, nil, the %d-byte body, s",
			got[0], got[1] != nil, len(got[2]), got[3], len(body))
	}
	if got := readBlobs("other", "body", "small"); got[0] != nil || got[1] != nil {
		t.Fatalf("ReadBlobs of another scope sees this scope's blobs: %q", got)
	}
	readBlobs(scope)
	write(`{"n":2}`, nil, time.Hour)
	if got := must(s.ReadBlob(ctx, scope, "small")); string(got) != "s" {
		t.Fatalf("a write that names no blob lost one: %q", got)
	}
	write(`{"n":3}`, map[string][]byte{"small": nil}, time.Hour)
	if got := must(s.ReadBlob(ctx, scope, "small")); got != nil {
		t.Fatalf("deleted blob still reads %q", got)
	}
	if got := must(s.ReadBlob(ctx, scope, "body")); !bytes.Equal(got, body) {
		t.Fatal("deleting one blob touched another")
	}
	// A document that expires takes its blobs with it, and one created in
	// its place does not inherit them.
	write(`{"n":4}`, nil, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if got := must(s.ReadBlob(ctx, scope, "body")); got != nil {
		t.Fatal("blob outlived its expired document")
	}
	if got := readBlobs(scope, "body"); got[0] != nil {
		t.Fatal("ReadBlobs: blob outlived its expired document")
	}
	write(`{"n":5}`, map[string][]byte{"new": []byte("n")}, time.Hour)
	if got := must(s.ReadBlob(ctx, scope, "body")); got != nil {
		t.Fatal("a document created after expiry inherited the old one's blob")
	}
	if got := must(s.ReadBlob(ctx, scope, "new")); string(got) != "n" {
		t.Fatalf("blob of the new document: %q", got)
	}
	if got := readBlobs(scope, "body", "new"); got[0] != nil || string(got[1]) != "n" {
		t.Fatalf("ReadBlobs(body, new) of the new document = %q, want nil, n", got)
	}
}

// testDueIndex: ScopesDue lists scopes by their last write's DueAt.
func testDueIndex(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	write := func(scope string, due time.Time) {
		t.Helper()
		noErr(t, s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{}`), TTL: time.Hour, DueAt: due}, nil
		}))
	}
	write("late", start.Add(2*time.Minute))
	write("early", start.Add(time.Minute))
	write("never", time.Time{})
	if got := must(s.ScopesDue(ctx, start, 10)); len(got) != 0 {
		t.Fatalf("due before their time: %v", got)
	}
	if got := must(s.ScopesDue(ctx, start.Add(3*time.Minute), 10)); fmt.Sprint(got) != "[early late]" {
		t.Fatalf("scopes due: %v, want [early late] (earliest first)", got)
	}
	if got := must(s.ScopesDue(ctx, start.Add(3*time.Minute), 1)); fmt.Sprint(got) != "[early]" {
		t.Fatalf("scopes due, limit 1: %v", got)
	}
	write("early", time.Time{})
	if got := must(s.ScopesDue(ctx, start.Add(3*time.Minute), 10)); fmt.Sprint(got) != "[late]" {
		t.Fatalf("a write without due time left the scope listed: %v", got)
	}
	if got := must(s.ScopesToReview(ctx, start.Add(time.Hour), 10)); len(got) != 0 {
		t.Fatalf("due times leaked into the review index: %v", got)
	}
}

// testIndexesAfterExpiry: a scope whose document expired and was created
// again is listed by the indexes its new document's write sets, and by no
// other, whatever its earlier life had set (issue #29: a creating write
// may leave the earlier life's entries for the listings to skip).
func testIndexesAfterExpiry(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	at := start.Add(time.Minute)
	write := func(w ledger.Write) {
		t.Helper()
		noErr(t, s.Transact(ctx, "again", func(cur []byte) (*ledger.Write, error) { return &w, nil }))
	}
	listed := func() string {
		t.Helper()
		return fmt.Sprintf("review %v due %v received %d", must(s.ScopesToReview(ctx, at.Add(time.Hour), 10)),
			must(s.ScopesDue(ctx, at.Add(time.Hour), 10)), len(must(s.ScopesReceived(ctx, ledger.ScopeAt{}, 10))))
	}
	write(ledger.Write{Doc: []byte(`{"life":1}`), TTL: time.Millisecond, ReviewAt: at, DueAt: at, ReceivedAt: at})
	time.Sleep(20 * time.Millisecond)
	write(ledger.Write{Doc: []byte(`{"life":2}`), TTL: time.Hour, DueAt: at})
	if got := listed(); got != "review [] due [again] received 0" {
		t.Fatalf("after the scope was created again with a due time only: %s", got)
	}
	write(ledger.Write{Doc: []byte(`{"life":2,"n":2}`), TTL: time.Hour, ReceivedAt: at})
	if got := listed(); got != "review [] due [] received 1" {
		t.Fatalf("after a write with a received time only: %s", got)
	}
}

// testEnqueueStored: an acknowledged event is stored with its run and its
// claim, byte for byte, and a duplicate is recognised whatever its state.
func testEnqueueStored(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	got := enqueue(t, e, "conv-1", "ev1", false)
	if got.Status != ledger.EnqueueQueued || got.Item.Status != ledger.DeliveryQueued {
		t.Fatalf("enqueue: %+v", got)
	}
	// Another ledger over the same store (another process) sees it all.
	other := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	items := must(other.Queue().QueueItems(e.ctx, "conv-1"))
	if len(items) != 1 || items[0].EventID != "ev1" || items[0].RunID != "src:ev1" {
		t.Fatalf("queue items: %+v", items)
	}
	ev := must(other.Queue().QueuedEventOf(e.ctx, items[0]))
	if string(ev.Body) != `{"id":"ev1","text":"hello\nworld"}` || ev.ContentType != "application/json" ||
		ev.Header["X-Github-Event"][0] != "push" || !ev.ReceivedAt.Equal(start) {
		t.Fatalf("event record: %+v body %q", ev, ev.Body)
	}
	// Never an event without its claim: the deliver entry is there.
	chk := must(other.Check(e.ctx, queueKey("conv-1", "ev1")))
	if chk.Entry == nil || chk.Entry.RunID != "src:ev1" || !chk.Entry.Redeliverable {
		t.Fatalf("deliver entry of a queued event: %+v", chk.Entry)
	}
	if dup := enqueue(t, e, "conv-1", "ev1", false); dup.Status != ledger.EnqueueDuplicate || dup.Item.Blob != items[0].Blob {
		t.Fatalf("duplicate while queued: %+v", dup)
	}
	tk := must(e.l.Queue().TakeDelivery(e.ctx, "conv-1", items[0].EntryID, testLease))
	if dup := enqueue(t, e, "conv-1", "ev1", false); dup.Status != ledger.EnqueueDuplicate {
		t.Fatalf("duplicate while delivering: %+v", dup)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDead}))
	if dup := enqueue(t, e, "conv-1", "ev1", false); dup.Status != ledger.EnqueueDuplicate || dup.Item.Status != ledger.DeliveryDead {
		t.Fatalf("duplicate of a dead event: %+v", dup)
	}

	// Concurrent copies of one event: exactly one is recorded.
	var queued atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.l.Queue().Enqueue(e.ctx, ledger.EnqueueRequest{
				Event: ledger.QueuedEvent{Source: "src", EventID: "race", Body: []byte("x")},
				Run:   ledger.RunOptions{RunID: "src:race", Mode: ledger.ModeIndependent},
				Claim: ledger.ClaimRequest{Key: queueKey("conv-2", "race"), PendingTTL: testLease},
			})
			if err != nil {
				errs <- err
				return
			}
			if r.Status == ledger.EnqueueQueued {
				queued.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if queued.Load() != 1 {
		t.Fatalf("%d concurrent copies were recorded, want 1", queued.Load())
	}
}

// testDueDeliveries: due listing follows takes, retries and outcomes.
func testDueDeliveries(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	enqueue(t, e, "a", "ev-a", false)
	e.clock.Advance(time.Millisecond)
	enqueue(t, e, "b", "ev-b", false)
	held := enqueue(t, e, "c", "ev-c", true)
	if !held.Claim.Acquired() || held.Run == nil || held.Run.Delivery != 1 {
		t.Fatalf("held enqueue: %+v", held)
	}
	if got := dueEventIDs(e); got != "[ev-a ev-b]" {
		t.Fatalf("due: %s, want [ev-a ev-b] (the held one is not due)", got)
	}
	items := must(e.l.Queue().QueueItems(e.ctx, "a"))
	tk := must(e.l.Queue().TakeDelivery(e.ctx, "a", items[0].EntryID, testLease))
	if !tk.OK || tk.Run.Delivery != 1 || tk.Item.Attempts != 1 || tk.Run.ID != "src:ev-a" {
		t.Fatalf("first take: %+v", tk)
	}
	if got := dueEventIDs(e); got != "[ev-b]" {
		t.Fatalf("due after a take: %s", got)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryQueued, NextAt: e.clock.Now().Add(5 * time.Second),
		Record: ledger.AttemptRecord{AgentStatus: 503, Error: "agent answered 503", Answer: []byte("busy")}}))
	if got := dueEventIDs(e); got != "[ev-b]" {
		t.Fatalf("a retry is due before its time: %s", got)
	}
	e.clock.Advance(5 * time.Second)
	if got := dueEventIDs(e); got != "[ev-b ev-a]" {
		t.Fatalf("due once the retry's time came: %s, want [ev-b ev-a] (earliest due first)", got)
	}
	tk2 := must(e.l.Queue().TakeDelivery(e.ctx, "a", items[0].EntryID, testLease))
	if !tk2.OK || tk2.Run.Delivery != 2 || tk2.Run.Token <= tk.Run.Token || tk2.Item.Failures != 1 {
		t.Fatalf("retry take: %+v (first %+v)", tk2, tk)
	}
	res := must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk2, Status: ledger.DeliveryDelivered, Value: map[string]any{"outcome": "delivered"},
		Record: ledger.AttemptRecord{AgentStatus: 200}}))
	if res.LateSettle || res.Status != ledger.StatusExecuted {
		t.Fatalf("finish: %+v", res)
	}
	if got := dueEventIDs(e); got != "[ev-b]" {
		t.Fatalf("due after delivery: %s", got)
	}
	q := must(e.l.Queue().QueueItems(e.ctx, "a"))[0]
	if q.Status != ledger.DeliveryDelivered {
		t.Fatalf("status after delivery: %s", q.Status)
	}
	recs := must(e.l.Queue().AttemptsOf(e.ctx, q))
	if len(recs) != 2 || recs[0].AgentStatus != 503 || string(recs[0].Answer) != "busy" || recs[1].AgentStatus != 200 || recs[1].Delivery != 2 {
		t.Fatalf("attempt records: %+v", recs)
	}
	if chk := must(e.l.Check(e.ctx, queueKey("a", "ev-a"))); !chk.Done {
		t.Fatalf("the deliver entry of a delivered event is not done: %+v", chk)
	}
}

// testDueDeliveriesSkipping: the scopes a dispatcher is taking from are
// left out of a sweep's page, and the page is filled from further down the
// index instead, earliest due first; DueQuery.From starts a page at a
// place in the index.
func testDueDeliveriesSkipping(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	for _, s := range []string{"a", "b", "c", "d"} {
		enqueue(t, e, s, "ev-"+s, false)
		e.clock.Advance(time.Millisecond)
	}
	ids := func(items []ledger.QueueItem) string {
		var out []string
		for _, q := range items {
			out = append(out, q.EventID)
		}
		return fmt.Sprint(out)
	}
	if got := ids(must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 2}))); got != "[ev-a ev-b]" {
		t.Fatalf("page of 2 skipping nothing: %s, want [ev-a ev-b]", got)
	}
	if got := ids(must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 2, Skip: map[string]bool{"a": true, "c": true}}))); got != "[ev-b ev-d]" {
		t.Fatalf("page of 2 skipping a and c: %s, want [ev-b ev-d]", got)
	}
	// More scopes skipped than the page holds (a dispatcher taking many
	// at once): the page still comes from further down the index.
	if got := ids(must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 1, Skip: map[string]bool{"a": true, "b": true, "c": true}}))); got != "[ev-d]" {
		t.Fatalf("page of 1 skipping a, b and c: %s, want [ev-d]", got)
	}
	if got := ids(must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10, Skip: map[string]bool{"a": true, "b": true, "c": true, "d": true}}))); got != "[]" {
		t.Fatalf("skipping every scope: %s, want []", got)
	}
	// The page after [a b] starts at b's place, without b.
	first := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 2}))
	from := first[1].NextAt
	if got := ids(must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 2, From: from, Skip: map[string]bool{"a": true, "b": true}}))); got != "[ev-c ev-d]" {
		t.Fatalf("page of 2 from b's due time, skipping a and b: %s, want [ev-c ev-d]", got)
	}
	if got := ids(must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10, From: from}))); got != "[ev-b ev-c ev-d]" {
		t.Fatalf("from b's due time: %s, want [ev-b ev-c ev-d]", got)
	}
}

// testCountDue: the count of scopes with a delivery due now follows takes,
// settles and lease ends, as ScopesDue lists them.
func testCountDue(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	count := func(want int, when string) {
		t.Helper()
		if got := must(e.l.Queue().CountDue(e.ctx)); got != want {
			t.Fatalf("%s: %d scopes due, want %d", when, got, want)
		}
	}
	count(0, "empty")
	for _, s := range []string{"a", "b", "c"} {
		enqueue(t, e, s, "ev-"+s, false)
	}
	enqueue(t, e, "held", "ev-held", true)
	count(3, "three queued and one held at accept")
	a := must(e.l.Queue().QueueItems(e.ctx, "a"))[0]
	taken := must(e.l.Queue().TakeDelivery(e.ctx, "a", a.EntryID, testLease))
	if !taken.OK {
		t.Fatal("take of a refused")
	}
	count(2, "a taken")
	b := must(e.l.Queue().QueueItems(e.ctx, "b"))[0]
	tb := must(e.l.Queue().TakeDelivery(e.ctx, "b", b.EntryID, testLease))
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tb, Status: ledger.DeliveryDelivered, Value: "ok"}))
	count(1, "a taken, b delivered")
	e.clock.Advance(testLease + time.Second)
	count(3, "the leases of a and of the held one ran out")
	if got := len(must(e.store.ScopesDue(e.ctx, e.clock.Now(), 100))); got != 3 {
		t.Fatalf("ScopesDue lists %d scopes where CountDue counts 3", got)
	}
}

// testDeliveryLease: a take is a lease. Of many dispatchers racing for one
// delivery exactly one gets it; nobody else can until its claim runs out,
// and then the holder's late outcome cannot overwrite the new delivery's.
func testDeliveryLease(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	enqueue(t, e, "lease", "ev", false)
	id := must(e.l.Queue().QueueItems(e.ctx, "lease"))[0].EntryID
	ledgers := make([]*ledger.Ledger, 8)
	for i := range ledgers {
		ledgers[i] = ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	}
	race := func() []ledger.Taken {
		t.Helper()
		var mu sync.Mutex
		var won []ledger.Taken
		var wg sync.WaitGroup
		errs := make(chan error, len(ledgers))
		for _, l := range ledgers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tk, err := l.Queue().TakeDelivery(e.ctx, "lease", id, testLease)
				if err != nil {
					errs <- err
					return
				}
				if tk.OK {
					mu.Lock()
					won = append(won, tk)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return won
	}
	first := race()
	if len(first) != 1 {
		t.Fatalf("%d dispatchers hold the delivery, want 1", len(first))
	}
	e.clock.Advance(testLease - time.Millisecond)
	if again := race(); len(again) != 0 {
		t.Fatalf("taken again while its claim was live: %+v", again)
	}
	// The holder crashed: once the claim runs out the delivery is due again.
	e.clock.Advance(time.Millisecond)
	if due := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})); len(due) != 1 || due[0].EntryID != id {
		t.Fatalf("a crashed holder's delivery is not due after its claim ran out: %+v", due)
	}
	second := race()
	if len(second) != 1 {
		t.Fatalf("%d dispatchers took the expired delivery, want 1", len(second))
	}
	if second[0].Run.Token <= first[0].Run.Token || second[0].Run.Delivery != first[0].Run.Delivery+1 {
		t.Fatalf("takeover did not fence: first %+v second %+v", first[0].Run, second[0].Run)
	}
	// The first holder wakes up and reports success: flagged late, and the
	// delivery stays the second's.
	res := must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: first[0], Status: ledger.DeliveryDelivered}))
	if !res.LateSettle {
		t.Fatalf("the stale holder's finish was not flagged late: %+v", res)
	}
	q := must(e.l.Queue().QueueItems(e.ctx, "lease"))[0]
	if q.Status != ledger.DeliveryDelivering || q.Attempts != 2 {
		t.Fatalf("a stale finish changed the item: %+v", q)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: second[0], Status: ledger.DeliveryDelivered}))
	if q := must(e.l.Queue().QueueItems(e.ctx, "lease"))[0]; q.Status != ledger.DeliveryDelivered {
		t.Fatalf("the holder's finish did not land: %+v", q)
	}
}

// testReplayAndDead: a dead delivery is kept and not due; a replay makes
// it due with the same run and a newer token.
func testReplayAndDead(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: 24 * time.Hour})
	enqueue(t, e, "dead", "ev", false)
	q := must(e.l.Queue().QueueItems(e.ctx, "dead"))[0]
	tk := must(e.l.Queue().TakeDelivery(e.ctx, "dead", q.EntryID, testLease))
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDead, Record: ledger.AttemptRecord{Error: "gave up"}}))
	e.clock.Advance(time.Hour)
	if due := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})); len(due) != 0 {
		t.Fatalf("a dead delivery is due: %+v", due)
	}
	if got := must(e.l.Queue().QueueItems(e.ctx, "dead")); len(got) != 1 || got[0].Status != ledger.DeliveryDead {
		t.Fatalf("dead delivery not kept: %+v", got)
	}
	must(e.l.Queue().ReplayDelivery(e.ctx, "dead", q.EntryID))
	tk2 := must(e.l.Queue().TakeDelivery(e.ctx, "dead", q.EntryID, testLease))
	if !tk2.OK || tk2.Run.ID != tk.Run.ID || tk2.Run.Token <= tk.Run.Token || tk2.Run.Delivery != tk.Run.Delivery+1 || tk2.Item.Failures != 0 {
		t.Fatalf("replayed take: %+v, first %+v", tk2, tk)
	}
	if _, err := e.l.Queue().ReplayDelivery(e.ctx, "dead", q.EntryID); !errors.Is(err, ledger.ErrDeliveryInFlight) {
		t.Fatalf("replay of a delivery in flight: %v", err)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk2, Status: ledger.DeliveryDelivered}))
	// Retention: a delivered event and its bytes go one retention later.
	e.clock.Advance(24*time.Hour + time.Second)
	enqueue(t, e, "dead", "other", false) // any write prunes
	left := must(e.l.Queue().QueueItems(e.ctx, "dead"))
	if len(left) != 1 || left[0].EventID != "other" {
		t.Fatalf("after retention: %+v", left)
	}
	if b := must(e.store.ReadBlob(e.ctx, "dead", "e:"+q.Blob)); b != nil {
		t.Fatal("a pruned delivery's body is still stored")
	}
}

// testRunFinishedByHandNotForwarded: an operator who cancels, or an agent
// who ends, the run of a queued event before its first delivery stops it:
// the take finds the run finished, nothing is forwarded, and the event
// goes to dead letter naming why, as it does after a failed attempt.
func testRunFinishedByHandNotForwarded(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	for _, c := range []struct {
		event  string
		finish func(scope, run string) error
		reason ledger.Reason
	}{
		{"cancelled", func(scope, run string) error { return e.l.Cancel(e.ctx, scope, run) }, ledger.ReasonRunCancelled},
		{"ended", func(scope, run string) error { return e.l.End(e.ctx, scope, run, "answered elsewhere") }, ledger.ReasonRunEnded},
	} {
		scope := "finished-" + c.event
		q := enqueue(t, e, scope, c.event, false).Item
		noErr(t, c.finish(scope, q.RunID))
		if tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, q.EntryID, testLease)); tk.OK {
			t.Fatalf("%s: the first take of an event whose run was %s by hand: %+v", c.event, c.event, tk)
		}
		got := must(e.l.Queue().FindDelivery(e.ctx, scope, "src", c.event))
		if got.Status != ledger.DeliveryDead || !strings.Contains(got.LastError, string(c.reason)) || got.Attempts != 0 {
			t.Fatalf("%s: after the take: %s %q, %d attempts", c.event, got.Status, got.LastError, got.Attempts)
		}
		if due := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})); len(due) != 0 {
			t.Fatalf("%s: still due: %+v", c.event, due)
		}
	}
}

// testListDeliveries: operators find waiting deliveries through the due
// index, dead and rejected ones through the review index, every status
// (delivered too) through the received index, and any by scope; the paused-sources record is shared through the store.
func testListDeliveries(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	enqueue(t, e, "list-a", "waiting", false)
	e.clock.Advance(time.Second)
	enqueue(t, e, "list-b", "dead", false)
	e.clock.Advance(time.Second)
	enqueue(t, e, "list-c", "delivered", false)
	finish := func(scope string, status ledger.DeliveryStatus) {
		t.Helper()
		q := must(e.l.Queue().QueueItems(e.ctx, scope))[0]
		tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, q.EntryID, testLease))
		must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: status}))
	}
	finish("list-b", ledger.DeliveryDead)
	finish("list-c", ledger.DeliveryDelivered)
	ids := func(f ledger.DeliveryFilter) string {
		t.Helper()
		var out []string
		for _, q := range must(e.l.Queue().ListDeliveries(e.ctx, f)) {
			out = append(out, q.EventID+"="+string(q.Status))
		}
		return fmt.Sprint(out)
	}
	if got := ids(ledger.DeliveryFilter{}); got != "[waiting=queued dead=dead delivered=delivered]" {
		t.Fatalf("every status, through the received index: %s", got)
	}
	if got := ids(ledger.DeliveryFilter{Status: ledger.DeliveryDead}); got != "[dead=dead]" {
		t.Fatalf("dead: %s", got)
	}
	if got := ids(ledger.DeliveryFilter{Status: ledger.DeliveryQueued, Source: "other"}); got != "[]" {
		t.Fatalf("another source: %s", got)
	}
	if got := ids(ledger.DeliveryFilter{Since: start.Add(time.Second)}); got != "[dead=dead delivered=delivered]" {
		t.Fatalf("since: %s", got)
	}
	if got := ids(ledger.DeliveryFilter{Scope: "list-c"}); got != "[delivered=delivered]" {
		t.Fatalf("by scope: %s", got)
	}
	if got := ids(ledger.DeliveryFilter{Status: ledger.DeliveryDelivered}); got != "[delivered=delivered]" {
		t.Fatalf("delivered without a scope: %s", got)
	}
	if q := must(e.l.Queue().FindDelivery(e.ctx, "list-b", "src", "dead")); q.Status != ledger.DeliveryDead {
		t.Fatalf("find: %+v", q)
	}
	// Dead letters need an operator, not a reconciler: none is ambiguous.
	if amb := must(e.l.Views().Ambiguous(e.ctx, 10)); len(amb) != 0 {
		t.Fatalf("dead letters listed as ambiguous: %+v", amb)
	}
	must(e.l.Queue().ReplayDelivery(e.ctx, "list-b", must(e.l.Queue().FindDelivery(e.ctx, "list-b", "src", "dead")).EntryID))
	if got := ids(ledger.DeliveryFilter{Status: ledger.DeliveryDead}); got != "[]" {
		t.Fatalf("dead after replay: %s", got)
	}

	other := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	noErr(t, e.l.Sources().SetSourcePaused(e.ctx, "src", true))
	noErr(t, e.l.Sources().SetSourcePaused(e.ctx, "gh", true))
	if p := must(other.Sources().PausedSources(e.ctx)); !p["src"] || !p["gh"] || len(p) != 2 {
		t.Fatalf("paused, as another process sees it: %v", p)
	}
	noErr(t, other.Sources().SetSourcePaused(e.ctx, "src", false))
	if p := must(e.l.Sources().PausedSources(e.ctx)); p["src"] || !p["gh"] {
		t.Fatalf("after resume: %v", p)
	}
}

// testTrialChangesNothingButItsRecord: a trial (the event sent to another
// URL) of a dead delivery, and of one in flight, is listed among the
// item's attempts in time order with where it went, and leaves the item's
// status, schedule, attempts and the in-flight delivery's finish as they
// were; its record goes with the item at retention. An inline item and an
// unknown one take no trial.
func testTrialChangesNothingButItsRecord(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: 24 * time.Hour})
	enqueue(t, e, "trial", "ev", false)
	q := must(e.l.Queue().QueueItems(e.ctx, "trial"))[0]
	tk := must(e.l.Queue().TakeDelivery(e.ctx, "trial", q.EntryID, testLease))
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDead, Record: ledger.AttemptRecord{Error: "gave up"}}))
	before := must(e.l.Queue().QueueItems(e.ctx, "trial"))[0]
	e.clock.Advance(time.Minute)
	rec := must(e.l.Queue().RecordTrial(e.ctx, "trial", q.EntryID, ledger.AttemptRecord{To: "http://staging.test/events", Outcome: "delivered", AgentStatus: 200}))
	if rec.N != 1 || !rec.At.Equal(e.clock.Now()) {
		t.Fatalf("trial record %+v, want the first, at now", rec)
	}
	after := must(e.l.Queue().QueueItems(e.ctx, "trial"))[0]
	if after.Status != before.Status || after.Attempts != before.Attempts || after.Failures != before.Failures || !after.NextAt.Equal(before.NextAt) || after.Trials != 1 {
		t.Fatalf("a trial changed the item: before %+v, after %+v", before, after)
	}
	if due := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})); len(due) != 0 {
		t.Fatalf("a trial made a dead delivery due: %+v", due)
	}
	// Replayed and in flight: a trial now does not make its finish late.
	e.clock.Advance(time.Second)
	must(e.l.Queue().ReplayDelivery(e.ctx, "trial", q.EntryID))
	tk2 := must(e.l.Queue().TakeDelivery(e.ctx, "trial", q.EntryID, testLease))
	takenAt := e.clock.Now() // the attempt's time is its start, as the dispatcher records it
	e.clock.Advance(time.Second)
	must(e.l.Queue().RecordTrial(e.ctx, "trial", q.EntryID, ledger.AttemptRecord{To: "http://staging.test/events", Outcome: "retry", AgentStatus: 500}))
	res := must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk2, Status: ledger.DeliveryDelivered, Record: ledger.AttemptRecord{At: takenAt}}))
	if res.LateSettle {
		t.Fatal("a trial during a delivery made its finish late")
	}
	item := must(e.l.Queue().QueueItems(e.ctx, "trial"))[0]
	if item.Status != ledger.DeliveryDelivered {
		t.Fatalf("item %+v, want delivered", item)
	}
	atts := must(e.l.Queue().AttemptsOf(e.ctx, item))
	var got []string
	for _, a := range atts {
		got = append(got, fmt.Sprintf("%d:%d:%s", a.N, a.AgentStatus, a.To))
	}
	want := "1:0: 1:200:http://staging.test/events 2:0: 2:500:http://staging.test/events"
	if strings.Join(got, " ") != want {
		t.Fatalf("attempts %q, want %q", strings.Join(got, " "), want)
	}
	if _, err := e.l.Queue().RecordTrial(e.ctx, "trial", q.EntryID, ledger.AttemptRecord{To: "ftp://x"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("a trial to ftp://x: %v, want invalid", err)
	}
	if _, err := e.l.Queue().RecordTrial(e.ctx, "trial", "nope", ledger.AttemptRecord{To: "http://staging.test/"}); !errors.Is(err, ledger.ErrUnknownEntry) {
		t.Fatalf("a trial of an unknown entry: %v", err)
	}
	// Retention: the trial records go with the item.
	e.clock.Advance(24*time.Hour + time.Second)
	enqueue(t, e, "trial", "other", false) // any write prunes
	if b := must(e.store.ReadBlob(e.ctx, "trial", "t:"+q.Blob+":1")); b != nil {
		t.Fatal("a pruned delivery's trial record is still stored")
	}
}

// testAbsentRecords: a write that took side records as absent (Write.Absent)
// lands only if none of them exists beside the document it was decided on;
// otherwise nothing is written and Transact hands over those that exist.
//
// A store that does not implement ledger.AbsenceChecker (bolt: a read
// before the decision costs it no round trip, and a refused write would
// cost it a commit) never gets such a write: the ledger reads the records
// first, which the rest of the suite covers.
func testAbsentRecords(t *testing.T, newStore NewStore) {
	s := newStore(t)
	if !ledger.ChecksAbsent(s) {
		t.Logf("%T reads records before deciding: Write.Absent is not its contract", s)
		return
	}
	ctx := context.Background()
	scope := "absent"
	write := func(doc string, absent []string, blobs map[string][]byte, ttl time.Duration) error {
		t.Helper()
		return s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(doc), TTL: ttl, Blobs: blobs, Absent: absent}, nil
		})
	}
	present := func(err error, want map[string]string) {
		t.Helper()
		var p *ledger.PresentError
		if !errors.As(err, &p) {
			t.Fatalf("write that took existing records as absent: %v, want a PresentError", err)
		}
		got := map[string]string{}
		for n, b := range p.Blobs {
			got[n] = string(b)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("PresentError holds %v, want %v", got, want)
		}
	}
	noErr(t, write(`{"n":1}`, []string{"a", "b"}, map[string][]byte{"a": []byte("A"), "c": []byte("C")}, time.Hour))
	present(write(`{"n":2}`, []string{"b", "a", "c", "d"}, map[string][]byte{"b": []byte("B")}, time.Hour),
		map[string]string{"a": "A", "c": "C"})
	assertJSON(t, must(s.Read(ctx, scope)), `{"n":1}`)
	if got := must(s.ReadBlob(ctx, scope, "b")); got != nil {
		t.Fatalf("a refused write stored blob %q", got)
	}
	noErr(t, write(`{"n":3}`, []string{"b", "d"}, map[string][]byte{"b": []byte("B"), "a": nil}, time.Hour))
	present(write(`{"n":4}`, []string{"b"}, nil, time.Hour), map[string]string{"b": "B"})
	noErr(t, write(`{"n":5}`, []string{"a"}, nil, time.Hour)) // deleted by the write before
	many := []string{"m1", "m2", "m3", "m4", "m5", "b", "m6"}
	present(write(`{"n":6}`, many, nil, time.Hour), map[string]string{"b": "B"})
	present(write(`{"n":6}`, many, map[string][]byte{"m7": []byte("7")}, time.Hour), map[string]string{"b": "B"})
	noErr(t, write(`{"n":6}`, many[:5], map[string][]byte{"m7": []byte("7")}, time.Hour))
	if got := must(s.ReadBlob(ctx, scope, "m7")); string(got) != "7" {
		t.Fatalf("a write whose absent records were absent stored blob m7 as %q", got)
	}
	assertJSON(t, must(s.Read(ctx, scope)), `{"n":6}`)
	// Records of a document that expired went with it.
	noErr(t, write(`{"n":7}`, nil, nil, time.Millisecond))
	time.Sleep(20 * time.Millisecond)
	noErr(t, write(`{"n":8}`, []string{"b", "c"}, nil, time.Hour))
	assertJSON(t, must(s.Read(ctx, scope)), `{"n":8}`)
}
