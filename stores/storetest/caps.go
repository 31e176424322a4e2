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

// The loop breaker: ledger.Options.Caps, decided in the claim's own
// transaction, so every store must agree on it.

var replyCap = map[string]ledger.Cap{"reply": {Max: 3, Window: 5 * time.Minute}}

// events collects what the observer hears, from any goroutine.
type events struct {
	mu   sync.Mutex
	list []ledger.Event
}

func (ev *events) observe(e ledger.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.list = append(ev.list, e)
}

func (ev *events) of(typ string) []ledger.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []ledger.Event
	for _, e := range ev.list {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func replyKey(scope string, n int) ledger.Key {
	return ledger.Key{Scope: scope, Intent: "reply", Payload: map[string]int{"inReplyTo": n}}
}

// Three replies in the window go out; the fourth and fifth are refused
// rate_limited without running, under one escalation that the observer
// hears of once and an operator can list and dismiss. Replays, other
// intents and other scopes are not limited, and the window slides on the
// ledger's clock.
func testCapLimitsIntent(t *testing.T, newStore NewStore) {
	var ev events
	e := setup(t, newStore, ledger.Options{Caps: replyCap, Observe: ev.observe})
	var ran atomic.Int64
	for i := 1; i <= 3; i++ {
		wantStatus(t, fmt.Sprintf("reply %d", i), must(e.l.Once(e.ctx, replyKey("loop", i), count(&ran, i))), ledger.StatusExecuted, "")
		e.clock.Advance(time.Second)
	}
	for i := 4; i <= 5; i++ {
		r := must(e.l.Once(e.ctx, replyKey("loop", i), count(&ran, i), ledger.OnceOptions{Summary: "echo"}))
		wantStatus(t, fmt.Sprintf("reply %d", i), r, ledger.StatusRefused, ledger.ReasonRateLimited)
	}
	if ran.Load() != 3 {
		t.Fatalf("effect ran %d times, want 3: a refused claim must not run it", ran.Load())
	}
	// A replay is not a new reply: it is answered as before.
	wantStatus(t, "replay of reply 1", must(e.l.Once(e.ctx, replyKey("loop", 1), count(&ran, 1))), ledger.StatusReplayed, "")
	// Other intents and other scopes have their own counts.
	wantStatus(t, "refund", must(e.l.Once(e.ctx, ledger.Key{Scope: "loop", Intent: "refund", Payload: 1}, count(&ran, 0))), ledger.StatusExecuted, "")
	wantStatus(t, "reply elsewhere", must(e.l.Once(e.ctx, replyKey("other", 1), count(&ran, 0))), ledger.StatusExecuted, "")

	if got := ev.of("escalation"); len(got) != 1 || got[0].Scope != "loop" || got[0].Intent != "reply" || got[0].Reason != ledger.ReasonRateLimited || got[0].EscalationID == "" {
		t.Fatalf("escalation events %+v, want one for reply on loop", got)
	}
	list := must(e.l.Views().Escalations(e.ctx, 0))
	if len(list) != 1 {
		t.Fatalf("open escalations %+v, want 1", list)
	}
	esc := list[0]
	if esc.Scope != "loop" || esc.Intent != "reply" || esc.Refused != 2 || esc.Count != 3 || esc.Max != 3 ||
		esc.Window != 5*time.Minute || esc.Summary != "echo" || esc.ID != ev.of("escalation")[0].EscalationID {
		t.Fatalf("escalation %+v, want reply on loop, 2 refused with 3 of max 3 in 5m", esc)
	}

	// Dismissed, it leaves the open list but stays on the scope; the cap
	// still holds, and the next refusal opens a new escalation.
	dismissed := must(e.l.DismissEscalation(e.ctx, "loop", esc.ID, "ops@example.com"))
	if dismissed.Open() || dismissed.DismissedBy != "ops@example.com" {
		t.Fatalf("dismissed %+v", dismissed)
	}
	if list := must(e.l.Views().Escalations(e.ctx, 0)); len(list) != 0 {
		t.Fatalf("open escalations after dismissal: %+v", list)
	}
	if _, err := e.l.DismissEscalation(e.ctx, "loop", "nope", ""); !errors.Is(err, ledger.ErrUnknownEscalation) {
		t.Fatalf("dismissing an unknown escalation: %v, want ErrUnknownEscalation", err)
	}
	wantStatus(t, "reply 6", must(e.l.Once(e.ctx, replyKey("loop", 6), count(&ran, 6))), ledger.StatusRefused, ledger.ReasonRateLimited)
	if n := len(ev.of("escalation")); n != 2 {
		t.Fatalf("%d escalation events after a refusal past a dismissed escalation, want 2", n)
	}
	if all := must(e.l.Views().ScopeEscalations(e.ctx, "loop")); len(all) != 2 || all[0].Open() || !all[1].Open() {
		t.Fatalf("scope escalations %+v, want the dismissed one and a new open one", all)
	}

	// The window slides: 5 minutes after the first reply was claimed, it
	// no longer counts, and one more reply may go out.
	e.clock.Advance(5*time.Minute - 3*time.Second)
	wantStatus(t, "reply 7, first one out of the window", must(e.l.Once(e.ctx, replyKey("loop", 7), count(&ran, 7))), ledger.StatusExecuted, "")
	wantStatus(t, "reply 8", must(e.l.Once(e.ctx, replyKey("loop", 8), count(&ran, 8))), ledger.StatusRefused, ledger.ReasonRateLimited)
}

// Which entries count: committed, pending and ambiguous attempts do (each
// may have reached the customer); failed ones (known not to have
// happened) do not, and a new attempt of a counted entry is weighed
// against the others only.
func testCapCounts(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Caps: replyCap})
	var ran atomic.Int64
	// Failed: does not count, however many.
	for i := 1; i <= 3; i++ {
		r := must(e.l.Once(e.ctx, replyKey("c", 100+i), func(context.Context, ledger.Call) (any, error) {
			return nil, ledger.NotApplied(errors.New("400 bad address"))
		}))
		wantStatus(t, "failing reply", r, ledger.StatusFailed, "")
	}
	// Ambiguous: counts.
	r := must(e.l.Once(e.ctx, replyKey("c", 1), func(context.Context, ledger.Call) (any, error) { return nil, errors.New("timeout") }))
	wantStatus(t, "ambiguous reply", r, ledger.StatusAmbiguous, "")
	// Pending: counts.
	pending := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: replyKey("c", 2)}))
	if !pending.Acquired() {
		t.Fatalf("claim 2: %s/%s", pending.Status, pending.Reason)
	}
	// Committed: counts.
	wantStatus(t, "reply 3", must(e.l.Once(e.ctx, replyKey("c", 3), count(&ran, 3))), ledger.StatusExecuted, "")
	wantStatus(t, "reply 4", must(e.l.Once(e.ctx, replyKey("c", 4), count(&ran, 4))), ledger.StatusRefused, ledger.ReasonRateLimited)
	// A failed entry's retry is a new attempt of an effect the window does
	// not count; with three others counted, it is refused too.
	wantStatus(t, "retry of a failed reply", must(e.l.Once(e.ctx, replyKey("c", 101), count(&ran, 101))), ledger.StatusRefused, ledger.ReasonRateLimited)
	// The pending claim still settles: the cap refuses new claims only.
	wantStatus(t, "settle of the pending reply", must(e.l.Settle(e.ctx, pending.Ref(), ledger.OutcomeCommitted, "ok", nil)), ledger.StatusExecuted, "")
	if ran.Load() != 1 {
		t.Fatalf("effects ran %d, want 1", ran.Load())
	}
	// No cap by default: the same scope history on a ledger without caps
	// takes a fourth reply.
	plain := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	wantStatus(t, "reply 4 without caps", must(plain.Once(e.ctx, replyKey("c", 4), count(&ran, 4))), ledger.StatusExecuted, "")
}

// With runs: a stale run hears that it is superseded, not rate_limited,
// and raises no escalation; a live run's refusal names it.
func testCapWithRuns(t *testing.T, newStore NewStore) {
	var ev events
	e := setup(t, newStore, ledger.Options{Caps: replyCap, Observe: ev.observe})
	var ran atomic.Int64
	var runs []*ledger.Run
	for i := 1; i <= 4; i++ {
		run := must(e.l.Begin(e.ctx, "thread", ledger.RunOptions{RunID: fmt.Sprintf("m%d", i)}))
		runs = append(runs, run)
		r := must(run.Once(e.ctx, "reply", map[string]int{"inReplyTo": i}, count(&ran, i)))
		if i <= 3 {
			wantStatus(t, fmt.Sprintf("run m%d", i), r, ledger.StatusExecuted, "")
		} else {
			wantStatus(t, "run m4", r, ledger.StatusRefused, ledger.ReasonRateLimited)
		}
		e.clock.Advance(time.Millisecond)
	}
	stale := must(runs[0].Once(e.ctx, "reply", map[string]string{"again": "yes"}, count(&ran, 0)))
	wantStatus(t, "stale run past the cap", stale, ledger.StatusRefused, ledger.ReasonSuperseded)
	got := ev.of("escalation")
	if len(got) != 1 || got[0].RunID != "m4" {
		t.Fatalf("escalation events %+v, want one naming run m4", got)
	}
	if list := must(e.l.Views().Escalations(e.ctx, 0)); len(list) != 1 || list[0].RunID != "m4" || list[0].Refused != 1 {
		t.Fatalf("escalations %+v", list)
	}
	if ran.Load() != 3 {
		t.Fatalf("effects ran %d, want 3", ran.Load())
	}
}

// Many goroutines race distinct replies on one capped scope: never more
// than Max run, every other claim is refused rate_limited, and the loop
// raises exactly one escalation.
func testCapRace(t *testing.T, newStore NewStore) {
	var ev events
	e := setup(t, newStore, ledger.Options{Caps: replyCap, Observe: ev.observe})
	const goroutines = 24
	var ran, returned atomic.Int64
	results := make([]ledger.Result, goroutines)
	errs := make([]error, goroutines)
	start, release := make(chan struct{}), make(chan struct{})
	// Every effect stays in flight until each goroutine has either
	// returned or entered its effect, so all the claims are decided while
	// the winners are still pending: pending attempts must count.
	held := func(ctx context.Context, c ledger.Call) (any, error) {
		ran.Add(1)
		<-release
		return "sent", nil
	}
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.l.Once(e.ctx, replyKey("race", i), held)
			returned.Add(1)
		}()
	}
	close(start)
	deadline := time.Now().Add(20 * time.Second)
	for returned.Load()+ran.Load() < goroutines && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	executed, limited := 0, 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		switch {
		case r.Status == ledger.StatusExecuted:
			executed++
		case r.Status == ledger.StatusRefused && r.Reason == ledger.ReasonRateLimited:
			limited++
		default:
			t.Errorf("goroutine %d: %s/%s", i, r.Status, r.Reason)
		}
	}
	if executed != 3 || ran.Load() != 3 || limited != goroutines-3 {
		t.Fatalf("%d executed (effect ran %d), %d rate_limited; want 3, 3, %d", executed, ran.Load(), limited, goroutines-3)
	}
	if n := len(ev.of("escalation")); n != 1 {
		t.Fatalf("%d escalation events, want 1", n)
	}
	list := must(e.l.Views().Escalations(e.ctx, 0))
	if len(list) != 1 || list[0].Refused != goroutines-3 {
		t.Fatalf("escalations %+v, want one with %d refusals", list, goroutines-3)
	}
}
