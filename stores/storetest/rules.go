package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// These cases pin the ledger rules of issue #15: each one failed on the
// code before its fix, or kills a mutation the rest of the suite let live.

// testAbandonedKept: a claim whose worker died reads as ambiguous after its
// TTL, and no amount of retention makes the ledger forget it.
func testAbandonedKept(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: time.Hour, PendingTTL: time.Minute})
	var n atomic.Int64
	key := ledger.Key{Scope: "abandoned", Intent: "refund", Payload: 1}
	must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: key}))
	// The store must not expire the document on its own either.
	if doc := docFields(t, must(e.store.Read(e.ctx, "abandoned"))); doc["expiresAt"] != nil {
		t.Fatalf("a document holding a claim that may turn ambiguous expires at %v", doc["expiresAt"])
	}
	e.clock.Advance(3 * time.Hour) // well past deadline + retention
	// Another write prunes the document; the abandoned claim must survive it.
	must(e.l.Once(e.ctx, ledger.Key{Scope: "abandoned", Intent: "note", Payload: 1}, count(&n, nil)))
	e.clock.Advance(3 * time.Hour)
	if got := must(e.l.Views().Ambiguous(e.ctx, 10)); len(got) != 1 || got[0].Intent != "refund" {
		t.Fatalf("ambiguous list after retention: %+v, want the abandoned refund", got)
	}
	wantStatus(t, "claim after retention", must(e.l.Once(e.ctx, key, count(&n, nil))), ledger.StatusAmbiguous, "")
	if n.Load() != 1 {
		t.Fatalf("effects ran %d times, want 1 (the note)", n.Load())
	}
	// Read as ambiguous and written back as such, it stays too.
	e.clock.Advance(3 * time.Hour)
	must(e.l.Once(e.ctx, ledger.Key{Scope: "abandoned", Intent: "note", Payload: 2}, count(&n, nil)))
	e.clock.Advance(3 * time.Hour)
	wantStatus(t, "stored ambiguous after retention", must(e.l.Once(e.ctx, key, count(&n, nil))), ledger.StatusAmbiguous, "")
	if got := must(e.l.Views().Ambiguous(e.ctx, 10)); len(got) != 1 {
		t.Fatalf("ambiguous list: %+v", got)
	}
	// A document an older build wrote with an expiry, holding a pending
	// claim, is not forgotten when that expiry passes.
	legacy := ledger.Key{Scope: "abandoned-legacy", Intent: "refund", Payload: 1}
	must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: legacy}))
	doc := docFields(t, must(e.store.Read(e.ctx, "abandoned-legacy")))
	doc["expiresAt"] = e.clock.Now().Add(2 * time.Hour).Format(time.RFC3339Nano)
	raw, _ := json.Marshal(doc)
	noErr(t, e.store.Transact(e.ctx, "abandoned-legacy", func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: raw, ReviewAt: e.clock.Now().Add(time.Minute)}, nil
	}))
	e.clock.Advance(3 * time.Hour)
	wantStatus(t, "legacy document past its expiry", must(e.l.Once(e.ctx, legacy, count(&n, nil))), ledger.StatusAmbiguous, "")
}

func docFields(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("stored document %q: %v", raw, err)
	}
	return m
}

// testResolvedThenLateCommit: an operator said an abandoned attempt did not
// apply, then its worker reports it did. The worker's word wins: the entry
// is committed, flagged late, and the effect is not redone.
func testResolvedThenLateCommit(t *testing.T, newStore NewStore) {
	var events []ledger.Event
	e := setup(t, newStore, ledger.Options{PendingTTL: time.Minute, Observe: func(ev ledger.Event) { events = append(events, ev) }})
	var n atomic.Int64
	key := ledger.Key{Scope: "resolve-late", Intent: "refund", Payload: 7}
	reader := must(e.l.Begin(e.ctx, "resolve-late", ledger.RunOptions{RunID: "reader", Mode: ledger.ModeIndependent}))
	c := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: key}))
	e.clock.Advance(2 * time.Minute)
	must(e.l.Resolve(e.ctx, resolution(key, ledger.OutcomeNotApplied)))
	s := must(e.l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, "re_9", nil))
	// The resolution's failure was not one: it no longer counts against max_attempts.
	if !s.LateSettle || s.Status != ledger.StatusExecuted || !s.Entry.LateSettle || s.Entry.Failures != 0 {
		t.Fatalf("late committed settle after a not_applied resolution: %+v", s)
	}
	if last := events[len(events)-1]; last.Type != "late_settle" {
		t.Fatalf("last event %q, want late_settle", last.Type)
	}
	r := must(e.l.Once(e.ctx, key, count(&n, "again")))
	wantStatus(t, "claim after the late settle", r, ledger.StatusReplayed, "")
	assertJSON(t, r.Value, `"re_9"`)
	if !r.Entry.LateSettle || n.Load() != 0 {
		t.Fatalf("entry %+v, effect ran %d times", r.Entry, n.Load())
	}
	// The refund happened after the reader's context: it has landed for the reader.
	wantStatus(t, "run begun before the refund", must(reader.Once(e.ctx, "note", 1, count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)
	// A late not_applied agrees with the resolution and changes nothing.
	k2 := ledger.Key{Scope: "resolve-late", Intent: "refund", Payload: 8}
	c2 := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: k2}))
	e.clock.Advance(2 * time.Minute)
	must(e.l.Resolve(e.ctx, resolution(k2, ledger.OutcomeNotApplied)))
	s2 := must(e.l.Settle(e.ctx, c2.Ref(), ledger.OutcomeNotApplied, nil, errors.New("declined")))
	if !s2.LateSettle || s2.Status != ledger.StatusFailed || s2.Entry.Failures != 1 {
		t.Fatalf("late not_applied settle: %+v", s2)
	}
}

// testExpiredRedeliverable: a crashed gateway's deliver claim stops
// blocking the scope once it has expired, and is pruned like settled work.
func testExpiredRedeliverable(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: time.Hour})
	var n atomic.Int64
	scope := "conv-crashed-gw"
	deliver := ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: "evt_1"},
		Conflict: ledger.ConflictNone, PendingTTL: 15 * time.Second, Redeliverable: true}
	ro := ledger.RunOptions{RunID: "evt_1", Mode: ledger.ModeIndependent}
	run, c := beginClaim(t, e, ro, deliver)
	if !c.Acquired() || run == nil {
		t.Fatalf("deliver claim: %s", c.Status)
	}
	other := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "evt_2", Mode: ledger.ModeIndependent}))
	wantStatus(t, "write while the deliver claim is live", must(other.Once(e.ctx, "reply", 1, count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)
	e.clock.Advance(16 * time.Second)
	fresh := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "evt_3", Mode: ledger.ModeIndependent}))
	wantStatus(t, "write after the deliver claim expired", must(fresh.Once(e.ctx, "reply", 2, count(&n, nil))), ledger.StatusExecuted, "")
	if got := must(e.l.Views().Ambiguous(e.ctx, 10)); len(got) != 0 {
		t.Fatalf("an expired redeliverable claim is listed ambiguous: %+v", got)
	}
	e.clock.Advance(2 * time.Hour)
	must(e.l.Once(e.ctx, ledger.Key{Scope: scope, Intent: "note", Payload: 1}, count(&n, nil)))
	for _, h := range must(e.l.Views().History(e.ctx, scope)) {
		if h.Intent == "deliver" {
			t.Fatalf("expired deliver claim kept past retention: %+v", h)
		}
	}
}

// testLeaseTTLKept: heartbeats and claims renew a run's lease with its own
// TTL, not the ledger default.
func testLeaseTTLKept(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{LeaseTTL: time.Minute})
	var n atomic.Int64
	opts := ledger.OnceOptions{Conflict: ledger.ConflictNone}
	a := must(e.l.Begin(e.ctx, "lease-ttl", ledger.RunOptions{RunID: "a", Mode: ledger.ModeExclusive, LeaseTTL: 10 * time.Minute}))
	b := must(e.l.Begin(e.ctx, "lease-ttl", ledger.RunOptions{RunID: "b", Mode: ledger.ModeExclusive}))
	e.clock.Advance(5 * time.Minute)
	if !must(a.Heartbeat(e.ctx)) {
		t.Fatal("holder's heartbeat refused")
	}
	e.clock.Advance(5 * time.Minute) // 5 min after the heartbeat: held under a's 10 min TTL
	wantStatus(t, "b after a's heartbeat", must(b.Once(e.ctx, "work", 1, count(&n, nil), opts)), ledger.StatusRefused, ledger.ReasonBusy)
	wantStatus(t, "a's claim", must(a.Once(e.ctx, "work", 2, count(&n, nil), opts)), ledger.StatusExecuted, "")
	e.clock.Advance(5 * time.Minute) // 5 min after a's claim
	wantStatus(t, "b after a's claim", must(b.Once(e.ctx, "work", 1, count(&n, nil), opts)), ledger.StatusRefused, ledger.ReasonBusy)
	e.clock.Advance(6 * time.Minute)
	wantStatus(t, "b after a's lease ran out", must(b.Once(e.ctx, "work", 1, count(&n, nil), opts)), ledger.StatusExecuted, "")
}

// testContextAtOutOfRange: a contextAt the store could never encode (or
// absurdly far ahead) is invalid input and changes nothing.
func testContextAtOutOfRange(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	must(e.l.Once(e.ctx, ledger.Key{Scope: "ctx-range", Intent: "note", Payload: 1}, count(&n, nil)))
	before := must(e.store.Read(e.ctx, "ctx-range"))
	micros := start.UnixMicro()
	for _, at := range []time.Time{time.UnixMilli(micros), start.Add(ledger.MaxContextAhead + time.Hour), time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := e.l.Begin(e.ctx, "ctx-range", ledger.RunOptions{RunID: "r", ContextAt: at}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Begin with contextAt %v: %v, want ErrInvalid", at, err)
		}
		req := ledger.ClaimRequest{Key: ledger.Key{Scope: "ctx-range", Intent: "deliver", Payload: 1}, Conflict: ledger.ConflictNone}
		if _, _, err := e.l.BeginClaim(e.ctx, ledger.RunOptions{RunID: "r", ContextAt: at}, req); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("BeginClaim with contextAt %v: %v, want ErrInvalid", at, err)
		}
	}
	assertJSON(t, must(e.store.Read(e.ctx, "ctx-range")), string(before))
	ok := must(e.l.Begin(e.ctx, "ctx-range", ledger.RunOptions{RunID: "r2", ContextAt: start.Add(time.Minute)}))
	if !ok.CanWrite {
		t.Fatalf("a slightly ahead contextAt: %s", ok.Reason)
	}
}

// testExclusiveRedelivery: a run that once lost its lease may take it again
// with a fresh delivery once the lease is free.
func testExclusiveRedelivery(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{LeaseTTL: time.Minute})
	var n atomic.Int64
	opts := ledger.OnceOptions{Conflict: ledger.ConflictNone}
	must(e.l.Begin(e.ctx, "lease-again", ledger.RunOptions{RunID: "a", Mode: ledger.ModeExclusive}))
	e.clock.Advance(2 * time.Minute)
	b := must(e.l.Begin(e.ctx, "lease-again", ledger.RunOptions{RunID: "b", Mode: ledger.ModeExclusive}))
	if !b.CanWrite {
		t.Fatalf("b after a's lease expired: %s", b.Reason)
	}
	a2 := must(e.l.Begin(e.ctx, "lease-again", ledger.RunOptions{RunID: "a", Mode: ledger.ModeExclusive}))
	if a2.CanWrite || a2.Reason != ledger.ReasonBusy {
		t.Fatalf("a's redelivery while b holds: %v/%s, want busy", a2.CanWrite, a2.Reason)
	}
	noErr(t, b.End(e.ctx, "done"))
	wantStatus(t, "a's redelivery after the lease is free", must(a2.Once(e.ctx, "work", 1, count(&n, nil), opts)), ledger.StatusExecuted, "")
	a3 := must(e.l.Begin(e.ctx, "lease-again", ledger.RunOptions{RunID: "a", Mode: ledger.ModeExclusive}))
	if !a3.CanWrite {
		t.Fatalf("a's next delivery: %s", a3.Reason)
	}
}

// testBeginClaimEndedRun: BeginClaim on a run that has ended or been
// cancelled yields no claim, so the gateway cannot forward.
func testBeginClaimEndedRun(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	for _, tc := range []struct {
		scope  string
		finish func(scope string) error
		reason ledger.Reason
	}{
		{"ended-bc", func(s string) error { return e.l.End(e.ctx, s, "job", "done") }, ledger.ReasonRunEnded},
		{"cancelled-bc", func(s string) error { return e.l.Cancel(e.ctx, s, "job") }, ledger.ReasonRunCancelled},
	} {
		must(e.l.Begin(e.ctx, tc.scope, ledger.RunOptions{RunID: "job", Mode: ledger.ModeIndependent}))
		noErr(t, tc.finish(tc.scope))
		req := ledger.ClaimRequest{Key: ledger.Key{Scope: tc.scope, Intent: "deliver", Payload: "e"}, Conflict: ledger.ConflictNone, Redeliverable: true}
		before := must(e.store.Read(e.ctx, tc.scope))
		run, c := beginClaim(t, e, ledger.RunOptions{RunID: "job", Mode: ledger.ModeIndependent}, req)
		if c.Acquired() || run != nil || c.Status != ledger.StatusRefused || c.Reason != tc.reason {
			t.Fatalf("%s: BeginClaim on a finished run: %s/%s run %+v", tc.scope, c.Status, c.Reason, run)
		}
		assertJSON(t, must(e.store.Read(e.ctx, tc.scope)), string(before))
	}
}

// testCorruptDocument: a stored document with a null entry or run is
// reported as corrupt, never a panic.
func testCorruptDocument(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	for scope, doc := range map[string]string{
		"null-entry": `{"format":1,"scope":"null-entry","seq":0,"token":5,"entries":{"x":null}}`,
		"null-run":   `{"format":1,"scope":"null-run","seq":0,"token":5,"runs":{"r":null}}`,
		"bad-shape":  `{"format":1,"scope":"bad-shape","seq":0,"token":5,"entries":[1]}`,
	} {
		noErr(t, e.store.Transact(e.ctx, scope, func([]byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(doc), TTL: time.Hour}, nil
		}))
		if _, err := e.l.Views().History(e.ctx, scope); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("%s: history: %v, want ErrCorrupt", scope, err)
		}
		var n atomic.Int64
		if _, err := e.l.Once(e.ctx, ledger.Key{Scope: scope, Intent: "x", Payload: 1}, count(&n, nil)); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("%s: once: %v, want ErrCorrupt", scope, err)
		}
		if _, err := e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "r"}); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("%s: begin: %v, want ErrCorrupt", scope, err)
		}
	}
}

// testContextMapping: contextAt maps to the writes a run has seen. A write
// that landed before the context is seen; one after it is not.
func testContextMapping(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	w := must(e.l.Begin(e.ctx, "mapping", ledger.RunOptions{RunID: "w", Mode: ledger.ModeIndependent}))
	wantStatus(t, "first write", must(w.Once(e.ctx, "reply", 1, count(&n, nil))), ledger.StatusExecuted, "")
	landed := e.clock.Now()
	e.clock.Advance(time.Second)
	after := must(e.l.Begin(e.ctx, "mapping", ledger.RunOptions{RunID: "after", Mode: ledger.ModeIndependent, ContextAt: landed.Add(time.Millisecond)}))
	wantStatus(t, "run whose context saw the write", must(after.Once(e.ctx, "reply", 2, count(&n, nil), ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})), ledger.StatusExecuted, "")
	before := must(e.l.Begin(e.ctx, "mapping", ledger.RunOptions{RunID: "before", Mode: ledger.ModeIndependent, ContextAt: landed.Add(-time.Millisecond)}))
	wantStatus(t, "run whose context predates the write", must(before.Once(e.ctx, "tag", 3, count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)
}

// testContextMappingSkew: two instances share the store, one with a clock
// ahead. A write the run cannot have seen must not count as seen because a
// later write was stamped with an earlier time.
func testContextMappingSkew(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	fast := NewClock(start.Add(10 * time.Second))
	lFast := ledger.New(e.store, ledger.Options{Clock: fast.Now, ReplayCache: -1})
	var n atomic.Int64
	scope := "skew"
	a := must(lFast.Begin(e.ctx, scope, ledger.RunOptions{RunID: "a", Mode: ledger.ModeIndependent}))
	wantStatus(t, "write on the fast instance", must(a.Once(e.ctx, "reply", 1, count(&n, nil))), ledger.StatusExecuted, "")
	e.clock.Advance(5 * time.Second)
	b := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "b", Mode: ledger.ModeIndependent}))
	wantStatus(t, "write on the true instance", must(b.Once(e.ctx, "tag", 1, count(&n, nil), ledger.OnceOptions{Conflict: ledger.ConflictNone})), ledger.StatusExecuted, "")
	e.clock.Advance(2 * time.Second)
	// Context captured at true time +7 s: after b's tag (stamped +5 s), but
	// a's reply carries +10 s and sequence-wise came first. It is unseen.
	c := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "c", Mode: ledger.ModeIndependent, ContextAt: start.Add(7 * time.Second)}))
	r := must(c.Once(e.ctx, "reply", 2, count(&n, nil), ledger.OnceOptions{Conflict: ledger.ConflictSameIntent}))
	wantStatus(t, "reply whose context may not have seen the fast write", r, ledger.StatusRefused, ledger.ReasonConversationChanged)
}

// testEarlierDeliveryConflicts: a write an earlier delivery of the same run
// left pending conflicts with the run's new delivery.
func testEarlierDeliveryConflicts(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	d1 := must(e.l.Begin(e.ctx, "earlier", ledger.RunOptions{RunID: "job", Mode: ledger.ModeIndependent}))
	if c := must(d1.Claim(e.ctx, "reply", 1, ledger.OnceOptions{})); !c.Acquired() {
		t.Fatalf("first delivery's claim: %s", c.Status)
	}
	d2 := must(e.l.Begin(e.ctx, "earlier", ledger.RunOptions{RunID: "job", Mode: ledger.ModeIndependent}))
	wantStatus(t, "second delivery while the first's write is pending", must(d2.Once(e.ctx, "tag", 1, count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)
	// Its own write, by contrast, never conflicts with itself.
	wantStatus(t, "second delivery again", must(d2.Once(e.ctx, "tag", 1, count(&n, nil))), ledger.StatusExecuted, "")
	wantStatus(t, "second delivery's next write", must(d2.Once(e.ctx, "note", 1, count(&n, nil))), ledger.StatusExecuted, "")
}

// testTokenSurvivesExpiry: a document that expired as a whole still hands
// out fencing tokens above every one it handed out before.
func testTokenSurvivesExpiry(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	high := uint64(start.Add(1000*time.Hour).UnixMilli()) + 42
	doc := `{"format":1,"scope":"expired-token","seq":3,"token":` + itoa(high) + `,"expiresAt":"` + start.Add(-time.Hour).Format(time.RFC3339Nano) + `"}`
	noErr(t, e.store.Transact(e.ctx, "expired-token", func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(doc), TTL: time.Hour}, nil
	}))
	run := must(e.l.Begin(e.ctx, "expired-token", ledger.RunOptions{RunID: "r"}))
	if run.Token <= high {
		t.Fatalf("token after expiry %d, want above %d", run.Token, high)
	}
}

// testMaxAttemptsCountsFailures: max_attempts limits attempts known not to
// have applied; an abandoned redeliverable attempt does not count.
func testMaxAttemptsCountsFailures(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	req := ledger.ClaimRequest{Key: ledger.Key{Scope: "attempts", Intent: "deliver", Payload: 1},
		PendingTTL: 10 * time.Second, Redeliverable: true, MaxAttempts: 2, Conflict: ledger.ConflictNone}
	must(e.l.Claim(e.ctx, req))
	e.clock.Advance(11 * time.Second) // abandoned: attempt 1, no failure
	c2 := must(e.l.Claim(e.ctx, req))
	must(e.l.Settle(e.ctx, c2.Ref(), ledger.OutcomeNotApplied, nil, errors.New("agent 500")))
	c3 := must(e.l.Claim(e.ctx, req))
	if !c3.Acquired() || c3.Attempt != 3 {
		t.Fatalf("third attempt after one failure of two allowed: %s/%s", c3.Status, c3.Reason)
	}
	must(e.l.Settle(e.ctx, c3.Ref(), ledger.OutcomeNotApplied, nil, errors.New("agent 500")))
	wantStatus(t, "after two failures", must(e.l.Claim(e.ctx, req)).Result, ledger.StatusRefused, ledger.ReasonExhausted)
}

// testSettlePastDeadlineFlagged: a settle that arrives after its claim's
// deadline is flagged late even if nobody looked at the entry meanwhile.
func testSettlePastDeadlineFlagged(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	c := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "past-deadline", Intent: "reply", Payload: 1}, PendingTTL: time.Minute}))
	e.clock.Advance(time.Minute + time.Second)
	s := must(e.l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, "ok", nil))
	if !s.LateSettle || !s.Entry.LateSettle || s.Status != ledger.StatusExecuted {
		t.Fatalf("settle past the deadline: %+v", s)
	}
	c2 := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "past-deadline", Intent: "reply", Payload: 2}, PendingTTL: time.Minute}))
	e.clock.Advance(59 * time.Second)
	if s := must(e.l.Settle(e.ctx, c2.Ref(), ledger.OutcomeCommitted, "ok", nil)); s.LateSettle {
		t.Fatalf("settle in time flagged late: %+v", s)
	}
}

func itoa(u uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			return string(b[i:])
		}
	}
}

var _ = context.Background

// testAmbiguousWriteConflicts: a write whose outcome is unknown has landed
// as far as other runs are concerned: one whose context predates it sees
// the scope as changed, as for a committed write.
func testAmbiguousWriteConflicts(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	var n atomic.Int64
	reader := must(e.l.Begin(e.ctx, "ambiguous-lands", ledger.RunOptions{RunID: "reader", Mode: ledger.ModeIndependent}))
	e.clock.Advance(time.Millisecond)
	writer := must(e.l.Begin(e.ctx, "ambiguous-lands", ledger.RunOptions{RunID: "writer", Mode: ledger.ModeIndependent}))
	c := must(writer.Claim(e.ctx, "reply", "hello", ledger.OnceOptions{}))
	s := must(e.l.Settle(e.ctx, c.Ref(), ledger.OutcomeUnknown, nil, errors.New("agent timed out")))
	if s.Status != ledger.StatusAmbiguous {
		t.Fatalf("unknown settle: %s", s.Status)
	}
	wantStatus(t, "run that did not see the ambiguous write", must(reader.Once(e.ctx, "tag", "vip", count(&n, nil))), ledger.StatusRefused, ledger.ReasonConversationChanged)
	late := must(e.l.Begin(e.ctx, "ambiguous-lands", ledger.RunOptions{RunID: "late", Mode: ledger.ModeIndependent}))
	wantStatus(t, "run begun after it", must(late.Once(e.ctx, "tag", "vip", count(&n, nil))), ledger.StatusExecuted, "")
}
