package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// longScope is how many settled effects the long-scope cases leave in one
// scope: enough that the ledger moves most of them out of the document
// (issue #34), whatever its threshold, as long as it keeps fewer.
const longScope = 150

// fillScope settles n effects (intent reply, payloads 0 to n-1, value
// {"msg": "m-i", "n": i}) in scope, one Once each, a second apart.
func fillScope(t *testing.T, e *env, scope string, n int) {
	t.Helper()
	for i := range n {
		r := must(e.l.Once(e.ctx, ledger.Key{Scope: scope, Intent: "reply", Payload: i},
			func(context.Context, ledger.Call) (any, error) {
				return map[string]any{"n": i, "msg": fmt.Sprintf("m-%d", i)}, nil
			}))
		wantStatus(t, fmt.Sprintf("fill %d", i), r, ledger.StatusExecuted, "")
		e.clock.Advance(time.Second)
	}
}

// A long scope answers a duplicate of any of its settled effects as a
// duplicate, with the stored value, however old the effect: from many
// goroutines of several ledgers (processes) at once, by Once, Claim,
// BeginClaim, Enqueue and Check; and History still lists every effect.
func testLongScopeDuplicates(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	fillScope(t, e, "long", longScope)
	var ran atomic.Int64
	effect := func(context.Context, ledger.Call) (any, error) { ran.Add(1); return "again", nil }
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		l := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < longScope; i += 3 {
				k := ledger.Key{Scope: "long", Intent: "reply", Payload: i}
				var r ledger.Result
				var err error
				switch g % 3 {
				case 0:
					r, err = l.Once(e.ctx, k, effect)
				case 1:
					var c ledger.Claim
					c, err = l.Claim(e.ctx, ledger.ClaimRequest{Key: k})
					r = c.Result
				default:
					var c ledger.Claim
					_, c, err = l.BeginClaim(e.ctx, ledger.RunOptions{RunID: fmt.Sprintf("dup-%d-%d", g, i)}, ledger.ClaimRequest{Key: k})
					r = c.Result
				}
				if err != nil || r.Status != ledger.StatusReplayed || string(r.Value) != fmt.Sprintf(`{"msg":"m-%d","n":%d}`, i, i) {
					errs <- fmt.Errorf("effect %d: %v %s %v", i, r.Status, r.Value, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ran.Load() != 0 {
		t.Fatalf("%d settled effects ran again", ran.Load())
	}
	for _, i := range []int{0, longScope / 2, longScope - 1} {
		c := must(e.l.Check(e.ctx, ledger.Key{Scope: "long", Intent: "reply", Payload: i}))
		if !c.Done || c.Entry == nil || string(c.Entry.Value) != fmt.Sprintf(`{"msg":"m-%d","n":%d}`, i, i) {
			t.Fatalf("check %d: %+v", i, c)
		}
	}
	// Enqueue of an event whose deliver effect settled long ago: a
	// duplicate, nothing queued.
	fillDeliver := func(id string) ledger.EnqueueRequest {
		return ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "s", EventID: id, Scope: "long", Body: []byte("{}")},
			Run:   ledger.RunOptions{RunID: "s:" + id},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: "long", Intent: "reply", Payload: 3}},
		}
	}
	if q := must(e.l.Queue().Enqueue(e.ctx, fillDeliver("old"))); q.Status != ledger.EnqueueDuplicate {
		t.Fatalf("enqueue of a settled effect: %v", q.Status)
	}
	h := must(e.l.Views().History(e.ctx, "long"))
	if len(h) != longScope {
		t.Fatalf("history lists %d entries, want %d", len(h), longScope)
	}
	for i := 1; i < len(h); i++ {
		if h[i].ClaimedAt.Before(h[i-1].ClaimedAt) {
			t.Fatalf("history out of order at %d", i)
		}
	}
	conv := must(e.l.Views().Conversation(e.ctx, "long"))
	if len(conv.Entries) != longScope {
		t.Fatalf("conversation lists %d entries, want %d", len(conv.Entries), longScope)
	}
	v, ok, err := e.l.CommittedValue(e.ctx, "long", "m-0")
	if err != nil || !ok || string(v.Value) != `{"msg":"m-0","n":0}` {
		t.Fatalf("committed value of the oldest effect: %v %+v %v", ok, v, err)
	}
}

// An effect that failed long ago (known not applied) may still be tried
// again, exactly once among racing claimers, and its attempts still count
// toward its limit.
func testLongScopeFailedRetried(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{MaxAttempts: 2})
	k := ledger.Key{Scope: "long", Intent: "refund", Payload: "r-1"}
	failed := func(context.Context, ledger.Call) (any, error) { return nil, ledger.NotApplied(errors.New("declined")) }
	wantStatus(t, "first", must(e.l.Once(e.ctx, k, failed)), ledger.StatusFailed, "")
	fillScope(t, e, "long", longScope)
	var claimed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		l := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1, MaxAttempts: 2})
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := l.Claim(e.ctx, ledger.ClaimRequest{Key: k})
			if err != nil {
				t.Error(err)
				return
			}
			switch {
			case c.Acquired():
				claimed.Add(1)
				if c.Attempt != 2 {
					t.Errorf("retry is attempt %d, want 2", c.Attempt)
				}
				if _, err := l.Settle(e.ctx, c.Ref(), ledger.OutcomeNotApplied, nil, errors.New("declined again")); err != nil {
					t.Error(err)
				}
			case c.Status != ledger.StatusInFlight && c.Status != ledger.StatusRefused:
				t.Errorf("racing retry: %v", c.Status)
			}
		}()
	}
	wg.Wait()
	if claimed.Load() != 1 {
		t.Fatalf("%d claimers retried the failed effect, want 1", claimed.Load())
	}
	// Spilled again with the rest, it is exhausted.
	for i := range longScope {
		must(e.l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "note", Payload: i},
			func(context.Context, ledger.Call) (any, error) { return nil, nil }))
	}
	wantStatus(t, "exhausted", must(e.l.Once(e.ctx, k, failed)), ledger.StatusRefused, ledger.ReasonExhausted)
}

// A run whose context predates the long history, or falls within it, sees
// every write that landed after it as a change of the scope, however old.
func testLongScopeConflicts(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	// An older context than every write below: a second before them.
	ctxAt := e.clock.Now()
	e.clock.Advance(time.Second)
	fillScope(t, e, "long", longScope)
	// A context between the 41st and 42nd writes, long since moved out of
	// the document: the 41 writes up to it are seen, every later one is a
	// change.
	mid := must(e.l.Begin(e.ctx, "long", ledger.RunOptions{RunID: "mid", Mode: ledger.ModeIndependent,
		ContextAt: ctxAt.Add(41*time.Second + 500*time.Millisecond)}))
	if c := must(mid.Claim(e.ctx, "reply", "mid", ledger.OnceOptions{})); c.Status != ledger.StatusRefused || len(c.Conflicts) != longScope-41 {
		t.Fatalf("claim of a run whose context is the 41st write: %v %v with %d conflicts, want %d", c.Status, c.Reason, len(c.Conflicts), longScope-41)
	}
	run := must(e.l.Begin(e.ctx, "long", ledger.RunOptions{RunID: "late", Mode: ledger.ModeSupersede, ContextAt: ctxAt}))
	c := must(run.Claim(e.ctx, "reply", "answer", ledger.OnceOptions{}))
	if c.Status != ledger.StatusRefused || c.Reason != ledger.ReasonConversationChanged || len(c.Conflicts) != longScope {
		t.Fatalf("claim of a run older than the history: %v %v with %d conflicts, want %d", c.Status, c.Reason, len(c.Conflicts), longScope)
	}
	// The refusal acknowledged them: the next attempt goes through.
	if c := must(run.Claim(e.ctx, "reply", "answer", ledger.OnceOptions{})); !c.Acquired() {
		t.Fatalf("claim after the refusal: %v %v", c.Status, c.Reason)
	}
	// A run whose context follows the history sees no change.
	fresh := must(e.l.Begin(e.ctx, "long", ledger.RunOptions{RunID: "now", Mode: ledger.ModeIndependent}))
	if c := must(fresh.Claim(e.ctx, "reply", "other", ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})); c.Status != ledger.StatusRefused || len(c.Conflicts) != 1 {
		t.Fatalf("claim of a current run: %v %v %d conflicts (the late run's pending reply only)", c.Status, c.Reason, len(c.Conflicts))
	}
}

// Retention drops old effects of a long scope as it does those of a short
// one: past it, a settled effect may run again; before it, never. A scope
// left alone expires whole, its old effects with it.
func testLongScopeRetention(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: time.Hour})
	fillScope(t, e, "long", longScope)
	old := ledger.Key{Scope: "long", Intent: "reply", Payload: 0}
	var n atomic.Int64
	wantStatus(t, "within retention", must(e.l.Once(e.ctx, old, count(&n, nil))), ledger.StatusReplayed, "")
	// Keep the scope alive past the first effects' retention.
	e.clock.Advance(time.Hour - time.Duration(longScope/2)*time.Second)
	// Before any write retires their records: a process that knows the
	// scope spills reads the record first, and must not answer from it.
	wantStatus(t, "past retention, before a write", must(e.l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "reply", Payload: 1},
		count(&n, nil))), ledger.StatusExecuted, "")
	must(e.l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "keepalive", Payload: 1}, count(&n, nil)))
	if c := must(e.l.Check(e.ctx, old)); c.Done {
		t.Fatalf("effect past retention still done: %+v", c.Entry)
	}
	recent := ledger.Key{Scope: "long", Intent: "reply", Payload: longScope - 1}
	wantStatus(t, "recent", must(e.l.Once(e.ctx, recent, count(&n, nil))), ledger.StatusReplayed, "")
	wantStatus(t, "past retention", must(e.l.Once(e.ctx, old, count(&n, nil))), ledger.StatusExecuted, "")
	if h := must(e.l.Views().History(e.ctx, "long")); len(h) >= longScope {
		t.Fatalf("history after retention lists %d entries", len(h))
	}
	// Left alone, the whole scope expires, its spilled effects with it.
	e.clock.Advance(2 * time.Hour)
	if h := must(e.l.Views().History(e.ctx, "long")); len(h) != 0 {
		t.Fatalf("expired scope lists %d entries", len(h))
	}
	wantStatus(t, "after expiry", must(e.l.Once(e.ctx, recent, count(&n, nil))), ledger.StatusExecuted, "")
}

// An operator or a reconciler resolving an effect that settled long ago
// (failed, known not applied, or committed) is told it is not ambiguous,
// as for a recent one, by entry id or by effect; the long scope does not
// forget it, and the refusal changes nothing.
func testLongScopeResolve(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	failedKey := ledger.Key{Scope: "long", Intent: "refund", Payload: "r-1"}
	failed := must(e.l.Once(e.ctx, failedKey, func(context.Context, ledger.Call) (any, error) {
		return nil, ledger.NotApplied(errors.New("declined"))
	}))
	wantStatus(t, "failed", failed, ledger.StatusFailed, "")
	e.clock.Advance(time.Second)
	fillScope(t, e, "long", longScope)
	committedKey := ledger.Key{Scope: "long", Intent: "reply", Payload: 0}
	committed := must(e.l.Check(e.ctx, committedKey))
	if spilled := must(e.store.ReadBlob(e.ctx, "long", "x:"+failed.Entry.ID)); spilled == nil {
		t.Fatal("the failed entry is still in the document: the case needs a longer scope")
	}
	before := must(e.store.Read(e.ctx, "long"))
	for _, tc := range []struct {
		name string
		key  ledger.Key
		id   string
	}{{"failed", failedKey, failed.Entry.ID}, {"committed", committedKey, committed.Entry.ID}} {
		for _, outcome := range []ledger.Outcome{ledger.OutcomeCommitted, ledger.OutcomeNotApplied} {
			if _, err := e.l.Resolve(e.ctx, ledger.Resolution{Scope: "long", EntryID: tc.id, Outcome: outcome, Who: "ana"}); !errors.Is(err, ledger.ErrNotAmbiguous) {
				t.Errorf("resolve %s %s by entry id: %v, want ErrNotAmbiguous", outcome, tc.name, err)
			}
			if _, err := e.l.Resolve(e.ctx, resolution(tc.key, outcome)); !errors.Is(err, ledger.ErrNotAmbiguous) {
				t.Errorf("resolve %s %s by effect: %v, want ErrNotAmbiguous", outcome, tc.name, err)
			}
			if _, err := e.l.Reconciled(e.ctx, ledger.ClaimRef{Scope: "long", EntryID: tc.id, Attempt: 1}, outcome); !errors.Is(err, ledger.ErrNotAmbiguous) {
				t.Errorf("reconciled %s %s: %v, want ErrNotAmbiguous", outcome, tc.name, err)
			}
		}
	}
	if _, err := e.l.Resolve(e.ctx, ledger.Resolution{Scope: "long", EntryID: "nope", Outcome: ledger.OutcomeCommitted}); !errors.Is(err, ledger.ErrUnknownEntry) {
		t.Errorf("resolve of an entry the scope never had: %v, want ErrUnknownEntry", err)
	}
	if after := must(e.store.Read(e.ctx, "long")); string(after) != string(before) {
		t.Error("a refused resolve changed the document")
	}
	// Still failed, still retried once.
	var n atomic.Int64
	wantStatus(t, "retry", must(e.l.Once(e.ctx, failedKey, count(&n, nil))), ledger.StatusExecuted, "")
}

// walkHistory lists a scope's history page by page (limit entries each),
// newest first, calling between (when not nil) after each page but the
// last, and returns the entries in the order the pages gave them.
func walkHistory(t *testing.T, e *env, l *ledger.Ledger, scope string, limit int, between func(page int)) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	q := ledger.HistoryQuery{Scope: scope, Limit: limit}
	for page := 0; ; page++ {
		p := must(l.Views().HistoryPage(e.ctx, q))
		if len(p.Entries) > limit {
			t.Fatalf("page %d holds %d entries, limit %d", page, len(p.Entries), limit)
		}
		out = append(out, p.Entries...)
		if p.Next == "" {
			return out
		}
		if len(p.Entries) == 0 {
			t.Fatalf("page %d is empty and names a next page", page)
		}
		if page > 10*longScope {
			t.Fatal("the walk does not end")
		}
		q.Before = p.Next
		if between != nil {
			between(page)
		}
	}
}

// A long scope's history read page by page, newest first, lists what
// History lists, each entry once, in History's order reversed, at any
// page size: settled entries moved out of the document, an old failed
// entry tried again and settled since, and unsettled ones alike.
func testLongScopeHistoryPages(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	retried := ledger.Key{Scope: "long", Intent: "refund", Payload: "r-1"}
	declined := func(context.Context, ledger.Call) (any, error) { return nil, ledger.NotApplied(errors.New("declined")) }
	wantStatus(t, "failed", must(e.l.Once(e.ctx, retried, declined)), ledger.StatusFailed, "")
	e.clock.Advance(time.Second)
	fillScope(t, e, "long", longScope/2)
	// Tried again once it left the document, and failed again: its old
	// copy stays in a spilled record.
	wantStatus(t, "failed again", must(e.l.Once(e.ctx, retried, declined)), ledger.StatusFailed, "")
	e.clock.Advance(time.Second)
	for i := range longScope / 2 {
		must(e.l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "note", Payload: i},
			func(context.Context, ledger.Call) (any, error) { return nil, nil }))
		e.clock.Advance(time.Second)
	}
	pending := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "long", Intent: "reply", Payload: "open"}}))
	if !pending.Acquired() {
		t.Fatalf("claim: %v", pending.Status)
	}
	whole := must(e.l.Views().History(e.ctx, "long"))
	if len(whole) != longScope+2 {
		t.Fatalf("history lists %d entries, want %d", len(whole), longScope+2)
	}
	for _, limit := range []int{1, 7, 50, ledger.MaxHistoryPage} {
		got := walkHistory(t, e, e.l, "long", limit, nil)
		if len(got) != len(whole) {
			t.Fatalf("pages of %d list %d entries, want %d", limit, len(got), len(whole))
		}
		for i, g := range got {
			w := whole[len(whole)-1-i]
			if g.ID != w.ID || g.State != w.State || g.Attempt != w.Attempt || string(g.Value) != string(w.Value) {
				t.Fatalf("pages of %d, entry %d: %s %s attempt %d, want %s %s attempt %d", limit, i, g.ID, g.State, g.Attempt, w.ID, w.State, w.Attempt)
			}
		}
	}
	// The conversation's page: the newest entries, oldest first, with the
	// scope's runs and queue whole.
	conv, next := must2(e.l.Views().ConversationPage(e.ctx, ledger.HistoryQuery{Scope: "long", Limit: 7}))
	full := must(e.l.Views().Conversation(e.ctx, "long"))
	if len(conv.Entries) != 7 || next == "" || len(conv.Runs) != len(full.Runs) || len(conv.Queue) != len(full.Queue) || conv.Token != full.Token {
		t.Fatalf("conversation page: %d entries, next %q, %d runs, %d queued; want 7, a next page, %d, %d", len(conv.Entries), next, len(conv.Runs), len(conv.Queue), len(full.Runs), len(full.Queue))
	}
	for i, g := range conv.Entries {
		if w := whole[len(whole)-7+i]; g.ID != w.ID {
			t.Fatalf("conversation page entry %d: %s, want %s", i, g.ID, w.ID)
		}
	}
	older, _ := must2(e.l.Views().ConversationPage(e.ctx, ledger.HistoryQuery{Scope: "long", Limit: 7, Before: next}))
	if len(older.Entries) != 7 || older.Entries[6].ID != whole[len(whole)-8].ID {
		t.Fatalf("older conversation page: %d entries", len(older.Entries))
	}
	if _, err := e.l.Views().HistoryPage(e.ctx, ledger.HistoryQuery{Scope: "long", Before: "not-a-cursor"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("a made-up cursor: %v, want ErrInvalid", err)
	}
	if _, err := e.l.Views().HistoryPage(e.ctx, ledger.HistoryQuery{Scope: "long", Limit: ledger.MaxHistoryPage + 1}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("a page too large: %v, want ErrInvalid", err)
	}
	if p := must(e.l.Views().HistoryPage(e.ctx, ledger.HistoryQuery{Scope: "nobody"})); len(p.Entries) != 0 || p.Next != "" {
		t.Errorf("an empty scope's page: %+v", p)
	}
}

// Writes between the pages of a walk (new effects, which move older ones
// out of the document, from another process) neither drop nor repeat an
// entry the scope held when the walk began.
func testLongScopeHistoryPagesWrites(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	fillScope(t, e, "long", longScope)
	before := must(e.l.Views().History(e.ctx, "long"))
	other := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	added := 0
	got := walkHistory(t, e, e.l, "long", 10, func(page int) {
		for range 20 {
			must(other.Once(e.ctx, ledger.Key{Scope: "long", Intent: "later", Payload: added},
				func(context.Context, ledger.Call) (any, error) { return nil, nil }))
			added++
			e.clock.Advance(time.Second)
		}
	})
	seen := map[string]int{}
	for _, g := range got {
		seen[g.ID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("entry %s listed %d times", id, n)
		}
	}
	for _, b := range before {
		if seen[b.ID] != 1 {
			t.Errorf("entry %s (%s %s) listed %d times, want once", b.ID, b.Intent, b.Payload, seen[b.ID])
		}
	}
	if len(got) != len(before) {
		t.Errorf("the walk listed %d entries, the scope held %d when it began", len(got), len(before))
	}
	if h := must(e.l.Views().History(e.ctx, "long")); len(h) != len(before)+added {
		t.Fatalf("history after the walk lists %d, want %d", len(h), len(before)+added)
	}
}

// A page of a long scope's history reads a few of its spilled records,
// however many the scope holds: the chunks its entries are in (three at
// most for 20 entries) and the pages that list those chunks.
func testLongScopeHistoryPageReads(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	fillScope(t, e, "long", 4*longScope)
	cs := &watchStore{Store: e.store}
	l := ledger.New(cs, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	must(l.Views().History(e.ctx, "long"))
	whole := cs.blobReads.Load()
	q := ledger.HistoryQuery{Scope: "long", Limit: 20}
	pages := 0
	for {
		cs.blobReads.Store(0)
		p := must(l.Views().HistoryPage(e.ctx, q))
		pages++
		if n := cs.blobReads.Load(); n > 6 || n*4 > whole {
			t.Fatalf("page %d read %d records; the whole history reads %d", pages, n, whole)
		}
		if p.Next == "" {
			break
		}
		q.Before = p.Next
	}
	if pages != 4*longScope/20 {
		t.Fatalf("%d pages of 20 for %d entries", pages, 4*longScope)
	}
}

// A keyed claim on a scope whose entries have spilled must learn whether
// its entry is among the spilled records, under its id and its format 1
// id. On a store that checks Write.Absent it decides as if it were not,
// and the write says otherwise if it is: one store call whether the key is
// new or a duplicate of a spilled effect, and no read. Otherwise it reads
// the records before it decides: one read, and for a duplicate of a
// committed effect nothing else. Its settle finds the entry in the
// document and reads none.
func testLongScopeClaimReads(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	fillScope(t, e, "long", longScope)
	modes := []bool{false}
	if ledger.ChecksAbsent(e.store) {
		modes = append(modes, true)
	}
	for _, absent := range modes {
		// A store that checks Write.Absent answers both with the
		// write itself; otherwise the claim reads the record first.
		wantReads := int64(1)
		if absent {
			wantReads = 0
		}
		t.Run(fmt.Sprintf("absent=%v", absent), func(t *testing.T) {
			cs := &watchStore{Store: e.store, absent: absent}
			l := ledger.New(cs, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
			calls := func(what string, wantReads, wantTransacts int64, f func()) {
				t.Helper()
				cs.blobCalls.Store(0)
				cs.transacts.Store(0)
				cs.listReads.Store(0)
				f()
				if n := cs.blobCalls.Load(); n != wantReads {
					t.Fatalf("%s made %d reads of spilled records, want %d", what, n, wantReads)
				}
				// A step that needs the scope's listings record (once
				// per few listings added, and not again once this
				// ledger wrote one) decides again after reading it.
				lists := cs.listReads.Load()
				if lists > 1 {
					t.Fatalf("%s read the listings record %d times", what, lists)
				}
				if n := cs.transacts.Load(); n != wantTransacts+lists {
					t.Fatalf("%s made %d store transactions and %d reads of the listings record, want %d transactions and one more per read",
						what, n, lists, wantTransacts)
				}
			}
			base := 0
			if absent {
				base = 10
			}
			// The ledger learns from its first step that the scope has
			// records out of its document.
			must(l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "long", Intent: "reply", Payload: base + 5}}))
			for i := range 3 {
				var c ledger.Claim
				calls(fmt.Sprintf("new claim %d", i), wantReads, 1, func() {
					c = must(l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "long", Intent: "reply", Payload: -1 - base - i}}))
				})
				if !c.Acquired() {
					t.Fatalf("new claim %d: %s %s", i, c.Status, c.Reason)
				}
				calls(fmt.Sprintf("settle %d", i), 0, 1, func() {
					must(l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, "ok", nil))
				})
				var d ledger.Claim
				wantTransacts := int64(0) // the record alone answers
				if absent {
					wantTransacts = 1 // the write it refused answers
				}
				calls(fmt.Sprintf("duplicate of spilled effect %d", i), wantReads, wantTransacts, func() {
					d = must(l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "long", Intent: "reply", Payload: base + i}}))
				})
				if d.Status != ledger.StatusReplayed {
					t.Fatalf("duplicate of spilled effect %d: %s, want replayed", i, d.Status)
				}
			}
		})
	}
}

// must2 is must for two results.
func must2[T, U any](v T, u U, err error) (T, U) {
	if err != nil {
		panic(failure{err})
	}
	return v, u
}

// longScopePaged is how many settled effects make the ledger fold the
// oldest of its spilled chunk listings into pages (issue #34), with room
// to spare: 16 entries spill at a time and 32 listings fold.
const longScopePaged = 700

// spillPages is what the scope's document says of its folded pages: their
// record names. The case below checks that it exercises them. Format 10
// lists the pages as one array of numbers, 14 per page and its record's
// number first (ledger/listings.go); earlier formats as objects with it as
// "n".
func spillPages(t *testing.T, e *env, scope string) []string {
	t.Helper()
	raw := must(e.store.Read(e.ctx, scope))
	// A long scope's listings live in a record of their own, which the
	// document names first in "lists" (format 11); the document lists
	// only what was added since.
	var ref struct {
		Lists []uint64 `json:"lists"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("the document does not decode: %v", err)
	}
	var names []string
	if len(ref.Lists) > 0 {
		rec := must(e.store.ReadBlob(e.ctx, scope, fmt.Sprintf("ls:%d", ref.Lists[0])))
		if rec == nil {
			t.Fatalf("the document names listings record ls:%d and the store has none", ref.Lists[0])
		}
		names = pageNames(t, rec)
	}
	return append(names, pageNames(t, raw)...)
}

// pageNames are the records of the spill pages raw (a document or a
// listings record) lists, in either form.
func pageNames(t *testing.T, raw []byte) []string {
	t.Helper()
	var flat struct {
		Pages []uint64 `json:"spillPages"`
	}
	var objects struct {
		Pages []struct {
			N uint64 `json:"n"`
		} `json:"spillPages"`
	}
	var ns []uint64
	switch {
	case json.Unmarshal(raw, &flat) == nil:
		if len(flat.Pages)%spillPageValues != 0 {
			t.Fatalf("the document lists %d numbers for its pages, not %d each", len(flat.Pages), spillPageValues)
		}
		for i := 0; i < len(flat.Pages); i += spillPageValues {
			ns = append(ns, flat.Pages[i])
		}
	case json.Unmarshal(raw, &objects) == nil:
		for _, p := range objects.Pages {
			ns = append(ns, p.N)
		}
	default:
		t.Fatalf("the document's page listings are in neither form: %.300s", raw)
	}
	var names []string
	for _, n := range ns {
		names = append(names, fmt.Sprintf("sp:%d", n))
	}
	return names
}

// spillPageValues is how many numbers formats 10 and 11 list a page with.
const spillPageValues = 14

// A scope long enough that its spilled chunks are listed in pages decides
// and lists as a short one does: a failed effect retried after its chunk
// was folded is listed once, with its latest attempt, by History and by a
// walk of history pages; a run older than the whole history sees every
// effect as a change; and retention drops the pages past it, whole, with
// their records, while what is within it stays.
func testLongScopePaged(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: time.Hour, MaxAttempts: 2})
	ctxAt := e.clock.Now()
	e.clock.Advance(time.Second)
	refund := ledger.Key{Scope: "long", Intent: "refund", Payload: "r-1"}
	wantStatus(t, "refund", must(e.l.Once(e.ctx, refund, func(context.Context, ledger.Call) (any, error) {
		return nil, ledger.NotApplied(errors.New("declined"))
	})), ledger.StatusFailed, "")
	e.clock.Advance(time.Second)
	fillScope(t, e, "long", longScopePaged)
	pages := spillPages(t, e, "long")
	if len(pages) == 0 {
		t.Fatalf("%d effects and the document lists no page: the case tests nothing", longScopePaged)
	}
	// The refund's first attempt is in a folded chunk; the retry moves it
	// back, and more effects spill it again.
	wantStatus(t, "refund retried", must(e.l.Once(e.ctx, refund, func(context.Context, ledger.Call) (any, error) {
		return "re_2", nil
	})), ledger.StatusExecuted, "")
	for i := range 100 {
		must(e.l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "note", Payload: i},
			func(context.Context, ledger.Call) (any, error) { return nil, nil }))
		e.clock.Advance(time.Second)
	}
	total := 1 + longScopePaged + 100
	hist := must(e.l.Views().History(e.ctx, "long"))
	count := map[string]int{}
	for _, h := range hist {
		count[h.ID]++
		if h.Intent == "refund" && (h.State != ledger.StateCommitted || h.Attempt != 2) {
			t.Errorf("history lists the refund %s at attempt %d, want committed at 2", h.State, h.Attempt)
		}
	}
	if len(hist) != total || len(count) != total {
		t.Fatalf("history lists %d entries, %d distinct; want %d", len(hist), len(count), total)
	}
	walked := map[string]int{}
	q := ledger.HistoryQuery{Scope: "long", Limit: 50}
	for {
		p := must(e.l.Views().HistoryPage(e.ctx, q))
		for _, h := range p.Entries {
			walked[h.ID]++
			if h.Intent == "refund" && h.Attempt != 2 {
				t.Errorf("a history page lists the refund at attempt %d, want 2", h.Attempt)
			}
		}
		if p.Next == "" {
			break
		}
		q.Before = p.Next
	}
	for id, n := range count {
		if walked[id] != n {
			t.Errorf("the page walk lists %s %d times, want once", id, walked[id])
		}
	}
	if len(walked) != total {
		t.Errorf("the page walk lists %d entries, want %d", len(walked), total)
	}
	run := must(e.l.Begin(e.ctx, "long", ledger.RunOptions{RunID: "late", Mode: ledger.ModeIndependent, ContextAt: ctxAt}))
	if c := must(run.Claim(e.ctx, "reply", "late", ledger.OnceOptions{})); c.Status != ledger.StatusRefused || len(c.Conflicts) != total {
		t.Fatalf("claim of a run older than the history: %v %v with %d conflicts, want %d", c.Status, c.Reason, len(c.Conflicts), total)
	}
	// Past the retention of the first 400 effects; a write retires what
	// it can.
	e.clock.Advance(time.Hour - time.Duration(total-400)*time.Second)
	must(e.l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "keepalive", Payload: 1},
		func(context.Context, ledger.Call) (any, error) { return nil, nil }))
	gone := 0
	for _, name := range pages {
		if b := must(e.store.ReadBlob(e.ctx, "long", name)); b == nil {
			gone++
		}
	}
	if gone == 0 {
		t.Errorf("no page of %d was retired past retention", len(pages))
	}
	if c := must(e.l.Check(e.ctx, ledger.Key{Scope: "long", Intent: "reply", Payload: 0})); c.Done {
		t.Errorf("an effect past retention is still done: %+v", c.Entry)
	}
	for _, k := range []ledger.Key{refund, {Scope: "long", Intent: "reply", Payload: longScopePaged - 1}} {
		if c := must(e.l.Check(e.ctx, k)); !c.Done {
			t.Errorf("%s %v within retention is not done", k.Intent, k.Payload)
		}
	}
	if h := must(e.l.Views().History(e.ctx, "long")); len(h) >= total || len(h) < total-400 {
		t.Errorf("history after retention lists %d entries, want fewer than %d and at least %d", len(h), total, total-400)
	}
}

// Runs whose contexts fall anywhere in a long history, begun from several
// ledgers (processes) while others keep writing to the scope (which moves
// landings out of its document), each see exactly the writes that landed
// after their context.
func testLongScopeOldContextsRace(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	began := e.clock.Now()
	e.clock.Advance(time.Second)
	fillScope(t, e, "long", longScope) // reply i lands at began + 1 s + i s
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		l := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 16 {
				if g%2 == 0 {
					// Writes of another intent: they move landings out
					// and are no change to a reply.
					if _, err := l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "note", Payload: g*100 + i},
						func(context.Context, ledger.Call) (any, error) { return nil, nil }); err != nil {
						errs <- err
						return
					}
					continue
				}
				k := (g*37 + i*11) % longScope
				ctxAt := began.Add(time.Duration(k)*time.Second + 500*time.Millisecond)
				run, err := l.Begin(e.ctx, "long", ledger.RunOptions{RunID: fmt.Sprintf("old-%d-%d", g, i), Mode: ledger.ModeIndependent, ContextAt: ctxAt})
				if err != nil {
					errs <- err
					return
				}
				c, err := run.Claim(e.ctx, "reply", fmt.Sprintf("x-%d-%d", g, i), ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})
				if err != nil {
					errs <- err
					return
				}
				if c.Status != ledger.StatusRefused || len(c.Conflicts) != longScope-k {
					errs <- fmt.Errorf("run with the context of reply %d: %v with %d conflicts, want refused with %d", k, c.Status, len(c.Conflicts), longScope-k)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// conversationPages walks scope's conversation pages of limit entries,
// newest first, checking that each page lists every run its entries and
// deliveries name and only deliveries of its span of time, none twice. It
// returns the deliveries oldest first, as Conversation lists them, the
// runs the pages list and the ids the pages name, and how many pages.
func conversationPages(t *testing.T, e *env, scope string, limit int) ([]ledger.QueueItem, map[string]ledger.RunInfo, map[string]bool, int) {
	t.Helper()
	var pages [][]ledger.QueueItem
	runs := map[string]ledger.RunInfo{}
	named := map[string]bool{}
	seen := map[string]bool{}
	q := ledger.HistoryQuery{Scope: scope, Limit: limit}
	for n := 1; ; n++ {
		if n > 10000 {
			t.Fatal("the conversation's pages do not end")
		}
		page, next := must2(e.l.Views().ConversationPage(e.ctx, q))
		listed := map[string]bool{}
		for _, r := range page.Runs {
			listed[r.ID] = true
			runs[r.ID] = r
		}
		name := func(what, id, run string) {
			t.Helper()
			if run == "" {
				return
			}
			named[run] = true
			if !listed[run] {
				t.Fatalf("page %d: %s %s names a run the page does not list (%.60s)", n, what, id, run)
			}
		}
		for _, en := range page.Entries {
			name("entry", en.ID, en.RunID)
		}
		for _, it := range page.Queue {
			name("delivery", it.EventID, it.RunID)
			if seen[it.EntryID] {
				t.Fatalf("page %d lists delivery %s again", n, it.EventID)
			}
			seen[it.EntryID] = true
			if next != "" && len(page.Entries) > 0 && it.ReceivedAt.Before(page.Entries[0].ClaimedAt) {
				t.Fatalf("page %d lists delivery %s received %s, before its oldest entry's claim %s", n, it.EventID, it.ReceivedAt, page.Entries[0].ClaimedAt)
			}
		}
		pages = append(pages, page.Queue)
		if next == "" {
			break
		}
		q.Before = next
	}
	var items []ledger.QueueItem
	for i := len(pages) - 1; i >= 0; i-- {
		items = append(items, pages[i]...)
	}
	return items, runs, named, len(pages)
}

// Ledgers of several gateway instances growing one scope at once past the
// point where its listings leave the document (a record of their own,
// rewritten as they grow, which each ledger may remember from its own
// writes) run every effect once and list each once: what one ledger
// remembers never stands in for a record another wrote since.
func testLongScopeListingsShared(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	const writers, each = 8, 60
	var ran atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		l := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Each key twice, by two writers: the second is a
				// duplicate that must not run.
				for _, k := range []int{g*each + i, ((g+1)%writers)*each + i} {
					if _, err := l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "note", Payload: k},
						func(context.Context, ledger.Call) (any, error) { ran.Add(1); return k, nil }); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := ran.Load(); n != writers*each {
		t.Errorf("%d effects ran for %d keys", n, writers*each)
	}
	raw := must(e.store.Read(e.ctx, "long"))
	var ref struct {
		Lists []uint64 `json:"lists"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil || len(ref.Lists) == 0 {
		t.Fatalf("after %d effects the document names no listings record (%v): the case tests nothing", writers*each, err)
	}
	for _, l := range []*ledger.Ledger{e.l, ledger.New(e.store, ledger.Options{Clock: e.clock.Now})} {
		hist := must(l.Views().History(e.ctx, "long"))
		seen := map[string]bool{}
		for _, en := range hist {
			if seen[en.ID] {
				t.Fatalf("history lists %s twice", en.ID)
			}
			seen[en.ID] = true
		}
		if len(hist) != writers*each {
			t.Errorf("history lists %d entries for %d effects", len(hist), writers*each)
		}
	}
}
