package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testRedeliveryStorm: ten deliveries of one run race; some crash in the
// middle of an effect (claimed, never settled). No effect may happen twice,
// and every refusal must be the fence at work.
func testRedeliveryStorm(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	steps := []string{"acknowledge", "reply", "tag"}
	var counts [3]atomic.Int64
	var superseded atomic.Int64
	var wg sync.WaitGroup
	gate := make(chan struct{}) // start together, so deliveries overlap
	for d := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			run, err := e.l.Begin(e.ctx, "conv-storm", ledger.RunOptions{RunID: "job-42", Mode: ledger.ModeIndependent})
			if err != nil {
				t.Error(err)
				return
			}
			crashes := d%3 == 0
			for i, step := range steps {
				payload := map[string]string{"message": "m1"}
				opts := ledger.OnceOptions{Conflict: ledger.ConflictNone}
				if crashes && i == 1 {
					c, err := run.Claim(e.ctx, step, payload, opts)
					if err != nil {
						t.Error(err)
					}
					if c.Acquired() {
						counts[i].Add(1) // the effect started; the worker dies before settling
					}
					return
				}
				r, err := run.Once(e.ctx, step, payload, count(&counts[i], step), opts)
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case r.Status == ledger.StatusRefused && r.Reason == ledger.ReasonSuperseded:
					superseded.Add(1)
					return
				case r.Status == ledger.StatusExecuted, r.Status == ledger.StatusReplayed, r.Status == ledger.StatusInFlight:
				default:
					t.Errorf("delivery %d step %s: unexpected %s/%s", run.Delivery, step, r.Status, r.Reason)
				}
			}
		}()
	}
	close(gate)
	wg.Wait()
	for i, step := range steps {
		if n := counts[i].Load(); n > 1 {
			t.Errorf("%s happened %d times", step, n)
		}
	}
	// Liveness: one more delivery finishes the job. Every step is then done
	// exactly once; reply may be held by a crashed delivery's claim, which
	// counts as done (its worker started the effect).
	run := must(e.l.Begin(e.ctx, "conv-storm", ledger.RunOptions{RunID: "job-42", Mode: ledger.ModeIndependent}))
	for i, step := range steps {
		r := must(run.Once(e.ctx, step, map[string]string{"message": "m1"}, count(&counts[i], step), ledger.OnceOptions{Conflict: ledger.ConflictNone}))
		switch {
		case r.OK():
		case r.Status == ledger.StatusInFlight && i == 1:
		default:
			t.Errorf("final delivery, step %s: %s/%s", step, r.Status, r.Reason)
		}
		if n := counts[i].Load(); n != 1 {
			t.Errorf("%s happened %d times after the storm, want exactly 1", step, n)
		}
	}
	// A delivery taken over can no longer claim anything.
	run = must(e.l.Begin(e.ctx, "conv-storm", ledger.RunOptions{RunID: "job-42"}))
	stale := e.l.RunRef("conv-storm", "job-42", run.Token-1)
	r := must(stale.Once(e.ctx, "late", nil, count(&counts[0], nil), ledger.OnceOptions{Conflict: ledger.ConflictNone}))
	wantStatus(t, "claim by an older delivery", r, ledger.StatusRefused, ledger.ReasonSuperseded)
	t.Logf("storm: %d superseded refusals, effects %d/%d/%d", superseded.Load(), counts[0].Load(), counts[1].Load(), counts[2].Load())
}

// testSupersededDeliveries: deliveries begin one after another; each
// earlier delivery is refused superseded from then on, and the effect the
// crashed deliveries left pending is neither repeated nor lost.
func testSupersededDeliveries(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var replies atomic.Int64
	var prev *ledger.Run
	for d := 1; d <= 10; d++ {
		run := must(e.l.Begin(e.ctx, "conv-seq", ledger.RunOptions{RunID: "job-7"}))
		if run.Delivery != d || !run.CanWrite {
			t.Fatalf("delivery %d: got delivery %d, canWrite %v", d, run.Delivery, run.CanWrite)
		}
		if prev != nil {
			r := must(prev.Once(e.ctx, "note", map[string]int{"d": d}, count(&replies, nil)))
			wantStatus(t, fmt.Sprintf("delivery %d after delivery %d began", prev.Delivery, d), r, ledger.StatusRefused, ledger.ReasonSuperseded)
			if ok := must(prev.Heartbeat(e.ctx)); ok {
				t.Fatalf("heartbeat of a superseded delivery said it may go on")
			}
		}
		if d <= 3 {
			// Deliveries 1-3 crash mid-reply: 1 claims, 2 and 3 find it in flight.
			c := must(run.Claim(e.ctx, "reply", map[string]string{"to": "m1"}, ledger.OnceOptions{}))
			if d == 1 && !c.Acquired() || d > 1 && c.Status != ledger.StatusInFlight {
				t.Fatalf("delivery %d: reply claim %s", d, c.Status)
			}
		}
		prev = run
	}
	e.clock.Advance(ledger.DefaultPendingTTL)
	r := must(prev.Once(e.ctx, "reply", map[string]string{"to": "m1"}, count(&replies, nil)))
	wantStatus(t, "reply abandoned by a crashed delivery", r, ledger.StatusAmbiguous, "")
	if replies.Load() != 0 {
		t.Fatalf("an effect ran %d times where none should", replies.Load())
	}
}

// testSequenceDiagram walks the seed's sequence diagram step by step.
func testSequenceDiagram(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	scope := "conversation-1"
	runA := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "message-1"}))
	claimA := must(runA.Claim(e.ctx, "reply", map[string]string{"inReplyTo": "m1"}, ledger.OnceOptions{Summary: "Your order ships today"}))
	if !claimA.Acquired() {
		t.Fatalf("A's claim: %s", claimA.Status)
	}
	e.clock.Advance(time.Second)
	runB := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "message-2"}))
	if !runB.CanWrite {
		t.Fatalf("B cannot write: %s", runB.Reason)
	}
	var sent atomic.Int64
	r := must(runB.Once(e.ctx, "reply", map[string]any{"answers": []string{"m1", "m2"}}, count(&sent, nil)))
	wantStatus(t, "B while A's reply is pending", r, ledger.StatusRefused, ledger.ReasonConversationChanged)
	if len(r.Conflicts) != 1 || r.Conflicts[0].Summary != "Your order ships today" || r.Conflicts[0].State != ledger.StatePending {
		t.Fatalf("conflicts = %+v, want A's pending reply with its summary", r.Conflicts)
	}
	settled := must(e.l.Settle(e.ctx, claimA.Ref(), ledger.OutcomeCommitted, map[string]string{"messageId": "out-1"}, nil))
	wantStatus(t, "A settles", settled, ledger.StatusExecuted, "")
	// B re-read the conversation: m1 is answered, so it answers m2 only.
	r = must(runB.Once(e.ctx, "reply", map[string]any{"answers": []string{"m2"}}, count(&sent, "out-2")))
	wantStatus(t, "B after re-reading", r, ledger.StatusExecuted, "")
	r = must(runA.Once(e.ctx, "add_tag", map[string]string{"tag": "shipping"}, count(&sent, nil)))
	wantStatus(t, "A's later claim", r, ledger.StatusRefused, ledger.ReasonSuperseded)
	if sent.Load() != 1 {
		t.Fatalf("effects ran %d times, want 1 (B's reply)", sent.Load())
	}
	hist := must(e.l.Views().History(e.ctx, scope))
	if len(hist) != 2 || hist[0].RunID != "message-1" || hist[1].RunID != "message-2" {
		t.Fatalf("history = %+v", hist)
	}
}

func testSupersedeRules(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	at := start.Add(time.Minute)
	// Peers: contextAt in the same millisecond.
	a := must(e.l.Begin(e.ctx, "peers", ledger.RunOptions{RunID: "a", ContextAt: at}))
	b := must(e.l.Begin(e.ctx, "peers", ledger.RunOptions{RunID: "b", ContextAt: at.Add(999 * time.Microsecond)}))
	if !a.CanWrite || !b.CanWrite {
		t.Fatalf("peers: a %v/%s, b %v/%s", a.CanWrite, a.Reason, b.CanWrite, b.Reason)
	}
	wantStatus(t, "peer a", must(a.Once(e.ctx, "reply", "x", count(&n, nil), ledger.OnceOptions{Conflict: ledger.ConflictNone})), ledger.StatusExecuted, "")
	wantStatus(t, "peer b", must(b.Once(e.ctx, "tag", "y", count(&n, nil), ledger.OnceOptions{Conflict: ledger.ConflictNone})), ledger.StatusExecuted, "")
	// Peers still may not answer the same thing twice: b sees a's reply landed after its context.
	wantStatus(t, "peer b replying again", must(b.Once(e.ctx, "reply", "reworded", count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)

	// A newer run that ended without writing does not supersede.
	old := must(e.l.Begin(e.ctx, "quiet", ledger.RunOptions{RunID: "old", ContextAt: at}))
	newer := must(e.l.Begin(e.ctx, "quiet", ledger.RunOptions{RunID: "newer", ContextAt: at.Add(time.Second)}))
	wantStatus(t, "old while newer is live", must(old.Once(e.ctx, "reply", "1", count(&n, nil))), ledger.StatusRefused, ledger.ReasonSuperseded)
	noErr(t, newer.End(e.ctx, "nothing to say"))
	wantStatus(t, "old after newer ended silently", must(old.Once(e.ctx, "reply", "1", count(&n, nil))), ledger.StatusExecuted, "")

	// A newer run that wrote and ended still supersedes.
	first := must(e.l.Begin(e.ctx, "loud", ledger.RunOptions{RunID: "first", ContextAt: at}))
	second := must(e.l.Begin(e.ctx, "loud", ledger.RunOptions{RunID: "second", ContextAt: at.Add(time.Second)}))
	wantStatus(t, "second writes", must(second.Once(e.ctx, "reply", "2", count(&n, nil))), ledger.StatusExecuted, "")
	noErr(t, second.End(e.ctx, "done"))
	wantStatus(t, "first after second wrote", must(first.Once(e.ctx, "tag", "t", count(&n, nil))), ledger.StatusRefused, ledger.ReasonSuperseded)

	// An older run that begins after a newer one cannot write at all.
	late := must(e.l.Begin(e.ctx, "loud", ledger.RunOptions{RunID: "late", ContextAt: at.Add(-time.Hour)}))
	if late.CanWrite || late.Reason != ledger.ReasonSuperseded {
		t.Fatalf("older run beginning late: canWrite %v reason %s", late.CanWrite, late.Reason)
	}
}

func testExclusive(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{LeaseTTL: time.Minute})
	var n atomic.Int64
	a := must(e.l.Begin(e.ctx, "ticket", ledger.RunOptions{RunID: "a", Mode: ledger.ModeExclusive}))
	b := must(e.l.Begin(e.ctx, "ticket", ledger.RunOptions{RunID: "b", Mode: ledger.ModeExclusive}))
	if !a.CanWrite || b.CanWrite || b.Reason != ledger.ReasonBusy {
		t.Fatalf("a %v/%s, b %v/%s; want a holding, b busy", a.CanWrite, a.Reason, b.CanWrite, b.Reason)
	}
	opts := ledger.OnceOptions{Conflict: ledger.ConflictNone}
	wantStatus(t, "b while a holds the lease", must(b.Once(e.ctx, "work", 1, count(&n, nil), opts)), ledger.StatusRefused, ledger.ReasonBusy)
	e.clock.Advance(50 * time.Second)
	if !must(a.Heartbeat(e.ctx)) {
		t.Fatal("holder's heartbeat refused")
	}
	e.clock.Advance(50 * time.Second) // 100 s after begin, 50 s after the heartbeat: still held
	wantStatus(t, "b after a's heartbeat", must(b.Once(e.ctx, "work", 1, count(&n, nil), opts)), ledger.StatusRefused, ledger.ReasonBusy)
	e.clock.Advance(11 * time.Second)
	wantStatus(t, "b after the lease expired", must(b.Once(e.ctx, "work", 1, count(&n, nil), opts)), ledger.StatusExecuted, "")
	wantStatus(t, "a after being taken over", must(a.Once(e.ctx, "work2", 1, count(&n, nil), opts)), ledger.StatusRefused, ledger.ReasonSuperseded)
	if must(a.Heartbeat(e.ctx)) {
		t.Fatal("heartbeat of a taken-over holder said it may go on")
	}
	if n.Load() != 1 {
		t.Fatalf("effects ran %d times, want 1", n.Load())
	}
}

func testCancelEnd(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	run := must(e.l.Begin(e.ctx, "c", ledger.RunOptions{RunID: "r1"}))
	noErr(t, e.l.Cancel(e.ctx, "c", "r1"))
	wantStatus(t, "cancelled run", must(run.Once(e.ctx, "reply", 1, count(&n, nil))), ledger.StatusRefused, ledger.ReasonRunCancelled)
	again := must(e.l.Begin(e.ctx, "c", ledger.RunOptions{RunID: "r1"}))
	if again.CanWrite || again.Reason != ledger.ReasonRunCancelled {
		t.Fatalf("resuming a cancelled run: %v/%s", again.CanWrite, again.Reason)
	}
	ended := must(e.l.Begin(e.ctx, "e", ledger.RunOptions{RunID: "r2"}))
	noErr(t, ended.End(e.ctx, "answered"))
	must(0, ended.End(e.ctx, "answered")) // ending twice is harmless
	wantStatus(t, "ended run", must(ended.Once(e.ctx, "reply", 1, count(&n, nil))), ledger.StatusRefused, ledger.ReasonRunEnded)
	if n.Load() != 0 {
		t.Fatal("a cancelled or ended run ran an effect")
	}
}

func testConflictModes(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	for _, tc := range []struct {
		mode       ledger.ConflictMode
		sameIntent ledger.Status
		other      ledger.Status
	}{
		{ledger.ConflictAny, ledger.StatusRefused, ledger.StatusRefused},
		{ledger.ConflictSameIntent, ledger.StatusRefused, ledger.StatusExecuted},
		{ledger.ConflictNone, ledger.StatusExecuted, ledger.StatusExecuted},
	} {
		// Two readers, one per question, so that the first refusal's
		// acknowledgement cannot answer the second.
		scope := "conflict-" + string(tc.mode)
		reader := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "reader", Mode: ledger.ModeIndependent}))
		other := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "other", Mode: ledger.ModeIndependent}))
		e.clock.Advance(time.Millisecond)
		writer := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "writer", Mode: ledger.ModeIndependent}))
		must(writer.Once(e.ctx, "reply", "hello", count(&n, nil)))
		opts := ledger.OnceOptions{Conflict: tc.mode}
		got := must(reader.Once(e.ctx, "reply", "hi there", count(&n, nil), opts))
		if got.Status != tc.sameIntent {
			t.Errorf("%s, same intent: %s/%s, want %s", tc.mode, got.Status, got.Reason, tc.sameIntent)
		}
		got = must(other.Once(e.ctx, "tag", "vip", count(&n, nil), opts))
		if got.Status != tc.other {
			t.Errorf("%s, other intent: %s/%s, want %s", tc.mode, got.Status, got.Reason, tc.other)
		}
	}

	// The refusal records an acknowledgement: the next attempt goes through,
	// while a write the run has not seen yet is still caught.
	r1 := must(e.l.Begin(e.ctx, "acks", ledger.RunOptions{RunID: "r1", Mode: ledger.ModeIndependent}))
	r2 := must(e.l.Begin(e.ctx, "acks", ledger.RunOptions{RunID: "r2", Mode: ledger.ModeIndependent}))
	must(r2.Once(e.ctx, "reply", "from r2", count(&n, nil)))
	wantStatus(t, "first try", must(r1.Once(e.ctx, "reply", "from r1", count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)
	must(r2.Once(e.ctx, "reply", "r2 again", count(&n, nil), ledger.OnceOptions{Conflict: ledger.ConflictNone}))
	wantStatus(t, "after the ack, with a new write", must(r1.Once(e.ctx, "reply", "from r1", count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)
	wantStatus(t, "after both acks", must(r1.Once(e.ctx, "reply", "from r1", count(&n, nil))), ledger.StatusExecuted, "")

	// Ack up front: the caller says it has re-read.
	r3 := must(e.l.Begin(e.ctx, "acks2", ledger.RunOptions{RunID: "r3", Mode: ledger.ModeIndependent}))
	r4 := must(e.l.Begin(e.ctx, "acks2", ledger.RunOptions{RunID: "r4", Mode: ledger.ModeIndependent}))
	must(r4.Once(e.ctx, "reply", "x", count(&n, nil)))
	wantStatus(t, "with Ack", must(r3.Once(e.ctx, "reply", "y", count(&n, nil), ledger.OnceOptions{Ack: true})), ledger.StatusExecuted, "")
}

func testBeginClaim(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	key := ledger.Key{Scope: "stripe:evt_1", Intent: "deliver", Payload: map[string]string{"source": "stripe", "eventId": "evt_1"}}
	req := ledger.ClaimRequest{Key: key, Conflict: ledger.ConflictNone, PendingTTL: 15 * time.Second, Redeliverable: true, MaxAttempts: 1000}
	ro := ledger.RunOptions{RunID: "stripe:evt_1", Mode: ledger.ModeIndependent}
	run, c := beginClaim(t, e, ro, req)
	if !c.Acquired() || run == nil || run.Delivery != 1 {
		t.Fatalf("first delivery: %s, run %+v", c.Status, run)
	}
	dup, c2 := beginClaim(t, e, ro, req)
	if c2.Status != ledger.StatusInFlight || dup != nil {
		t.Fatalf("duplicate while in flight: %s, run %+v", c2.Status, dup)
	}
	// The duplicate did not take the run over: the first delivery can still write.
	var n atomic.Int64
	wantStatus(t, "first delivery's agent write", must(run.Once(e.ctx, "reply", 1, count(&n, nil))), ledger.StatusExecuted, "")
	must(e.l.Settle(e.ctx, c.Ref(), ledger.OutcomeNotApplied, nil, fmt.Errorf("agent answered 500")))
	run2, c3 := beginClaim(t, e, ro, req)
	if !c3.Acquired() || run2.Delivery != 2 || run2.Token <= run.Token || c3.Attempt != 2 {
		t.Fatalf("retry after failure: %s delivery %d attempt %d", c3.Status, run2.Delivery, c3.Attempt)
	}
	// The instance forwarding delivery 2 dies; after the short TTL the next retry redelivers.
	e.clock.Advance(16 * time.Second)
	run3, c4 := beginClaim(t, e, ro, req)
	if !c4.Acquired() || run3.Delivery != 3 {
		t.Fatalf("redelivery after abandonment: %s", c4.Status)
	}
	late := must(e.l.Settle(e.ctx, c3.Ref(), ledger.OutcomeCommitted, nil, nil))
	if !late.LateSettle {
		t.Fatal("settle of the abandoned attempt not flagged late")
	}
	must(e.l.Settle(e.ctx, c4.Ref(), ledger.OutcomeCommitted, nil, nil))
	_, c5 := beginClaim(t, e, ro, req)
	if c5.Status != ledger.StatusReplayed {
		t.Fatalf("after delivery: %s, want replayed", c5.Status)
	}
}

func beginClaim(t *testing.T, e *env, ro ledger.RunOptions, req ledger.ClaimRequest) (*ledger.Run, ledger.Claim) {
	t.Helper()
	run, c, err := e.l.BeginClaim(e.ctx, ro, req)
	if err != nil {
		t.Fatal(err)
	}
	return run, c
}

// A delivery that was taken over cannot end the run under its successor.
func testStaleEnd(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	first := must(e.l.Begin(e.ctx, "stale-end", ledger.RunOptions{RunID: "job"}))
	second := must(e.l.Begin(e.ctx, "stale-end", ledger.RunOptions{RunID: "job"}))
	noErr(t, first.End(e.ctx, "done"))
	wantStatus(t, "current delivery after a stale End", must(second.Once(e.ctx, "reply", 1, count(&n, nil))), ledger.StatusExecuted, "")
	noErr(t, second.End(e.ctx, "done"))
	wantStatus(t, "after the current delivery ended", must(second.Once(e.ctx, "tag", 1, count(&n, nil))), ledger.StatusRefused, ledger.ReasonRunEnded)
}
