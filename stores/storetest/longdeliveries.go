package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// longDeliveries is how many events the long-delivery case delivers on one
// scope: enough that the ledger moves most finished ones out of the
// document (issue #34), whatever its threshold, as long as it keeps fewer.
const longDeliveries = 200

// jsonOf is v as JSON, to compare items and records field by field.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testLongScopeDeliveries: a conversation of many deliveries, queued and
// inline, answers about each of them as it did when it was new, however
// many came after it: a duplicate enqueue answers with its item, the lists
// (QueueItems, FindDelivery, Conversation, ConversationPage,
// RecentDeliveries and ListDeliveries with filters and cursors) show every
// item as it was, a replay and a trial of an old one work (and a process
// remembering committed claims does not answer the replayed one from
// memory), dead and rejected ones stay listed for an operator, and
// retention takes them all out, blobs included. The document meanwhile
// stops holding the old ones.
func testLongScopeDeliveries(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: 24 * time.Hour})
	const scope = "long-deliveries"
	items := map[string]ledger.QueueItem{} // as found right after it finished
	attempts := map[string]string{}        // its AttemptsOf then
	var order []string
	keptBody := map[string]bool{}
	var hung ledger.Taken
	for i := range longDeliveries {
		ev := fmt.Sprintf("ev-%03d", i)
		if i%2 == 1 {
			// Forwarded inline; every other one keeps its body.
			keptBody[ev] = i%4 == 1
			c := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: queueKey(scope, ev), Conflict: ledger.ConflictNone,
				PendingTTL: testLease, Redeliverable: true}))
			must(e.l.SettleInline(e.ctx, c.Ref(), ledger.OutcomeCommitted, map[string]int{"n": i}, nil, ledger.InlineRecord{
				Event:    ledger.QueuedEvent{Source: "src", EventID: ev, Scope: scope, ReceivedAt: e.clock.Now(), Body: []byte(`{"inline":"` + ev + `"}`)},
				KeepBody: i%4 == 1, Status: ledger.DeliveryDelivered,
				Attempt: ledger.AttemptRecord{Outcome: "delivered", AgentStatus: 200, Answer: []byte("ok")}}))
		} else {
			q := enqueue(t, e, scope, ev, false)
			tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, q.Item.EntryID, testLease))
			if i == 2 {
				// Its dispatcher hangs past its lease; another one
				// takes it over and delivers it. The first settles late,
				// below, once the item has left the document.
				hung = tk
				e.clock.Advance(testLease + time.Second)
				tk = must(e.l.Queue().TakeDelivery(e.ctx, scope, q.Item.EntryID, testLease))
			}
			status := ledger.DeliveryDelivered
			switch i {
			case 10:
				status = ledger.DeliveryDead
			case 20:
				status = ledger.DeliveryRejected
			}
			must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: status, Value: map[string]int{"n": i},
				Record: ledger.AttemptRecord{Outcome: string(status), AgentStatus: 200, Answer: []byte("ok")}}))
		}
		q := must(e.l.Queue().FindDelivery(e.ctx, scope, "src", ev))
		items[ev], attempts[ev] = q, jsonOf(t, must(e.l.Queue().AttemptsOf(e.ctx, q)))
		order = append(order, ev)
		if i%2 == 1 {
			// Two by two at one time: the lists order them by entry id.
			e.clock.Advance(time.Second)
		}
	}
	// Another scope: one item whose deliver entry many effects after it
	// push out of the document, so that the scope holds no item in it.
	lone := enqueue(t, e, "long-effects", "lone", false).Item
	tk := must(e.l.Queue().TakeDelivery(e.ctx, "long-effects", lone.EntryID, testLease))
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}))
	lone = must(e.l.Queue().FindDelivery(e.ctx, "long-effects", "src", "lone"))
	e.clock.Advance(time.Second)
	fillScope(t, e, "long-effects", 40)

	raw := must(e.store.Read(e.ctx, scope))
	if bytes.Contains(raw, []byte(`"eventId":"ev-000"`)) || bytes.Contains(raw, []byte(`"eventId":"ev-001"`)) {
		t.Fatalf("the oldest deliveries are still in the %d-byte document", len(raw))
	}
	t.Logf("document of %d deliveries: %d bytes", longDeliveries, len(raw))

	// Every item, oldest received first, as it was.
	oldestFirst := func(a, b ledger.QueueItem) bool {
		if !a.ReceivedAt.Equal(b.ReceivedAt) {
			return a.ReceivedAt.Before(b.ReceivedAt)
		}
		return a.EntryID < b.EntryID
	}
	want := func(keep func(q ledger.QueueItem) bool) []ledger.QueueItem {
		var out []ledger.QueueItem
		for _, ev := range order {
			if keep == nil || keep(items[ev]) {
				out = append(out, items[ev])
			}
		}
		sort.Slice(out, func(i, j int) bool { return oldestFirst(out[i], out[j]) })
		return out
	}
	newestFirst := func(qs []ledger.QueueItem) []ledger.QueueItem {
		out := append([]ledger.QueueItem(nil), qs...)
		sort.Slice(out, func(i, j int) bool { return oldestFirst(out[j], out[i]) })
		return out
	}
	same := func(what string, got, want []ledger.QueueItem) {
		t.Helper()
		if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
			t.Fatalf("%s: %d items, want %d as they were\n got %.600s\nwant %.600s", what, len(got), len(want), g, w)
		}
	}
	same("QueueItems", must(e.l.Queue().QueueItems(e.ctx, scope)), want(nil))
	same("Conversation", must(e.l.Views().Conversation(e.ctx, scope)).Queue, want(nil))
	paged, _, _, pages := conversationPages(t, e, scope, 10)
	same("ConversationPage, every page", paged, want(nil))
	if pages < 2 {
		t.Fatalf("the conversation took %d page of 10 entries", pages)
	}
	for _, ev := range []string{"ev-000", "ev-001", "ev-002", "ev-010", "ev-020", "ev-101", "ev-199"} {
		q := must(e.l.Queue().FindDelivery(e.ctx, scope, "src", ev))
		same("FindDelivery "+ev, []ledger.QueueItem{q}, []ledger.QueueItem{items[ev]})
		if got := jsonOf(t, must(e.l.Queue().AttemptsOf(e.ctx, q))); got != attempts[ev] {
			t.Fatalf("attempts of %s: %s, want %s", ev, got, attempts[ev])
		}
		body := `{"id":"` + ev + `","text":"hello\nworld"}`
		if q.Inline {
			body = map[bool]string{true: `{"inline":"` + ev + `"}`, false: ""}[keptBody[ev]]
		}
		if ev := must(e.l.Queue().QueuedEventOf(e.ctx, q)); string(ev.Body) != body {
			t.Fatalf("event of %s: %q, want %q", q.EventID, ev.Body, body)
		}
	}

	// A duplicate of any of them answers with its item, nothing queued.
	for _, ev := range []string{"ev-000", "ev-001", "ev-050", "ev-199"} {
		d := enqueue(t, e, scope, ev, false)
		if d.Status != ledger.EnqueueDuplicate {
			t.Fatalf("enqueue of delivered %s again: %v", ev, d.Status)
		}
		same("duplicate "+ev, []ledger.QueueItem{d.Item}, []ledger.QueueItem{items[ev]})
	}

	// The operator's lists, through the received index, by filter and
	// cursor.
	enqueue(t, e, "long-other", "other", false)
	other := must(e.l.Queue().FindDelivery(e.ctx, "long-other", "src", "other"))
	walk := func(f ledger.DeliveryFilter, size int) []ledger.QueueItem {
		t.Helper()
		var out []ledger.QueueItem
		var after *ledger.DeliveryCursor
		for range 1000 {
			p := must(e.l.Views().RecentDeliveries(e.ctx, f, after, size))
			out = append(out, p.Items...)
			if p.Next == nil {
				return out
			}
			after = p.Next
		}
		t.Fatal("the walk does not end")
		return nil
	}
	all := append([]ledger.QueueItem{other, lone}, newestFirst(want(nil))...)
	same("RecentDeliveries by 7", walk(ledger.DeliveryFilter{}, 7), all)
	since := start.Add(25 * time.Second)
	delivered := func(q ledger.QueueItem) bool {
		return q.Status == ledger.DeliveryDelivered && !q.ReceivedAt.Before(since)
	}
	same("RecentDeliveries delivered since", walk(ledger.DeliveryFilter{Status: ledger.DeliveryDelivered, Since: since}, 5),
		append([]ledger.QueueItem{lone}, newestFirst(want(delivered))...))
	until := start.Add(75 * time.Second)
	same("ListDeliveries of the scope, delivered between",
		must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{Scope: scope, Status: ledger.DeliveryDelivered, Since: since, Until: until})),
		want(func(q ledger.QueueItem) bool { return delivered(q) && q.ReceivedAt.Before(until) }))
	same("ListDeliveries inline", must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{Scope: scope, EventID: "ev-003"})),
		[]ledger.QueueItem{items["ev-003"]})
	same("ListDeliveries dead", must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{Status: ledger.DeliveryDead})),
		[]ledger.QueueItem{items["ev-010"]})
	same("ListDeliveries rejected", must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{Status: ledger.DeliveryRejected})),
		[]ledger.QueueItem{items["ev-020"]})

	// A replay of an old delivery, then its delivery; a process that
	// remembers committed claims does not answer it from memory.
	cached := ledger.New(e.store, ledger.Options{Clock: e.clock.Now})
	old := items["ev-004"]
	if c := must(cached.Claim(e.ctx, ledger.ClaimRequest{Key: queueKey(scope, "ev-004"), Conflict: ledger.ConflictNone})); c.Status != ledger.StatusReplayed {
		t.Fatalf("claim of delivered ev-004: %v", c.Status)
	}
	r := must(e.l.Queue().ReplayDelivery(e.ctx, scope, old.EntryID))
	if r.Status != ledger.DeliveryQueued || r.Replays != 1 || r.Attempts != old.Attempts || r.EventID != "ev-004" {
		t.Fatalf("replayed: %+v", r)
	}
	tk = must(e.l.Queue().TakeDelivery(e.ctx, scope, old.EntryID, testLease))
	if !tk.OK || tk.Item.Attempts != old.Attempts+1 {
		t.Fatalf("take of the replayed delivery: %+v", tk)
	}
	if c := must(cached.Claim(e.ctx, ledger.ClaimRequest{Key: queueKey(scope, "ev-004"), Conflict: ledger.ConflictNone})); c.Status != ledger.StatusInFlight {
		t.Fatalf("claim of ev-004 while its replay is delivered: %v, want in_flight", c.Status)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered, Value: "again"}))
	if q := must(e.l.Queue().FindDelivery(e.ctx, scope, "src", "ev-004")); q.Status != ledger.DeliveryDelivered || q.Attempts != 2 || q.Replays != 1 {
		t.Fatalf("replayed delivery after its delivery: %+v", q)
	}
	if got := must(e.l.Queue().AttemptsOf(e.ctx, must(e.l.Queue().FindDelivery(e.ctx, scope, "src", "ev-004")))); len(got) != 2 {
		t.Fatalf("attempts of the replayed delivery: %d, want 2", len(got))
	}
	if _, err := e.l.Queue().ReplayDelivery(e.ctx, scope, items["ev-003"].EntryID); !errors.Is(err, ledger.ErrInline) {
		t.Fatalf("replay of an old inline delivery: %v", err)
	}

	// A trial of an old delivery is kept with it, and changes nothing else.
	trial := must(e.l.Queue().RecordTrial(e.ctx, scope, items["ev-006"].EntryID,
		ledger.AttemptRecord{To: "https://staging.example/hook", Outcome: "delivered", AgentStatus: 200}))
	if trial.N != 1 {
		t.Fatalf("trial numbered %d", trial.N)
	}
	q := must(e.l.Queue().FindDelivery(e.ctx, scope, "src", "ev-006"))
	if q.Trials != 1 {
		t.Fatalf("trials of ev-006: %d", q.Trials)
	}
	q.Trials = 0
	same("ev-006 after its trial", []ledger.QueueItem{q}, []ledger.QueueItem{items["ev-006"]})
	q.Trials = 1
	if got := must(e.l.Queue().AttemptsOf(e.ctx, q)); len(got) != 2 || got[1].To != "https://staging.example/hook" {
		t.Fatalf("attempts of ev-006 with its trial: %+v", got)
	}

	// The hung dispatcher of ev-002 settles at last: too late, and its
	// record is kept with the item.
	res := must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: hung, Status: ledger.DeliveryDelivered, Value: "late",
		Record: ledger.AttemptRecord{Outcome: "delivered", AgentStatus: 200}}))
	if !res.LateSettle {
		t.Fatalf("late settle of ev-002: %+v", res)
	}
	q = must(e.l.Queue().FindDelivery(e.ctx, scope, "src", "ev-002"))
	if q.Status != ledger.DeliveryDelivered || q.Attempts != 2 {
		t.Fatalf("ev-002 after its late settle: %+v", q)
	}
	if got := must(e.l.Queue().AttemptsOf(e.ctx, q)); len(got) != 2 || !got[0].Late || got[1].Late {
		t.Fatalf("attempts of ev-002 after its late settle: %+v", got)
	}
	if n := len(must(e.l.Queue().QueueItems(e.ctx, scope))); n != longDeliveries {
		t.Fatalf("after a replay and a trial the scope lists %d items, want %d", n, longDeliveries)
	}

	// Past retention (after a write), every one of them is gone, with the
	// blobs of its event, but the dead one: it waits its maximum age and
	// a retention for an operator.
	var blobbed ledger.QueueItem      // an old delivery whose event is a blob
	for _, ev := range order[20:60] { // none replayed or tried below
		if q := items[ev]; !q.Inline && q.Status == ledger.DeliveryDelivered && q.EventText == "" && q.Event == nil {
			blobbed = q
			break
		}
	}
	if blobbed.Blob == "" || must(e.store.ReadBlob(e.ctx, scope, "e:"+blobbed.Blob)) == nil {
		t.Fatalf("no old delivery kept its event as a blob: %+v", blobbed)
	}
	e.clock.Advance(25 * time.Hour)
	late := enqueue(t, e, scope, "late", false)
	same("QueueItems past retention", must(e.l.Queue().QueueItems(e.ctx, scope)), []ledger.QueueItem{items["ev-010"], late.Item})
	if _, err := e.l.Queue().FindDelivery(e.ctx, scope, "src", "ev-000"); !errors.Is(err, ledger.ErrUnknownEntry) {
		t.Fatalf("find of a delivery past retention: %v", err)
	}
	if b := must(e.store.ReadBlob(e.ctx, scope, "e:"+blobbed.Blob)); b != nil {
		t.Fatalf("the event blob of %s outlived retention", blobbed.EventID)
	}
	if d := enqueue(t, e, scope, "ev-000", false); d.Status != ledger.EnqueueQueued {
		t.Fatalf("enqueue of ev-000 past retention: %v", d.Status)
	}
}

// A page of the newest deliveries reads a few of a long conversation's
// spilled records, however many it holds: the chunks its items are in and
// the pages that list those chunks.
func testLongScopeDeliveryPageReads(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	const scope, n = "long-page", 3 * longDeliveries
	for i := range n {
		ev := fmt.Sprintf("ev-%03d", i)
		c := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: queueKey(scope, ev), Conflict: ledger.ConflictNone,
			PendingTTL: testLease, Redeliverable: true}))
		must(e.l.SettleInline(e.ctx, c.Ref(), ledger.OutcomeCommitted, "ok", nil, ledger.InlineRecord{
			Event:  ledger.QueuedEvent{Source: "src", EventID: ev, Scope: scope, ReceivedAt: e.clock.Now()},
			Status: ledger.DeliveryDelivered}))
		e.clock.Advance(time.Second)
	}
	cs := &watchStore{Store: e.store}
	l := ledger.New(cs, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	if got := len(must(l.Queue().QueueItems(e.ctx, scope))); got != n {
		t.Fatalf("QueueItems lists %d, want %d", got, n)
	}
	whole := cs.blobReads.Load()
	var after *ledger.DeliveryCursor
	seen := map[string]bool{}
	pages := 0
	for {
		cs.blobReads.Store(0)
		p := must(l.Views().RecentDeliveries(e.ctx, ledger.DeliveryFilter{}, after, 20))
		pages++
		if r := cs.blobReads.Load(); r > 6 || r*4 > whole {
			t.Fatalf("page %d read %d records; the whole list reads %d", pages, r, whole)
		}
		for _, q := range p.Items {
			if seen[q.EventID] {
				t.Fatalf("%s listed twice", q.EventID)
			}
			seen[q.EventID] = true
		}
		if p.Next == nil {
			break
		}
		after = p.Next
	}
	if len(seen) != n {
		t.Fatalf("the walk lists %d deliveries, want %d", len(seen), n)
	}

	// So does a page of the conversation: its entries, the deliveries of
	// its span of time and their runs.
	cs.blobReads.Store(0)
	must(l.Views().Conversation(e.ctx, scope))
	whole = cs.blobReads.Load()
	q := ledger.HistoryQuery{Scope: scope, Limit: 20}
	listed := 0
	for pages = 1; ; pages++ {
		cs.blobReads.Store(0)
		c, next := must2(l.Views().ConversationPage(e.ctx, q))
		if r := cs.blobReads.Load(); r > 12 || r*4 > whole {
			t.Fatalf("conversation page %d read %d records; the whole conversation reads %d", pages, r, whole)
		}
		listed += len(c.Queue)
		if next == "" {
			break
		}
		q.Before = next
	}
	if listed != n {
		t.Fatalf("the conversation's pages list %d deliveries, want %d", listed, n)
	}
}
