package storetest

import (
	"context"
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
	if q := must(e.l.Enqueue(e.ctx, fillDeliver("old"))); q.Status != ledger.EnqueueDuplicate {
		t.Fatalf("enqueue of a settled effect: %v", q.Status)
	}
	h := must(e.l.History(e.ctx, "long"))
	if len(h) != longScope {
		t.Fatalf("history lists %d entries, want %d", len(h), longScope)
	}
	for i := 1; i < len(h); i++ {
		if h[i].ClaimedAt.Before(h[i-1].ClaimedAt) {
			t.Fatalf("history out of order at %d", i)
		}
	}
	conv := must(e.l.Conversation(e.ctx, "long"))
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

// A run whose context predates the long history sees every write that
// landed after it as a change of the scope, however old.
func testLongScopeConflicts(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	// An older context than every write below: a second before them.
	ctxAt := e.clock.Now()
	e.clock.Advance(time.Second)
	fillScope(t, e, "long", longScope)
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
	must(e.l.Once(e.ctx, ledger.Key{Scope: "long", Intent: "keepalive", Payload: 1}, count(&n, nil)))
	if c := must(e.l.Check(e.ctx, old)); c.Done {
		t.Fatalf("effect past retention still done: %+v", c.Entry)
	}
	recent := ledger.Key{Scope: "long", Intent: "reply", Payload: longScope - 1}
	wantStatus(t, "recent", must(e.l.Once(e.ctx, recent, count(&n, nil))), ledger.StatusReplayed, "")
	wantStatus(t, "past retention", must(e.l.Once(e.ctx, old, count(&n, nil))), ledger.StatusExecuted, "")
	if h := must(e.l.History(e.ctx, "long")); len(h) >= longScope {
		t.Fatalf("history after retention lists %d entries", len(h))
	}
	// Left alone, the whole scope expires, its spilled effects with it.
	e.clock.Advance(2 * time.Hour)
	if h := must(e.l.History(e.ctx, "long")); len(h) != 0 {
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
