package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// These tests walk every arrow of the entry state diagram:
// pending → committed | failed | ambiguous; ambiguous → committed | failed
// (reconciler or operator); failed → pending up to MaxAttempts.

func testExhausted(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{MaxAttempts: 3})
	key := ledger.Key{Scope: "cards", Intent: "charge", Payload: map[string]int{"cents": 100}}
	var tries atomic.Int64
	var attempts []int
	declined := func(ctx context.Context, c ledger.Call) (any, error) {
		tries.Add(1)
		attempts = append(attempts, c.Attempt)
		return nil, ledger.NotApplied(errors.New("card declined before charging"))
	}
	for i := 1; i <= 3; i++ {
		r := must(e.l.Once(e.ctx, key, declined))
		wantStatus(t, "declined attempt", r, ledger.StatusFailed, "")
		if r.Err == nil || r.Entry.Failures != i {
			t.Fatalf("attempt %d: err %v failures %d", i, r.Err, r.Entry.Failures)
		}
	}
	wantStatus(t, "fourth attempt", must(e.l.Once(e.ctx, key, declined)), ledger.StatusRefused, ledger.ReasonExhausted)
	if tries.Load() != 3 || len(attempts) != 3 || attempts[0] != 1 || attempts[2] != 3 {
		t.Fatalf("effect tried %d times with attempts %v, want 3: 1, 2, 3", tries.Load(), attempts)
	}
	// A failure that then succeeds commits on the retry.
	key2 := ledger.Key{Scope: "cards", Intent: "charge", Payload: map[string]int{"cents": 200}}
	must(e.l.Once(e.ctx, key2, declined))
	wantStatus(t, "retry that works", must(e.l.Once(e.ctx, key2, count(&tries, "ch_1"))), ledger.StatusExecuted, "")
}

func testAmbiguousError(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	key := ledger.Key{Scope: "sms", Intent: "send", Payload: "hello"}
	var tries atomic.Int64
	timeout := func(ctx context.Context, c ledger.Call) (any, error) {
		tries.Add(1)
		return nil, context.DeadlineExceeded // the provider may have sent it
	}
	r := must(e.l.Once(e.ctx, key, timeout))
	wantStatus(t, "timed-out effect", r, ledger.StatusAmbiguous, "")
	if !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("result error %v", r.Err)
	}
	wantStatus(t, "call after ambiguity", must(e.l.Once(e.ctx, key, timeout)), ledger.StatusAmbiguous, "")
	if tries.Load() != 1 {
		t.Fatalf("an ambiguous effect was retried (%d tries)", tries.Load())
	}
	listed := must(e.l.Views().Ambiguous(e.ctx, 10))
	if len(listed) != 1 || listed[0].Scope != "sms" {
		t.Fatalf("ambiguous list = %+v", listed)
	}
	// A custom classifier decides which errors are safe.
	e2 := setup(t, newStore, ledger.Options{Classify: func(err error) ledger.ErrorClass {
		if errors.Is(err, context.DeadlineExceeded) {
			return ledger.ClassNotApplied
		}
		return ledger.ClassAmbiguous
	}})
	wantStatus(t, "classified not applied", must(e2.l.Once(e2.ctx, key, timeout)), ledger.StatusFailed, "")
}

func testPendingPastTTL(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{PendingTTL: time.Minute})
	var n atomic.Int64
	key := ledger.Key{Scope: "crash", Intent: "reply", Payload: "m1"}
	c := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: key}))
	if !c.Acquired() || !c.Deadline.Equal(start.Add(time.Minute)) {
		t.Fatalf("claim %s deadline %v", c.Status, c.Deadline)
	}
	if len(must(e.l.Views().Ambiguous(e.ctx, 10))) != 0 {
		t.Fatal("a live claim listed as ambiguous")
	}
	e.clock.Advance(59 * time.Second)
	wantStatus(t, "before the TTL", must(e.l.Once(e.ctx, key, count(&n, nil))), ledger.StatusInFlight, "")
	e.clock.Advance(time.Second)
	if len(must(e.l.Views().Ambiguous(e.ctx, 10))) != 1 {
		t.Fatal("an abandoned claim is not listed as ambiguous")
	}
	chk := must(e.l.Check(e.ctx, key))
	if chk.Done || chk.Status != ledger.StatusAmbiguous {
		t.Fatalf("check of an abandoned claim: %+v", chk)
	}
	wantStatus(t, "after the TTL", must(e.l.Once(e.ctx, key, count(&n, nil))), ledger.StatusAmbiguous, "")
	// A claim that said abandonment may be redelivered starts a new attempt instead.
	key2 := ledger.Key{Scope: "crash", Intent: "deliver", Payload: "evt_1"}
	must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: key2, Redeliverable: true, PendingTTL: 10 * time.Second, Conflict: ledger.ConflictNone}))
	e.clock.Advance(10 * time.Second)
	r := must(e.l.Once(e.ctx, key2, count(&n, "ok"), ledger.OnceOptions{Redeliverable: true}))
	wantStatus(t, "redeliverable after its TTL", r, ledger.StatusExecuted, "")
	if r.Entry.Attempt != 2 || n.Load() != 1 {
		t.Fatalf("attempt %d, effect ran %d times", r.Entry.Attempt, n.Load())
	}
}

func testReconciler(t *testing.T, newStore NewStore) {
	var answer atomic.Value
	var asked atomic.Int64
	e := setup(t, newStore, ledger.Options{Reconcile: func(ctx context.Context, entry ledger.Entry) (ledger.Outcome, error) {
		asked.Add(1)
		if entry.State != ledger.StateAmbiguous {
			t.Errorf("reconciler asked about a %s entry", entry.State)
		}
		return answer.Load().(ledger.Outcome), nil
	}})
	var n atomic.Int64
	unknown := func(ctx context.Context, c ledger.Call) (any, error) {
		n.Add(1)
		return nil, errors.New("connection reset")
	}
	for _, tc := range []struct {
		outcome ledger.Outcome
		want    ledger.Status
		runs    int64
	}{
		{ledger.OutcomeUnknown, ledger.StatusAmbiguous, 0},
		{ledger.OutcomeCommitted, ledger.StatusReplayed, 0},
		{ledger.OutcomeNotApplied, ledger.StatusExecuted, 1},
	} {
		key := ledger.Key{Scope: "reconcile", Intent: "refund", Payload: string(tc.outcome)}
		answer.Store(ledger.OutcomeUnknown)
		wantStatus(t, "effect with an unknown outcome", must(e.l.Once(e.ctx, key, unknown)), ledger.StatusAmbiguous, "")
		answer.Store(tc.outcome)
		n.Store(0)
		r := must(e.l.Once(e.ctx, key, count(&n, "re_1")))
		if r.Status != tc.want || n.Load() != tc.runs {
			t.Errorf("reconciler says %s: got %s with %d runs, want %s with %d", tc.outcome, r.Status, n.Load(), tc.want, tc.runs)
		}
		if tc.outcome == ledger.OutcomeCommitted {
			if h := must(e.l.Check(e.ctx, key)); !h.Done || h.Entry.ResolvedBy != "reconciler" {
				t.Errorf("after reconciling committed: %+v", h)
			}
		}
	}
	if asked.Load() != 3 {
		t.Errorf("reconciler asked %d times, want 3", asked.Load())
	}
}

// resolution is an operator's resolve of key's entry, named by its effect.
func resolution(key ledger.Key, outcome ledger.Outcome) ledger.Resolution {
	return ledger.Resolution{Scope: key.Scope, Intent: key.Intent, Payload: key.Payload, Outcome: outcome}
}

func testResolve(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	unknown := func(ctx context.Context, c ledger.Call) (any, error) { return nil, errors.New("timeout") }
	done := ledger.Key{Scope: "ops", Intent: "refund", Payload: 1}
	notDone := ledger.Key{Scope: "ops", Intent: "refund", Payload: 2}
	must(e.l.Once(e.ctx, done, unknown))
	must(e.l.Once(e.ctx, notDone, unknown))
	if got := must(e.l.Resolve(e.ctx, resolution(done, ledger.OutcomeCommitted))); got.State != ledger.StateCommitted || got.ResolvedBy != "operator" {
		t.Fatalf("resolved entry %+v", got)
	}
	if _, err := e.l.Resolve(e.ctx, resolution(done, ledger.OutcomeNotApplied)); !errors.Is(err, ledger.ErrNotAmbiguous) {
		t.Fatalf("resolving a committed entry: %v, want ErrNotAmbiguous", err)
	}
	must(e.l.Resolve(e.ctx, resolution(notDone, ledger.OutcomeNotApplied)))
	wantStatus(t, "after resolved committed", must(e.l.Once(e.ctx, done, count(&n, nil))), ledger.StatusReplayed, "")
	wantStatus(t, "after resolved not applied", must(e.l.Once(e.ctx, notDone, count(&n, nil))), ledger.StatusExecuted, "")
	if n.Load() != 1 {
		t.Fatalf("effects ran %d times, want 1", n.Load())
	}
	if left := must(e.l.Views().Ambiguous(e.ctx, 10)); len(left) != 0 {
		t.Fatalf("still ambiguous after resolving: %+v", left)
	}
}

func testLateSettle(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	key := ledger.Key{Scope: "late", Intent: "deliver", Payload: "evt"}
	req := ledger.ClaimRequest{Key: key, PendingTTL: time.Minute, Redeliverable: true}
	first := must(e.l.Claim(e.ctx, req))
	e.clock.Advance(time.Minute)
	second := must(e.l.Claim(e.ctx, req))
	if !second.Acquired() || second.Attempt != 2 {
		t.Fatalf("second claim: %s attempt %d", second.Status, second.Attempt)
	}
	late := must(e.l.Settle(e.ctx, first.Ref(), ledger.OutcomeCommitted, "from the first", nil))
	if !late.LateSettle || late.Entry.State != ledger.StatePending || late.Entry.Attempt != 2 {
		t.Fatalf("late settle: %+v", late)
	}
	r := must(e.l.Settle(e.ctx, second.Ref(), ledger.OutcomeCommitted, "from the second", nil))
	if r.LateSettle || r.Status != ledger.StatusExecuted {
		t.Fatalf("current settle: %+v", r)
	}
	if _, err := e.l.Settle(e.ctx, second.Ref(), ledger.OutcomeCommitted, "again", nil); !errors.Is(err, ledger.ErrAlreadySettled) {
		t.Fatalf("settling twice: %v", err)
	}
	hist := must(e.l.Views().History(e.ctx, "late"))
	if len(hist) != 1 || string(hist[0].Value) != `"from the second"` {
		t.Fatalf("history = %+v", hist)
	}
	// A settle after the claim turned ambiguous by abandonment records what
	// really happened, flagged late.
	k2 := ledger.Key{Scope: "late", Intent: "reply", Payload: "m"}
	c := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: k2, PendingTTL: time.Minute}))
	e.clock.Advance(2 * time.Minute)
	var n atomic.Int64
	wantStatus(t, "abandoned", must(e.l.Once(e.ctx, k2, count(&n, nil))), ledger.StatusAmbiguous, "")
	s := must(e.l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, "sent", nil))
	if !s.LateSettle || s.Status != ledger.StatusExecuted {
		t.Fatalf("late settle of an abandoned attempt: %+v", s)
	}
	wantStatus(t, "after the late settle", must(e.l.Once(e.ctx, k2, count(&n, nil))), ledger.StatusReplayed, "")
}

func testRetention(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: 24 * time.Hour})
	var n atomic.Int64
	run := must(e.l.Begin(e.ctx, "kept", ledger.RunOptions{RunID: "r"}))
	must(run.Once(e.ctx, "reply", 1, count(&n, nil)))
	must(e.l.Once(e.ctx, ledger.Key{Scope: "kept", Intent: "refund", Payload: 1},
		func(ctx context.Context, c ledger.Call) (any, error) { return nil, errors.New("timeout") }))
	noErr(t, run.End(e.ctx, "done"))
	e.clock.Advance(25 * time.Hour)
	// Any write prunes; the ambiguous refund stays until resolved.
	must(e.l.Once(e.ctx, ledger.Key{Scope: "kept", Intent: "note", Payload: 1}, count(&n, nil)))
	hist := must(e.l.Views().History(e.ctx, "kept"))
	if len(hist) != 2 || hist[0].Intent != "refund" || hist[0].State != ledger.StateAmbiguous {
		t.Fatalf("after retention: %+v", hist)
	}
	// The run is gone: resuming it starts afresh.
	again := must(e.l.Begin(e.ctx, "kept", ledger.RunOptions{RunID: "r"}))
	if !again.CanWrite || again.Delivery != 1 {
		t.Fatalf("run after retention: %+v", again)
	}
	// A settled replay is forgotten after retention; a document with nothing
	// left expires as a whole.
	must(e.l.Once(e.ctx, ledger.Key{Scope: "gone", Intent: "x", Payload: 1}, count(&n, nil)))
	e.clock.Advance(25 * time.Hour)
	if h := must(e.l.Views().History(e.ctx, "gone")); len(h) != 0 {
		t.Fatalf("expired document still has %d entries", len(h))
	}
	wantStatus(t, "after retention", must(e.l.Once(e.ctx, ledger.Key{Scope: "gone", Intent: "x", Payload: 1}, count(&n, nil))), ledger.StatusExecuted, "")
}

func testBadInput(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	run := must(e.l.Begin(e.ctx, "bad", ledger.RunOptions{RunID: "r"}))
	c := must(run.Claim(e.ctx, "reply", 1, ledger.OnceOptions{}))
	before := must(e.store.Read(e.ctx, "bad"))
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"unknown run", func() error {
			_, err := e.l.RunRef("bad", "nope", 1).Once(e.ctx, "reply", 2, count(&n, nil))
			return err
		}(), ledger.ErrUnknownRun},
		{"unknown entry", func() error {
			_, err := e.l.Settle(e.ctx, ledger.ClaimRef{Scope: "bad", EntryID: "nope", Attempt: 1}, ledger.OutcomeCommitted, nil, nil)
			return err
		}(), ledger.ErrUnknownEntry},
		{"attempt never claimed", func() error {
			_, err := e.l.Settle(e.ctx, ledger.ClaimRef{Scope: "bad", EntryID: c.EntryID, Attempt: 9}, ledger.OutcomeCommitted, nil, nil)
			return err
		}(), ledger.ErrUnknownEntry},
		{"resolve of a pending entry", func() error {
			_, err := e.l.Resolve(e.ctx, ledger.Resolution{Scope: "bad", EntryID: c.EntryID, Outcome: ledger.OutcomeCommitted})
			return err
		}(), ledger.ErrNotAmbiguous},
		{"bad outcome", func() error {
			_, err := e.l.Settle(e.ctx, c.Ref(), "maybe", nil, nil)
			return err
		}(), ledger.ErrInvalid},
		{"bad mode", func() error {
			_, err := e.l.Begin(e.ctx, "bad", ledger.RunOptions{RunID: "x", Mode: "chaotic"})
			return err
		}(), ledger.ErrInvalid},
		{"empty intent", func() error {
			_, err := e.l.Once(e.ctx, ledger.Key{Scope: "bad"}, count(&n, nil))
			return err
		}(), ledger.ErrInvalid},
		{"cancel unknown run", e.l.Cancel(e.ctx, "bad", "nope"), ledger.ErrUnknownRun},
		// Scopes the gateway keeps for itself take no run, claim or event.
		{"begin on a reserved scope", func() error {
			_, err := e.l.Begin(e.ctx, "replyonce:control:paused-sources", ledger.RunOptions{RunID: "x"})
			return err
		}(), ledger.ErrInvalid},
		{"claim on a reserved scope", func() error {
			_, err := e.l.Once(e.ctx, ledger.Key{Scope: "REPLYONCE:x", Intent: "reply"}, count(&n, nil))
			return err
		}(), ledger.ErrInvalid},
		{"enqueue on a reserved scope", func() error {
			_, err := e.l.Queue().Enqueue(e.ctx, ledger.EnqueueRequest{
				Event: ledger.QueuedEvent{Source: "src", EventID: "e", Scope: "replyonce:y", ReceivedAt: e.clock.Now(), Body: []byte("{}")},
				Run:   ledger.RunOptions{RunID: "src:e", Mode: ledger.ModeIndependent},
				Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: "replyonce:y", Intent: "deliver", Payload: "e"}},
			})
			return err
		}(), ledger.ErrInvalid},
	}
	for _, ch := range checks {
		if !errors.Is(ch.err, ch.want) {
			t.Errorf("%s: error %v, want %v", ch.name, ch.err, ch.want)
		}
	}
	assertJSON(t, must(e.store.Read(e.ctx, "bad")), string(before))
	for _, scope := range []string{"replyonce:control:paused-sources", "REPLYONCE:x", "replyonce:y"} {
		if doc := must(e.store.Read(e.ctx, scope)); doc != nil {
			t.Errorf("reserved scope %q was written: %s", scope, doc)
		}
	}
	if n.Load() != 0 {
		t.Fatal("bad input ran an effect")
	}
}
