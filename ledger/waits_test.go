package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// TestParkedWaitingDecidesAsBefore runs one random history of a
// conversation under order: scope twice, on a ledger that parks its
// waiting events (waits.go) and spills its runs (spillruns.go) and on one
// that keeps both in the document as before, and requires every answer, list and count to be the same at
// every step: enqueues (new events in and out of order, ties, redeliveries
// of waiting and finished ones, supersede-mode and debounced ones, runs
// begun again and written under with a stale token),
// dispatchers taking and finishing what is due (delivered, failed again,
// dead, rejected), leases running out, runs heartbeated, cancelled and
// ended by hand, dead events replayed, and time passing retention. Long
// stretches behind a held head let hundreds of events wait, so chunks are
// written, read back and dropped. It fails on any answer that parking
// changes. Under -race, one history (the others are the same code paths
// again, ten times slower).
func TestParkedWaitingDecidesAsBefore(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if raceDetector {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { parkedDifferential(t, seed, 1500, 6*time.Hour, false) })
	}
}

// TestSpilledRunsDecideAsBefore is the same comparison with a retention
// long enough that hundreds of finished events, their entries and their
// runs leave the document (spill.go, spillruns.go), so that beginning,
// heartbeating, ending, cancelling and writing under a spilled run, and
// taking a replayed event whose run spilled, are all compared with a
// ledger that kept them.
func TestSpilledRunsDecideAsBefore(t *testing.T) {
	seeds, steps := []uint64{5, 6, 7}, 3000
	if raceDetector {
		seeds, steps = seeds[:1], 2000
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { parkedDifferential(t, seed, steps, 36*time.Hour, true) })
	}
}

// readsFirst is a store that does not check Write.Absent (only Store's
// methods are promoted from the field).
type readsFirst struct{ ledger.Store }

type parkedTwin struct {
	name string
	l    *ledger.Ledger
	st   *memory.Store
	held []ledger.Taken // taken and not finished yet
}

// parkedDifferential runs the history of seed; wantRuns requires that runs
// spilled in it.
func parkedDifferential(t *testing.T, seed uint64, steps int, retention time.Duration, wantRuns bool) {
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	opts := ledger.Options{Clock: clock, Retention: retention, ReplayCache: -1}
	parked := &parkedTwin{name: "parked", st: memory.New(clock)}
	parked.l = ledger.New(parked.st, opts)
	kept := &parkedTwin{name: "kept", st: memory.New(clock)}
	// The twin that keeps everything in its document also reads spilled
	// records before it decides, as for a store that does not check
	// Write.Absent: the other decides as if they were absent and learns
	// otherwise from its write.
	kept.l = ledger.New(readsFirst{kept.st}, opts)
	ledger.KeepWaitingInDocument(kept.l)
	// A second parking ledger on a store that does not check
	// Write.Absent: its chunks list hashes of their ids instead of
	// marker records.
	hashed := &parkedTwin{name: "hashed", st: memory.New(clock)}
	hashed.l = ledger.New(readsFirst{hashed.st}, opts)
	twins := []*parkedTwin{parked, hashed, kept}

	const scope = "conv"
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	key := func(ev string) ledger.Key {
		return ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "src", "eventId": ev}}
	}
	type sent struct {
		id      string
		context time.Time
		mode    ledger.Mode
		deb     ledger.Debounce
		maxAge  time.Duration
	}
	var events []sent
	lastCtx := now
	sawParked, sawRuns, sawPages, sawMarked := 0, 0, 0, 0

	// same runs op on both twins and fails unless their answers match.
	same := func(step int, what string, op func(tw *parkedTwin) (any, error)) {
		t.Helper()
		var want string
		for i, tw := range twins {
			v, err := op(tw)
			got := normalizeParked(t, v, err)
			if i == 0 {
				want = got
				continue
			}
			if got != want {
				at := 0
				for at < len(got) && at < len(want) && got[at] == want[at] {
					at++
				}
				from := max(0, at-700)
				t.Fatalf("step %d, %s: the ledgers answer differently from byte %d\nparked …%.900s\nkept   …%.900s", step, what, at, want[from:], got[from:])
			}
		}
	}
	enqueue := func(tw *parkedTwin, ev sent, hold bool) (ledger.Enqueued, error) {
		return tw.l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "src", EventID: ev.id, Scope: scope, ReceivedAt: now, ContextAt: ev.context, Body: []byte(ev.id)},
			Run:   ledger.RunOptions{RunID: "src:" + ev.id, Mode: ev.mode, ContextAt: ev.context},
			Claim: ledger.ClaimRequest{Key: key(ev.id), Conflict: ledger.ConflictNone, PendingTTL: 30 * time.Second},
			Hold:  hold, MaxAge: ev.maxAge, Order: ledger.OrderScope, Debounce: ev.deb,
		})
	}

	for step := range steps {
		// Phases: let a queue build behind a held head, then drain;
		// long enough that chunk listings fold into pages.
		filling := (step/500)%2 == 0
		if wantRuns {
			// Mostly draining: events finish and leave.
			filling = (step/300)%4 == 0
		}
		r := rng.IntN(100)
		switch {
		case r < 40 && filling || r < 15:
			// A new event, mostly newer than the last.
			ev := sent{id: fmt.Sprintf("e%05d", len(events)), mode: ledger.ModeIndependent, maxAge: 24 * time.Hour}
			lastCtx = lastCtx.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
			ev.context = lastCtx
			switch x := rng.IntN(100); {
			case x < 12:
				ev.context = lastCtx.Add(-time.Duration(rng.IntN(60)) * time.Second) // late news
			case x < 16 && len(events) > 0:
				ev.context = events[len(events)-1].context // a tie: receipt decides
			case x < 19:
				ev.mode = ledger.ModeSupersede
			case x < 21:
				ev.deb = ledger.Debounce{Quiet: 2 * time.Second}
			case x < 25:
				ev.maxAge = time.Hour
			}
			events = append(events, ev)
			hold := rng.IntN(3) == 0
			same(step, "enqueue "+ev.id, func(tw *parkedTwin) (any, error) {
				got, err := enqueue(tw, ev, hold)
				if err == nil && got.Run != nil {
					tw.held = append(tw.held, ledger.Taken{OK: true, Item: got.Item, Run: got.Run, Claim: got.Claim})
				}
				return got, err
			})
		case r < 45 && len(events) > 0:
			ev := events[rng.IntN(len(events))]
			same(step, "redelivery of "+ev.id, func(tw *parkedTwin) (any, error) { return enqueue(tw, ev, false) })
		case r < 70:
			// A dispatcher takes the first due event.
			same(step, "due and take", func(tw *parkedTwin) (any, error) {
				due, err := tw.l.Queue().Due(ctx, ledger.DueQuery{Limit: 10})
				if err != nil || len(due) == 0 {
					return due, err
				}
				tk, err := tw.l.Queue().TakeDelivery(ctx, scope, due[0].EntryID, 30*time.Second)
				if err == nil && tk.OK {
					tw.held = append(tw.held, tk)
				}
				return []any{due, tk}, err
			})
		case r < 85:
			// The oldest delivery held ends.
			status := []ledger.DeliveryStatus{ledger.DeliveryDelivered, ledger.DeliveryDelivered, ledger.DeliveryQueued,
				ledger.DeliveryDead, ledger.DeliveryRejected}[rng.IntN(5)]
			if wantRuns && rng.IntN(3) != 0 {
				status = ledger.DeliveryDelivered
			}
			if filling && rng.IntN(4) != 0 {
				break // the agent hangs
			}
			same(step, "finish "+string(status), func(tw *parkedTwin) (any, error) {
				if len(tw.held) == 0 {
					return nil, nil
				}
				tk := tw.held[0]
				tw.held = tw.held[1:]
				return tw.l.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: status, NextAt: now.Add(time.Second),
					Record: ledger.AttemptRecord{AgentStatus: 200}})
			})
		case r < 87:
			// The agent of the oldest delivery held writes an effect
			// under its run, and settles it.
			n := step
			same(step, "agent claim and settle", func(tw *parkedTwin) (any, error) {
				if len(tw.held) == 0 {
					return nil, nil
				}
				tk := tw.held[0]
				c, err := tw.l.Claim(ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply",
					Payload: map[string]any{"to": tk.Item.EventID, "n": n}}, RunID: tk.Run.ID, Token: tk.Run.Token})
				if err != nil || !c.Acquired() {
					return c, err
				}
				res, err := tw.l.Settle(ctx, c.Ref(), ledger.OutcomeCommitted, "sent", nil)
				return []any{c, res}, err
			})
		case r < 88 && len(events) > 0, wantRuns && r >= 90 && r < 94 && len(events) > 0:
			ev := events[rng.IntN(len(events))]
			if r >= 90 {
				// The older half: runs that left the document.
				ev = events[rng.IntN(len(events)/2+1)]
			}
			what := []string{"heartbeat", "cancel", "end", "begin", "claim"}[rng.IntN(5)]
			n := step
			same(step, what+" "+ev.id, func(tw *parkedTwin) (any, error) {
				switch what {
				case "heartbeat":
					return tw.l.Heartbeat(ctx, scope, "src:"+ev.id, 0)
				case "cancel":
					return nil, tw.l.Cancel(ctx, scope, "src:"+ev.id)
				case "begin":
					// The run again, as an agent resuming it
					// would: ended, cancelled or a new delivery.
					return tw.l.Begin(ctx, scope, ledger.RunOptions{RunID: "src:" + ev.id, Mode: ev.mode})
				case "claim":
					// A write under the run with no token of
					// its: refused, or unknown once forgotten.
					return tw.l.Claim(ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "note", Payload: n},
						RunID: "src:" + ev.id, Token: 1})
				}
				return nil, tw.l.End(ctx, scope, "src:"+ev.id, "done by hand")
			})
		case r < 90 && len(events) > 0:
			ev := events[rng.IntN(len(events))]
			same(step, "replay "+ev.id, func(tw *parkedTwin) (any, error) {
				q, err := tw.l.Queue().FindDelivery(ctx, scope, "src", ev.id)
				if err != nil {
					return nil, err
				}
				return tw.l.Queue().ReplayDelivery(ctx, scope, q.EntryID)
			})
		case r < 97:
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		case r < 99:
			now = now.Add(31 * time.Second) // leases run out
		default:
			now = now.Add(time.Duration(1+rng.IntN(5)) * time.Hour) // retention and max ages pass
		}
		if step%25 == 0 || step == steps-1 {
			same(step, "lists", func(tw *parkedTwin) (any, error) {
				items, err := tw.l.Queue().QueueItems(ctx, scope)
				if err != nil {
					return nil, err
				}
				conv, err := tw.l.Views().Conversation(ctx, scope)
				if err != nil {
					return nil, err
				}
				n, err := tw.l.Queue().CountDue(ctx)
				return []any{items, conv, n}, err
			})
			if len(events) > 0 {
				ev := events[rng.IntN(len(events))]
				same(step, "check "+ev.id, func(tw *parkedTwin) (any, error) { return tw.l.Check(ctx, key(ev.id)) })
			}
			if raw, _ := parked.st.Read(ctx, scope); raw != nil {
				var d struct{ Waits []ledger.WaitListing }
				var err error
				if d.Waits, err = ledger.WaitListings(raw); err != nil {
					t.Fatal(err)
				}
				lists, err := ledger.ReadListings(ctx, parked.st, scope)
				if err != nil {
					t.Fatal(err)
				}
				spilled, spillPages := lists.Chunks, lists.Pages
				chunks := 0
				for _, c := range d.Waits {
					chunks += max(1, c.Page)
					if c.Page > 0 {
						sawPages++
					}
					if c.Marked {
						sawMarked++
					}
				}
				sawParked = max(sawParked, chunks)
				runs := 0
				for _, c := range spilled {
					runs += c.Runs
				}
				for _, p := range spillPages {
					runs += p.Runs
				}
				sawRuns = max(sawRuns, runs)
			}
			if raw, _ := hashed.st.Read(ctx, scope); strings.Contains(string(raw), `"k":true`) {
				t.Fatalf("step %d: the ledger on a store that does not check Write.Absent marked a chunk", step)
			}
		}
	}
	if sawParked < 3 {
		t.Fatalf("the parked ledger listed at most %d chunks: the history never let enough events wait", sawParked)
	}
	if sawMarked == 0 {
		t.Fatalf("the parked ledger never listed a marked chunk")
	}
	if !wantRuns && sawPages == 0 {
		t.Fatalf("the parked ledger never listed a page of chunks: the history never let enough events wait")
	}
	if wantRuns && sawRuns < 20 {
		t.Fatalf("the parked ledger listed at most %d spilled runs: the history never finished enough events", sawRuns)
	}
	t.Logf("%d events, up to %d chunks parked, up to %d runs spilled", len(events), sawParked, sawRuns)
}

// normalizeParked is v and err as JSON, without what is random per ledger
// (the blob names of queue items).
func normalizeParked(t *testing.T, v any, err error) string {
	t.Helper()
	b, merr := json.Marshal(v)
	if merr != nil {
		t.Fatal(merr)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "Blob")
			delete(x, "blob")
			for _, v := range x {
				strip(v)
			}
		case []any:
			for _, v := range x {
				strip(v)
			}
		}
	}
	strip(x)
	b, _ = json.Marshal(x)
	if err != nil {
		return string(b) + " error: " + err.Error()
	}
	return string(b)
}

// TestParkedWaitingKeepsTheDocumentSmall: 400 events waiting behind a
// delivery in flight leave a document that holds a few dozen of them and
// lists the rest in chunks, most of them folded into pages, a few bytes
// an event; the drain reads the pages and chunks back in order, and
// leaves none behind. It fails if waiting events stay in the document, if
// every chunk is listed on its own, if pages do not fold into pages once
// there are many, or if the drain loses or reorders one.
func TestParkedWaitingKeepsTheDocumentSmall(t *testing.T) {
	// On a store that checks Write.Absent the parked events' ids are
	// marker records (format 9); on one that does not, hashes in the
	// document (format 8).
	t.Run("markers", func(t *testing.T) { parkedKeepsTheDocumentSmall(t, true, 400) })
	t.Run("hashes", func(t *testing.T) { parkedKeepsTheDocumentSmall(t, false, 400) })
	// Enough for pages of pages: past the head's chunks, 8 pages of 8
	// chunks of 8 events fold into one of level 1.
	t.Run("pages of pages", func(t *testing.T) { parkedKeepsTheDocumentSmall(t, true, 900) })
}

// waitingLedger is a ledger on a memory store that it sees as checking
// Write.Absent (marker records) or, when checks is false, as reading
// first (hashes).
func waitingLedger(checks bool, clock func() time.Time) (*memory.Store, *ledger.Ledger) {
	st := memory.New(clock)
	var store ledger.Store = st
	if !checks {
		store = readsFirst{st}
	}
	return st, ledger.New(store, ledger.Options{Clock: clock, ReplayCache: -1})
}

// enqueueWaiting sends event e{i} to scope under order: scope, held when
// hold, each its own independent run.
func enqueueWaiting(t *testing.T, l *ledger.Ledger, scope string, i int, hold bool, now time.Time) ledger.Enqueued {
	t.Helper()
	ev := fmt.Sprintf("e%04d", i)
	got, err := l.Queue().Enqueue(context.Background(), ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: "src", EventID: ev, Scope: scope, ReceivedAt: now, Body: []byte(ev)},
		Run:   ledger.RunOptions{RunID: "src:" + ev, Mode: ledger.ModeIndependent},
		Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "src", "eventId": ev}},
			Conflict: ledger.ConflictNone, PendingTTL: time.Minute},
		Hold: hold, MaxAge: time.Hour, Order: ledger.OrderScope,
	})
	if err != nil {
		t.Fatalf("enqueue %s: %v", ev, err)
	}
	return got
}

func parkedKeepsTheDocumentSmall(t *testing.T, checks bool, waiting int) {
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st, l := waitingLedger(checks, clock)
	// Marked listings are written as numbers (format 12).
	wantFormat, maxDoc := 12, 16<<10
	if !checks {
		wantFormat, maxDoc = 8, 24<<10
	}
	// Pages fold into pages level by level (format 12), so that each
	// level lists at most a page's worth but for the head's chunks.
	maxListings := ledger.WaitHead + waiting/ledger.WaitChunk/ledger.WaitPage + ledger.WaitPage - 1
	wantLevel := waiting >= 8*ledger.WaitChunk*ledger.WaitPage+(ledger.WaitHead+ledger.WaitPage)*ledger.WaitChunk
	if wantLevel {
		wantFormat, maxListings = 12, ledger.WaitHead+3*(ledger.WaitPage-1)
	}
	const scope = "backlog"
	type ids struct{ entry, run string }
	var sent []ids
	// marks reports whether each event sent has its two markers.
	marks := func(t *testing.T, e ids) (bool, bool) {
		t.Helper()
		k, err := st.ReadBlob(ctx, scope, "wk:"+e.entry)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256([]byte(e.run))
		q, err := st.ReadBlob(ctx, scope, "wq:"+hex.EncodeToString(h[:16]))
		if err != nil {
			t.Fatal(err)
		}
		return k != nil, q != nil
	}
	enqueue := func(i int) ledger.Enqueued {
		t.Helper()
		got := enqueueWaiting(t, l, scope, i, i == 0, now)
		if got.Status != ledger.EnqueueQueued {
			t.Fatalf("enqueue e%04d: %v", i, got.Status)
		}
		sent = append(sent, ids{entry: got.Item.EntryID, run: got.Item.RunID})
		return got
	}
	first := enqueue(0)
	held := ledger.Taken{OK: true, Item: first.Item, Run: first.Run, Claim: first.Claim}
	for i := 1; i <= waiting; i++ {
		now = now.Add(time.Millisecond)
		if got := enqueue(i); got.Depth != i+1 {
			t.Fatalf("depth after %d: %d", i, got.Depth)
		}
	}
	var doc struct {
		Format int                        `json:"format"`
		Queue  map[string]json.RawMessage `json:"queue"`
		Waits  []ledger.WaitListing       `json:"-"`
	}
	raw, err := st.Read(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Waits, err = ledger.WaitListings(raw); err != nil {
		t.Fatal(err)
	}
	parked, pages, levels := 0, 0, 0
	for _, c := range doc.Waits {
		parked += c.Count
		if c.Page > 0 {
			pages++
		}
		if c.Level > 0 {
			levels++
		}
		if hashed := len(c.Entries)+len(c.Runs) > 0; c.Marked != checks || hashed == checks {
			t.Fatalf("a listing of %d parked events marked %v with %d bytes of hashes, on a store that checks: %v", c.Count, c.Marked, len(c.Entries)+len(c.Runs), checks)
		}
	}
	// A parked event has both markers, any other none.
	for _, e := range sent {
		k, q := marks(t, e)
		_, inDoc := doc.Queue[e.entry]
		if want := checks && !inDoc; k != want || q != want {
			t.Fatalf("event %s, in the document %v: markers %v %v, want %v", e.run, inDoc, k, q, want)
		}
	}
	t.Logf("%d waiting: document %d bytes, %d items in it, %d parked under %d listings, %d of them pages", waiting, len(raw), len(doc.Queue), parked, len(doc.Waits), pages)
	if len(doc.Queue) > 48 || len(raw) > maxDoc || parked+len(doc.Queue) != waiting+1 || pages == 0 ||
		len(doc.Waits) > maxListings || doc.Format != wantFormat || (levels > 0) != wantLevel {
		t.Fatalf("%d waiting left %d items in a %d-byte format %d document, %d parked under %d listings, %d of them pages of pages",
			waiting, len(doc.Queue), len(raw), doc.Format, parked, len(doc.Waits), levels)
	}
	for i := 0; i <= waiting; i++ {
		if _, err := l.Queue().FinishDelivery(ctx, ledger.Finish{Taken: held, Status: ledger.DeliveryDelivered}); err != nil {
			t.Fatal(err)
		}
		if i == waiting {
			break
		}
		due, err := l.Queue().Due(ctx, ledger.DueQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("e%04d", i+1); len(due) != 1 || due[0].EventID != want {
			t.Fatalf("after %d delivered, due %+v, want %s alone", i+1, due, want)
		}
		if held, err = l.Queue().TakeDelivery(ctx, scope, due[0].EntryID, time.Minute); err != nil || !held.OK {
			t.Fatalf("take %s: %v %v", due[0].EventID, held.OK, err)
		}
	}
	raw, _ = st.Read(ctx, scope)
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Waits, err = ledger.WaitListings(raw); err != nil {
		t.Fatal(err)
	}
	if len(doc.Waits) != 0 || doc.Format == 6 || doc.Format == 8 || doc.Format == 9 || doc.Format == 12 {
		t.Fatalf("drained, the document still lists %d chunks (format %d)", len(doc.Waits), doc.Format)
	}
	for _, e := range sent {
		if k, q := marks(t, e); k || q {
			t.Fatalf("drained, event %s still has a marker", e.run)
		}
	}
}

// TestParkedEventsStayKnownAfterADecisionOnAll: a decision that reads
// every parked event back and changes one (here the cancel of a parked
// event's run) lists the chunks it left alone again, unwritten. Their
// events must stay what they were: each redelivery a duplicate, on a store
// that checks Write.Absent (markers) and on one that does not (hashes).
func TestParkedEventsStayKnownAfterADecisionOnAll(t *testing.T) {
	for _, checks := range []bool{true, false} {
		t.Run(fmt.Sprint("checks=", checks), func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			st, l := waitingLedger(checks, clock)
			const scope, waiting = "cancelled", 60
			enqueue := func(i int, hold bool) ledger.Enqueued {
				t.Helper()
				return enqueueWaiting(t, l, scope, i, hold, now)
			}
			enqueue(0, true)
			for i := 1; i <= waiting; i++ {
				now = now.Add(time.Millisecond)
				if got := enqueue(i, false); got.Status != ledger.EnqueueQueued {
					t.Fatalf("enqueue %d: %s", i, got.Status)
				}
			}
			raw, err := st.Read(ctx, scope)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), `"waits"`) {
				t.Fatal("nothing parked: the test would prove nothing")
			}
			if err := l.Cancel(ctx, scope, "src:e0030"); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= waiting; i++ {
				if got := enqueue(i, false); got.Status != ledger.EnqueueDuplicate {
					t.Fatalf("after a cancel, the redelivery of e%04d: %s, want a duplicate", i, got.Status)
				}
			}
		})
	}
}
