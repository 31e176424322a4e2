package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testResolveAs: an operator's resolve by name records "operator:<name>"
// and the time; a bad name, or a request that names the entry badly,
// changes nothing.
func testResolveAs(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	unknown := func(context.Context, ledger.Call) (any, error) { return nil, errors.New("timeout") }
	key := ledger.Key{Scope: "ops-as", Intent: "refund", Payload: 1}
	r := must(e.l.Once(e.ctx, key, unknown))
	id := r.Entry.ID
	for _, bad := range []ledger.Resolution{
		{Scope: "ops-as", EntryID: id, Outcome: ledger.OutcomeCommitted, Who: strings.Repeat("x", 65)},
		{Scope: "ops-as", EntryID: id, Outcome: ledger.OutcomeCommitted, Who: "new\nline"},
		// who is for a resolve by entry id
		{Scope: "ops-as", Intent: "refund", Payload: 1, Outcome: ledger.OutcomeCommitted, Who: "Alice Ops"},
		// by entry id or by effect, not both
		{Scope: "ops-as", EntryID: id, Intent: "refund", Payload: 1, Outcome: ledger.OutcomeCommitted},
		{EntryID: id, Outcome: ledger.OutcomeCommitted},
		{Scope: "ops-as", EntryID: id, Outcome: "maybe"},
	} {
		if _, err := e.l.Resolve(e.ctx, bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("resolve %+v: %v, want ErrInvalid", bad, err)
		}
	}
	if left := must(e.l.Views().Ambiguous(e.ctx, 10)); len(left) != 1 {
		t.Fatalf("a refused resolve changed the entry: %+v", left)
	}
	e.clock.Advance(time.Minute)
	got := must(e.l.Resolve(e.ctx, ledger.Resolution{Scope: "ops-as", EntryID: id, Outcome: ledger.OutcomeCommitted, Who: "Alice Ops"}))
	if got.State != ledger.StateCommitted || got.ResolvedBy != "operator:Alice Ops" || !got.SettledAt.Equal(e.clock.Now()) {
		t.Fatalf("resolved entry %+v", got)
	}
	if h := must(e.l.Views().History(e.ctx, "ops-as")); len(h) != 1 || h[0].ResolvedBy != "operator:Alice Ops" {
		t.Fatalf("history %+v", h)
	}
}

// testConversation: one read gives a scope's runs with their tokens and
// whether each may still write, its entries and its queued deliveries.
func testConversation(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	scope := "conv-view"
	t0 := e.clock.Now()
	old := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "old", Mode: ledger.ModeSupersede, ContextAt: t0}))
	e.clock.Advance(time.Second)
	newer := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "new", Mode: ledger.ModeSupersede, ContextAt: t0.Add(time.Second)}))
	must(newer.Once(e.ctx, "reply", "hi", func(context.Context, ledger.Call) (any, error) { return "ok", nil }))
	ended := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "ended", Mode: ledger.ModeIndependent}))
	if err := ended.End(e.ctx, "finished"); err != nil {
		t.Fatal(err)
	}
	_ = old
	c := must(e.l.Views().Conversation(e.ctx, scope))
	if len(c.Runs) != 3 || c.Token != c.Runs[2].Token {
		t.Fatalf("runs %+v token %d", c.Runs, c.Token)
	}
	want := map[string]ledger.Reason{"old": ledger.ReasonSuperseded, "new": "", "ended": ledger.ReasonRunEnded}
	for i, r := range c.Runs {
		if r.Fenced != want[r.ID] {
			t.Errorf("run %s fenced %q, want %q", r.ID, r.Fenced, want[r.ID])
		}
		if i > 0 && r.Token <= c.Runs[i-1].Token {
			t.Errorf("runs not in token order: %+v", c.Runs)
		}
	}
	if len(c.Entries) != 1 || c.Entries[0].State != ledger.StateCommitted || c.Entries[0].RunID != "new" {
		t.Fatalf("entries %+v", c.Entries)
	}
	if len(c.Queue) != 0 {
		t.Fatalf("queue %+v", c.Queue)
	}
	if empty := must(e.l.Views().Conversation(e.ctx, "nobody-here")); len(empty.Runs)+len(empty.Entries)+len(empty.Queue) != 0 {
		t.Fatalf("an unknown scope: %+v", empty)
	}
}
