package storetest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// longWaiting is how many events wait behind a hung agent in the
// long-waiting case: more than a scope document should have to hold
// (issue #34), whatever layout the ledger keeps them in.
const longWaiting = 100

// testLongWaitingQueue: under order: scope, an agent hangs on one event
// while many more arrive on its conversation, some with a context older
// than events received before them. Whatever the ledger does with a long
// queue, every answer stays what it is for a short one: each accept says
// how deep the scope is, a redelivery of any waiting event is a duplicate
// answered with its item, every list shows every waiting event, nothing
// of the scope is due while the head is in flight, the head's agent may
// still write, and once it answers the events go out one at a time, each
// once, in context order (receipt, then entry id, on ties), with several
// dispatchers racing for them and an older event arriving in the middle
// going next.
func testLongWaitingQueue(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	const scope = "long-waiting"
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	ev := func(id string, contextAt time.Time, hold bool) convEvent {
		return convEvent{scope: scope, id: id, contextAt: contextAt, order: ledger.OrderScope, hold: hold}
	}
	head := enqueueConv(t, e, ev("w-head", at(0), true))
	if head.Run == nil || !head.Claim.Acquired() {
		t.Fatalf("the first event of an idle scope was not handed over: %+v", head)
	}
	headTaken := ledger.Taken{OK: true, Item: head.Item, Run: head.Run, Claim: head.Claim}
	events := map[string]convEvent{"w-head": ev("w-head", at(0), true)}
	var ids []string
	for i := range longWaiting {
		e.clock.Advance(10 * time.Millisecond)
		id := fmt.Sprintf("w-%03d", i)
		c := at(i + 1)
		switch {
		case i%10 == 9:
			// Late news: a context older than the five received before.
			c = at(i - 4).Add(500 * time.Millisecond)
		case i%25 == 24:
			// The same context as the one before it: receipt decides.
			c = at(i)
		}
		events[id] = ev(id, c, true)
		got := enqueueConv(t, e, events[id])
		if got.Status != ledger.EnqueueQueued || got.Run != nil || got.Claim.Acquired() {
			t.Fatalf("%s behind a delivery in flight: %+v", id, got)
		}
		if got.Depth != i+2 {
			t.Fatalf("depth after %s: %d, want %d", id, got.Depth, i+2)
		}
		ids = append(ids, id)
	}
	// The case exists to run the long-queue layout on every store: past
	// a few dozen waiting events the document lists pages of parked
	// chunks ("wp:{n}" records). Were the sizes raised so far that it
	// lists none, this case would stop testing them; fail instead.
	raw := must(e.store.Read(e.ctx, scope))
	t.Logf("document with %d events waiting: %d bytes", longWaiting, len(raw))
	// On a store that checks Write.Absent the listings name their
	// events by marker records, not hashes: the store's check of them
	// is what keeps a redelivery of a parked event a duplicate.
	var doc struct {
		Waits []waitListing
	}
	doc.Waits = waitListings(t, raw)
	pages := 0
	for _, w := range doc.Waits {
		if checks := ledger.ChecksAbsent(e.store); w.Marked != checks || (w.Entries == "") != checks {
			t.Fatalf("a listing marked %v with hashes %q, on a store that checks Write.Absent: %v", w.Marked, w.Entries, checks)
		}
		if w.Page > 0 {
			pages++
			if b := must(e.store.ReadBlob(e.ctx, scope, fmt.Sprintf("wp:%d", w.N))); b == nil {
				t.Fatalf("the document lists page %d of parked chunks, and the store holds no record wp:%d", w.N, w.N)
			}
		}
	}
	if pages == 0 {
		t.Fatalf("%d events waiting and the document lists no page of parked chunks (%d listings): the case no longer tests pages", longWaiting, len(doc.Waits))
	}

	items := map[string]ledger.QueueItem{}
	for id := range events {
		items[id] = itemOf(t, e, scope, id)
	}
	sameItems := func(what string, got []ledger.QueueItem, want []ledger.QueueItem) {
		t.Helper()
		if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
			t.Fatalf("%s: %d items, want %d as they were\n got %.600s\nwant %.600s", what, len(got), len(want), g, w)
		}
	}
	oldestFirst := func(a, b ledger.QueueItem) bool {
		if !a.ReceivedAt.Equal(b.ReceivedAt) {
			return a.ReceivedAt.Before(b.ReceivedAt)
		}
		return a.EntryID < b.EntryID
	}
	listed := func(keep func(ledger.QueueItem) bool, less func(a, b ledger.QueueItem) bool) []ledger.QueueItem {
		var out []ledger.QueueItem
		for _, q := range items {
			if keep == nil || keep(q) {
				out = append(out, q)
			}
		}
		sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
		return out
	}
	all := listed(nil, oldestFirst)
	sameItems("QueueItems", must(e.l.Queue().QueueItems(e.ctx, scope)), all)
	sameItems("Conversation", must(e.l.Views().Conversation(e.ctx, scope)).Queue, all)
	paged, _, _, _ := conversationPages(t, e, scope, 10)
	sameItems("ConversationPage, every page", paged, all)
	waiting := func(q ledger.QueueItem) bool { return q.Status == ledger.DeliveryQueued }
	sameItems("ListDeliveries queued", must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{Scope: scope, Status: ledger.DeliveryQueued})),
		listed(waiting, oldestFirst))
	var walked []ledger.QueueItem
	var after *ledger.DeliveryCursor
	for range 1000 {
		p := must(e.l.Views().RecentDeliveries(e.ctx, ledger.DeliveryFilter{}, after, 7))
		walked = append(walked, p.Items...)
		if after = p.Next; after == nil {
			break
		}
	}
	sameItems("RecentDeliveries by 7", walked, listed(nil, func(a, b ledger.QueueItem) bool { return oldestFirst(b, a) }))
	for _, id := range []string{"w-000", "w-009", "w-024", "w-075", ids[len(ids)-1]} {
		if got := must(e.l.Queue().QueuedEventOf(e.ctx, items[id])); string(got.Body) != id {
			t.Fatalf("event of %s: %q", id, got.Body)
		}
		d := enqueueConv(t, e, events[id])
		if d.Status != ledger.EnqueueDuplicate {
			t.Fatalf("redelivery of waiting %s: %v", id, d.Status)
		}
		sameItems("duplicate "+id, []ledger.QueueItem{d.Item}, []ledger.QueueItem{items[id]})
	}
	if got := dueIDs(t, e); got != "" {
		t.Fatalf("due while the head is in flight: %q", got)
	}
	if n := must(e.l.Queue().CountDue(e.ctx)); n != 0 {
		t.Fatalf("scopes due while the head is in flight: %d", n)
	}

	// The hung agent comes back: it writes, then answers.
	c := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: "w-head"},
		RunID: head.Run.ID, Token: head.Run.Token, Conflict: ledger.ConflictAny}))
	if !c.Acquired() {
		t.Fatalf("the head's agent may not write while events wait: %v %v", c.Status, c.Reason)
	}
	must(e.l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, "sent", nil))
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: headTaken, Status: ledger.DeliveryDelivered}))

	want := listed(waiting, func(a, b ledger.QueueItem) bool {
		if !a.ContextAt.Equal(b.ContextAt) {
			return a.ContextAt.Before(b.ContextAt)
		}
		return oldestFirst(a, b)
	})
	var order []string
	deliverNext := func(l *ledger.Ledger) bool {
		t.Helper()
		due := must(l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10}))
		if len(due) > 1 {
			t.Errorf("%d due on one ordered scope", len(due))
			return false
		}
		if len(due) == 0 {
			return false
		}
		tk := must(l.Queue().TakeDelivery(e.ctx, scope, due[0].EntryID, testLease))
		if tk.OK {
			order = append(order, tk.Item.EventID)
			must(l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}))
		}
		return true
	}
	for range 20 {
		if !deliverNext(e.l) {
			t.Fatalf("nothing due after %v", order)
		}
	}
	// An event older than every one still waiting: it goes next.
	e.clock.Advance(10 * time.Millisecond)
	older := ev("w-older", at(0).Add(time.Millisecond), false)
	if got := enqueueConv(t, e, older); got.Status != ledger.EnqueueQueued || got.Depth != longWaiting-20+1 {
		t.Fatalf("the older event: %v, depth %d", got.Status, got.Depth)
	}
	if got := dueIDs(t, e); got != "w-older" {
		t.Fatalf("due after the older event arrived: %q", got)
	}
	rest := []string{"w-older"}
	for _, q := range want[20:] {
		rest = append(rest, q.EventID)
	}

	// The rest, with several dispatchers (processes) racing for them.
	var mu sync.Mutex
	racers := make([]*ledger.Ledger, 4)
	for i := range racers {
		racers[i] = ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	}
	var raced []string
	var wg sync.WaitGroup
	for _, l := range racers {
		wg.Go(func() {
			// The wall clock only ends a case that would hang.
			for began := time.Now(); ; {
				mu.Lock()
				done := len(raced) == len(rest)
				mu.Unlock()
				if done {
					return
				}
				if time.Since(began) > 2*time.Minute {
					t.Errorf("the drain stopped after %v", raced)
					return
				}
				due, err := l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})
				if err != nil {
					t.Errorf("due: %v", err)
					return
				}
				if len(due) == 0 {
					continue
				}
				if len(due) > 1 {
					t.Errorf("%d due on one ordered scope", len(due))
					return
				}
				tk, err := l.Queue().TakeDelivery(e.ctx, scope, due[0].EntryID, testLease)
				if err != nil {
					t.Errorf("take: %v", err)
					return
				}
				if !tk.OK {
					continue
				}
				mu.Lock()
				raced = append(raced, tk.Item.EventID)
				mu.Unlock()
				if _, err := l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}); err != nil {
					t.Errorf("finish: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var first []string
	for _, q := range want[:20] {
		first = append(first, q.EventID)
	}
	if got, w := strings.Join(order, " "), strings.Join(first, " "); got != w {
		t.Fatalf("delivered first\n got %s\nwant %s", got, w)
	}
	if got, w := strings.Join(raced, " "), strings.Join(rest, " "); got != w {
		t.Fatalf("delivered by the racing dispatchers\n got %s\nwant %s", got, w)
	}
	delivered := must(e.l.Queue().QueueItems(e.ctx, scope))
	if len(delivered) != longWaiting+2 {
		t.Fatalf("the scope lists %d deliveries, want %d", len(delivered), longWaiting+2)
	}
	for _, q := range delivered {
		if q.Status != ledger.DeliveryDelivered || q.Attempts != 1 {
			t.Fatalf("%s after the drain: %s, %d attempts", q.EventID, q.Status, q.Attempts)
		}
	}
}

// testLongWaitingQueueOperations: what operators and agents do to single
// events of a long queue behind a hung agent reaches those events wherever
// the ledger keeps them: the head's run keeps its lease, a trial and a
// replay of a waiting event are recorded with it, a run cancelled by hand
// is never delivered, a newer supersede-mode event supersedes none of the
// independent ones, and the drain afterwards goes in context order with
// all of it kept.
func testLongWaitingQueueOperations(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	const scope = "long-waiting-ops"
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	head := enqueueConv(t, e, convEvent{scope: scope, id: "w-head", contextAt: at(0), order: ledger.OrderScope, hold: true})
	if head.Run == nil {
		t.Fatalf("the head was not handed over: %+v", head)
	}
	var ids []string
	for i := range longWaiting {
		e.clock.Advance(10 * time.Millisecond)
		id := fmt.Sprintf("w-%03d", i)
		enqueueConv(t, e, convEvent{scope: scope, id: id, contextAt: at(i + 1), order: ledger.OrderScope})
		ids = append(ids, id)
	}
	if ok := must(e.l.Heartbeat(e.ctx, scope, head.Run.ID, head.Run.Token)); !ok {
		t.Fatal("the head's run lost its lease to a heartbeat")
	}
	trialOf, replayOf, cancelled := ids[60], ids[70], ids[80]
	trial := must(e.l.Queue().RecordTrial(e.ctx, scope, itemOf(t, e, scope, trialOf).EntryID,
		ledger.AttemptRecord{To: "https://staging.example/hook", Outcome: "delivered", AgentStatus: 200}))
	if trial.N != 1 {
		t.Fatalf("trial of waiting %s numbered %d", trialOf, trial.N)
	}
	if q := itemOf(t, e, scope, trialOf); q.Trials != 1 || q.Status != ledger.DeliveryQueued {
		t.Fatalf("%s after its trial: %s, %d trials", trialOf, q.Status, q.Trials)
	}
	if r := must(e.l.Queue().ReplayDelivery(e.ctx, scope, itemOf(t, e, scope, replayOf).EntryID)); r.Replays != 1 || r.Status != ledger.DeliveryQueued {
		t.Fatalf("replay of waiting %s: %+v", replayOf, r)
	}
	if err := e.l.Cancel(e.ctx, scope, "src:"+cancelled); err != nil {
		t.Fatalf("cancel of a waiting event's run: %v", err)
	}
	newest := enqueueConv(t, e, convEvent{scope: scope, id: "w-newest", contextAt: at(longWaiting + 1), order: ledger.OrderScope,
		mode: ledger.ModeSupersede})
	if newest.Status != ledger.EnqueueQueued || len(newest.Superseded) != 0 || newest.Depth != longWaiting+2 {
		t.Fatalf("a supersede-mode event behind independent ones: %v, superseded %d, depth %d", newest.Status, len(newest.Superseded), newest.Depth)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: ledger.Taken{OK: true, Item: head.Item, Run: head.Run, Claim: head.Claim},
		Status: ledger.DeliveryDelivered}))

	var delivered []string
	for range 3 * longWaiting {
		due := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10}))
		if len(due) == 0 {
			break
		}
		if len(due) > 1 {
			t.Fatalf("%d due on one ordered scope", len(due))
		}
		tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, due[0].EntryID, testLease))
		if !tk.OK {
			continue
		}
		delivered = append(delivered, tk.Item.EventID)
		must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}))
	}
	var want []string
	for _, id := range ids {
		if id != cancelled {
			want = append(want, id)
		}
	}
	want = append(want, "w-newest")
	if got, w := strings.Join(delivered, " "), strings.Join(want, " "); got != w {
		t.Fatalf("delivered\n got %s\nwant %s", got, w)
	}
	if q := itemOf(t, e, scope, cancelled); q.Status != ledger.DeliveryDead {
		t.Fatalf("the event of the cancelled run: %s, want dead", q.Status)
	}
	q := itemOf(t, e, scope, trialOf)
	if got := must(e.l.Queue().AttemptsOf(e.ctx, q)); q.Status != ledger.DeliveryDelivered || len(got) != 2 || got[0].To != "" || got[1].To != "https://staging.example/hook" {
		t.Fatalf("%s after the drain: %s, attempts %+v", trialOf, q.Status, got)
	}
	if q := itemOf(t, e, scope, replayOf); q.Status != ledger.DeliveryDelivered || q.Replays != 1 || q.Attempts != 1 {
		t.Fatalf("%s after the drain: %s, %d replays, %d attempts", replayOf, q.Status, q.Replays, q.Attempts)
	}
}

// waitListing is what a case reads of a parked chunk listing.
type waitListing struct {
	N       uint64 `json:"n"`
	Page    int    `json:"p"`
	Marked  bool   `json:"k"`
	Entries string `json:"e"`
}

// waitListings reads the parked chunk listings of the document raw, in
// either form: objects, or ten numbers a listing (n, count, four times,
// embedded, page, marked, level), which carry no hashes.
func waitListings(t *testing.T, raw []byte) []waitListing {
	t.Helper()
	var objects struct {
		Waits []waitListing `json:"waits"`
	}
	if err := json.Unmarshal(raw, &objects); err == nil {
		return objects.Waits
	}
	var flat struct {
		Waits []int64 `json:"waits"`
	}
	if err := json.Unmarshal(raw, &flat); err != nil {
		t.Fatalf("the document's parked listings are in neither form: %v", err)
	}
	if len(flat.Waits)%10 != 0 {
		t.Fatalf("the document lists %d numbers for its parked chunks, not 10 each", len(flat.Waits))
	}
	var out []waitListing
	for v := flat.Waits; len(v) > 0; v = v[10:] {
		out = append(out, waitListing{N: uint64(v[0]), Page: int(v[7]), Marked: v[8] != 0})
	}
	return out
}
