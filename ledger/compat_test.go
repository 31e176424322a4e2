package ledger_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

// testdata/format1-document.json was written by the ledger before entry ids
// were framed and payloads canonicalised by RFC 8785: a committed refund
// whose payload spells 2500.0, an ambiguous email and a pending charge, on
// scope conv:legacy, all claimed at 2026-12-01T12:00:00Z.
const (
	legacyScope    = "conv:legacy"
	legacyRefundID = "7c64b0940f58177d4e13fa35ec1e9e18"
	legacyEmailID  = "e382550097f5633c19f4131040246f2a"
	legacyChargeID = "c74581a35cc51dd7e941e14846b0829c"
)

var (
	legacyRefund = ledger.Key{Scope: legacyScope, Intent: "refund", Payload: json.RawMessage(`{"order":"A-1","cents":2500.0,"note":"a<b\u2028"}`)}
	legacyEmail  = ledger.Key{Scope: legacyScope, Intent: "email", Payload: map[string]any{"to": "a@example.com", "n": 1}}
	legacyCharge = ledger.Key{Scope: legacyScope, Intent: "charge", Payload: map[string]any{"amount": 2.5e3}}
)

// legacyLedger serves the stored format 1 document, half an hour after it
// was written.
func legacyLedger(t *testing.T, opts ledger.Options) (*ledger.Ledger, ledger.Store) {
	t.Helper()
	raw, err := os.ReadFile("testdata/format1-document.json")
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC))
	st := memory.New(clock.Now)
	if err := st.Transact(context.Background(), legacyScope, func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: raw}, nil
	}); err != nil {
		t.Fatal(err)
	}
	opts.Clock = clock.Now
	return ledger.New(st, opts), st
}

// An effect recorded before the change of key format is found after it:
// a redelivery replays it, or reports it in flight or ambiguous, and never
// runs it again under its new id.
func TestEntriesStoredUnderFormat1IdsAreStillHonoured(t *testing.T) {
	ctx := context.Background()
	for _, cache := range []int{-1, 0} {
		l, _ := legacyLedger(t, ledger.Options{ReplayCache: cache})
		var ran atomic.Int64
		effect := func(context.Context, ledger.Call) (any, error) { ran.Add(1); return "again", nil }
		for i := range 2 { // the second time from the replay memory, when on
			res, err := l.Once(ctx, legacyRefund, effect)
			if err != nil || res.Status != ledger.StatusReplayed || string(res.Value) != `{"refund":"re_1"}` {
				t.Fatalf("cache %d, redelivery %d of the committed refund: %+v, %v; want replayed", cache, i, res, err)
			}
			if res.Entry.ID != legacyRefundID || res.Entry.IdempotencyKey() != "ro_"+legacyRefundID {
				t.Errorf("the refund's entry is %s; want it kept under its stored id", res.Entry.ID)
			}
		}
		if res, err := l.Once(ctx, legacyEmail, effect); err != nil || res.Status != ledger.StatusAmbiguous || res.Entry.ID != legacyEmailID {
			t.Errorf("the ambiguous email: %+v, %v; want ambiguous under its stored id", res, err)
		}
		if c, err := l.Claim(ctx, ledger.ClaimRequest{Key: legacyCharge}); err != nil || c.Status != ledger.StatusInFlight || c.EntryID != legacyChargeID {
			t.Errorf("the pending charge: %+v, %v; want in flight under its stored id", c, err)
		}
		if ran.Load() != 0 {
			t.Fatalf("an effect stored before the upgrade ran again %d times", ran.Load())
		}
		if chk, err := l.Check(ctx, legacyRefund); err != nil || !chk.Done || chk.Entry.ID != legacyRefundID {
			t.Errorf("check of the refund: %+v, %v", chk, err)
		}
	}
	// An operator resolves the old ambiguous entry by its key; the next
	// claim retries it under the id (and idempotency key) it already has.
	l, _ := legacyLedger(t, ledger.Options{})
	if e, err := l.Resolve(ctx, ledger.Resolution{Scope: legacyEmail.Scope, Intent: legacyEmail.Intent, Payload: legacyEmail.Payload, Outcome: ledger.OutcomeNotApplied}); err != nil || e.ID != legacyEmailID {
		t.Fatalf("resolve the old email by key: %+v, %v", e, err)
	}
	c, err := l.Claim(ctx, ledger.ClaimRequest{Key: legacyEmail})
	if err != nil || !c.Acquired() || c.EntryID != legacyEmailID || c.Attempt != 2 {
		t.Fatalf("claim after resolving: %+v, %v; want attempt 2 of the stored entry", c, err)
	}
	hist, err := l.Views().History(ctx, legacyScope)
	if err != nil || len(hist) != 3 {
		t.Fatalf("history: %d entries, %v; want the three stored ones and no duplicate", len(hist), err)
	}
}

// A format 1 document that grows long is rewritten as format 11 with its
// older settled entries spilled out and its older landings moved out
// (issue #34), and decides the same: the
// committed refund, stored under its format 1 id and now spilled, is still
// replayed under that id, the ambiguous email stays ambiguous and the
// pending charge in flight.
func TestFormat1DocumentDecidesTheSameOnceSpilled(t *testing.T) {
	ctx := context.Background()
	l, st := legacyLedger(t, ledger.Options{ReplayCache: -1})
	for i := range 100 {
		if _, err := l.Once(ctx, ledger.Key{Scope: legacyScope, Intent: "note", Payload: i},
			func(context.Context, ledger.Call) (any, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := st.Read(ctx, legacyScope)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Format  int                        `json:"format"`
		Entries map[string]json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Format != 11 || doc.Entries[legacyRefundID] != nil || len(doc.Entries) > 40 {
		t.Fatalf("long document: format %d, %d entries, refund kept: %v (%v); want format 11 with the refund spilled",
			doc.Format, len(doc.Entries), doc.Entries[legacyRefundID] != nil, err)
	}
	var ran atomic.Int64
	effect := func(context.Context, ledger.Call) (any, error) { ran.Add(1); return "again", nil }
	res, err := l.Once(ctx, legacyRefund, effect)
	if err != nil || res.Status != ledger.StatusReplayed || string(res.Value) != `{"refund":"re_1"}` || res.Entry.ID != legacyRefundID {
		t.Fatalf("redelivery of the spilled refund: %+v, %v; want replayed under its stored id", res, err)
	}
	if res, err := l.Once(ctx, legacyEmail, effect); err != nil || res.Status != ledger.StatusAmbiguous || res.Entry.ID != legacyEmailID {
		t.Errorf("the ambiguous email: %+v, %v; want ambiguous under its stored id", res, err)
	}
	if c, err := l.Claim(ctx, ledger.ClaimRequest{Key: legacyCharge}); err != nil || c.Status != ledger.StatusInFlight || c.EntryID != legacyChargeID {
		t.Errorf("the pending charge: %+v, %v; want in flight under its stored id", c, err)
	}
	if chk, err := l.Check(ctx, legacyRefund); err != nil || !chk.Done || chk.Entry.ID != legacyRefundID {
		t.Errorf("check of the spilled refund: %+v, %v", chk, err)
	}
	if ran.Load() != 0 {
		t.Fatalf("an effect stored before the upgrade ran again %d times", ran.Load())
	}
	if hist, err := l.Views().History(ctx, legacyScope); err != nil || len(hist) != 103 {
		t.Fatalf("history: %d entries, %v; want 103", len(hist), err)
	}
}

// testdata/format2-long-scope.json.gz is a scope grown by the ledger of
// 10f674e, the last to write format 2: a refund that failed, then 700
// replies a second apart, the refund retried (moved back from its spilled
// record) after the 401st and spilled again since; its document lists 42
// chunks and 701 landings, and "records" holds every side record. now is
// the time of its last write.
func format2LongScope(t *testing.T) (*ledger.Ledger, ledger.Store, *storetest.Clock, time.Time) {
	t.Helper()
	f, err := os.Open("testdata/format2-long-scope.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Scope   string                     `json:"scope"`
		Now     time.Time                  `json:"now"`
		Doc     json.RawMessage            `json:"doc"`
		Records map[string]json.RawMessage `json:"records"`
	}
	if err := json.NewDecoder(zr).Decode(&golden); err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(golden.Now.Add(time.Minute))
	st := memory.New(clock.Now)
	blobs := map[string][]byte{}
	for name, rec := range golden.Records {
		blobs[name] = rec
	}
	if err := st.Transact(context.Background(), golden.Scope, func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: golden.Doc, Blobs: blobs}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return ledger.New(st, ledger.Options{Clock: clock.Now, ReplayCache: -1, MaxAttempts: 3}), st, clock, golden.Now
}

// A long format 2 scope reads and decides as it did once this build
// rewrites it as format 10 (landings moved out, chunk listings in pages,
// every listing an array; the golden's listings are objects):
// its history, a duplicate, and what runs whose context falls anywhere in
// it have seen, before the first write and after.
func TestFormat2LongScopeDecidesTheSameAsFormat10(t *testing.T) {
	ctx := context.Background()
	l, st, _, _ := format2LongScope(t)
	const scope = "conv:long2"
	// The golden scope began at 12:00:00: the refund; reply i at 12:00:01+i.
	began := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	history := func(when string) {
		t.Helper()
		h, err := l.Views().History(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range h {
			if seen[e.ID] {
				t.Fatalf("%s: history lists %s twice", when, e.ID)
			}
			seen[e.ID] = true
			if e.Intent == "refund" && (e.State != ledger.StateCommitted || e.Attempt != 2) {
				t.Errorf("%s: the refund is %s at attempt %d, want committed at 2", when, e.State, e.Attempt)
			}
		}
		if len(h) < 701 {
			t.Fatalf("%s: history lists %d entries, want the 701 stored and more", when, len(h))
		}
	}
	history("format 2")
	res, err := l.Once(ctx, ledger.Key{Scope: scope, Intent: "reply", Payload: 5}, func(context.Context, ledger.Call) (any, error) { return "again", nil })
	if err != nil || res.Status != ledger.StatusReplayed || string(res.Value) != `{"n":5}` {
		t.Fatalf("duplicate of reply 5: %+v, %v; want replayed with its stored value", res, err)
	}
	// Runs whose context is before the scope, at the refund, or between
	// replies 350 and 351 (before the refund's retry) see the replies
	// landed after it as changes; begun twice, the second time on the
	// rewritten document. Refused, they add no entry.
	contexts := []struct {
		at        time.Duration
		conflicts int
	}{
		{-time.Second, 700},
		{500 * time.Millisecond, 700},
		{351*time.Second + 500*time.Millisecond, 349},
		{600*time.Second + 500*time.Millisecond, 100},
	}
	for round := range 2 {
		for i, c := range contexts {
			run, err := l.Begin(ctx, scope, ledger.RunOptions{RunID: fmt.Sprintf("r%d-%d", round, i), Mode: ledger.ModeIndependent, ContextAt: began.Add(c.at)})
			if err != nil {
				t.Fatal(err)
			}
			cl, err := run.Claim(ctx, "reply", fmt.Sprintf("n%d-%d", round, i), ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})
			if err != nil {
				t.Fatal(err)
			}
			if cl.Status != ledger.StatusRefused || len(cl.Conflicts) != c.conflicts {
				t.Errorf("round %d, context %s: %v with %d conflicts, want refused with %d", round, c.at, cl.Status, len(cl.Conflicts), c.conflicts)
			}
		}
		lists, err := ledger.ReadListings(ctx, st, scope)
		if err != nil || lists.Format != 11 || lists.Record == "" || len(lists.Pages) == 0 || lists.LandChunks == 0 {
			t.Fatalf("after round %d: format %d, listings record %q, %d pages, %d landing chunks (%v); want format 11 with all three",
				round, lists.Format, lists.Record, len(lists.Pages), lists.LandChunks, err)
		}
	}
	// A run whose context follows it all sees no change.
	run, err := l.Begin(ctx, scope, ledger.RunOptions{RunID: "now", Mode: ledger.ModeIndependent})
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := run.Claim(ctx, "reply", "now", ledger.OnceOptions{Conflict: ledger.ConflictSameIntent}); err != nil || !cl.Acquired() {
		t.Fatalf("claim of a current run: %+v, %v", cl, err)
	}
	history("format 10")
}
