package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testCommittedValue: the ledger finds a committed value holding a string,
// which is how the gateway tells the agent's own echo from a customer's
// message. Only committed entries count, on their own scope, any depth of
// the value, strings only, and the excepted intents are skipped.
func testCommittedValue(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: time.Hour})
	var n atomic.Int64
	scope := "thread-echo"
	reply := ledger.Key{Scope: scope, Intent: "reply", Payload: "first answer"}
	must(e.l.Once(e.ctx, reply, count(&n, map[string]any{"sent": map[string]any{"ids": []any{"msg_42"}}, "count": 7})))
	must(e.l.Once(e.ctx, ledger.Key{Scope: scope, Intent: "deliver", Payload: 1}, count(&n, map[string]any{"outcome": "msg_99"})))

	find := func(scope, v string, except ...string) (ledger.Entry, bool) {
		t.Helper()
		en, ok, err := e.l.CommittedValue(e.ctx, scope, v, except...)
		noErr(t, err)
		return en, ok
	}
	if en, ok := find(scope, "msg_42"); !ok || en.Intent != "reply" {
		t.Fatalf("the reply's nested message id: found=%v entry=%+v", ok, en)
	}
	for _, miss := range []string{"msg_4", "sent", "ids", "7"} {
		if _, ok := find(scope, miss); ok {
			t.Fatalf("%q matched: only whole string values count, not prefixes, keys or numbers", miss)
		}
	}
	if _, ok := find("other-thread", "msg_42"); ok {
		t.Fatal("a value committed on another scope matched")
	}
	if _, ok := find(scope, "msg_99"); !ok {
		t.Fatal("the deliver entry's value was not found without an exception")
	}
	if _, ok := find(scope, "msg_99", "deliver"); ok {
		t.Fatal("an excepted intent's value matched")
	}

	// A pending claim and a failed attempt hold no value the agent committed.
	pend := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: "second"}}))
	if _, ok := find(scope, "msg_77"); ok {
		t.Fatal("a pending claim matched")
	}
	must(e.l.Settle(e.ctx, pend.Ref(), ledger.OutcomeNotApplied, map[string]any{"id": "msg_77"}, errors.New("smtp 550")))
	if _, ok := find(scope, "msg_77"); ok {
		t.Fatal("a failed attempt's value matched")
	}
	again := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: "second"}}))
	must(e.l.Settle(e.ctx, again.Ref(), ledger.OutcomeCommitted, map[string]any{"id": "msg_77"}, nil))
	if en, ok := find(scope, "msg_77"); !ok || en.State != ledger.StateCommitted {
		t.Fatalf("the committed retry: found=%v entry=%+v", ok, en)
	}

	// Reading changes nothing.
	before := must(e.store.Read(e.ctx, scope))
	find(scope, "msg_42")
	if after := must(e.store.Read(e.ctx, scope)); string(after) != string(before) {
		t.Fatal("CommittedValue wrote to the store")
	}
	if _, _, err := e.l.CommittedValue(context.Background(), scope, ""); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("an empty value: %v, want ErrInvalid", err)
	}
	// Past retention, the reply is forgotten like any settled entry.
	e.clock.Advance(2 * time.Hour)
	must(e.l.Once(e.ctx, ledger.Key{Scope: scope, Intent: "note", Payload: 1}, count(&n, nil)))
	if _, ok := find(scope, "msg_42"); ok {
		t.Fatal("a value past retention still matched")
	}
}
