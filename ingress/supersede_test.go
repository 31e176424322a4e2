package ingress_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
)

// In supersede mode, runs on one customer are fenced by the provider's event
// time: after a newer event began, the older run's agent cannot write.
func TestSupersedeMode(t *testing.T) {
	h := newHarness(t, stripeSource("billing", func(c *ingress.SourceConfig) {
		c.Runs = ledger.ModeSupersede
		c.Scope = []string{"{json:data.object.customer}"}
		c.ContextAt = []string{"{json:created}"}
	}))
	ctx := context.Background()
	post := func(body string) reply {
		t.Helper()
		return h.postStripe(t, "billing", []byte(body), h.clock.Now())
	}

	wantAnswer(t, post(`{"id":"evt_A","type":"customer.updated","created":100,"data":{"object":{"customer":"cus_1"}}}`),
		"delivered", "evt_A", "billing:evt_A")
	wantAnswer(t, post(`{"id":"evt_B","type":"customer.updated","created":200,"data":{"object":{"customer":"cus_1"}}}`),
		"delivered", "evt_B", "billing:evt_B")

	headerOf := func(id string) http.Header {
		t.Helper()
		got := h.sink.requests(id)
		if len(got) != 1 {
			t.Fatalf("agent got %d requests for %s, want 1", len(got), id)
		}
		return got[0].Header
	}
	a, b := headerOf("evt_A"), headerOf("evt_B")
	for _, tc := range []struct {
		h              http.Header
		run, contextAt string
	}{
		{a, "billing:evt_A", "1970-01-01T00:01:40.000Z"},
		{b, "billing:evt_B", "1970-01-01T00:03:20.000Z"},
	} {
		if got := tc.h.Get(forward.HeaderScope); got != "cus_1" {
			t.Errorf("%s: Replyonce-Scope = %q, want cus_1", tc.run, got)
		}
		if got := tc.h.Get(forward.HeaderRunID); got != tc.run {
			t.Errorf("Replyonce-Run-Id = %q, want %q", got, tc.run)
		}
		if got := tc.h.Get(forward.HeaderContextAt); got != tc.contextAt {
			t.Errorf("%s: Replyonce-Context-At = %q, want %q (the event's created)", tc.run, got, tc.contextAt)
		}
	}

	// Each agent tries to reply to the customer. Replies conflict with
	// replies, not with the gateway's own deliver records.
	opts := ledger.OnceOptions{Conflict: ledger.ConflictSameIntent}
	replyAs := func(hdr http.Header, text string) (ledger.Result, bool) {
		t.Helper()
		ran := false
		run := h.ledger.RunRef(hdr.Get(forward.HeaderScope), hdr.Get(forward.HeaderRunID), tokenOf(t, hdr))
		res, err := run.Once(ctx, "reply", map[string]string{"customer": "cus_1", "text": text},
			func(context.Context, ledger.Call) (any, error) { ran = true; return "sent", nil }, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res, ran
	}
	res, ran := replyAs(a, "about your first change")
	if res.Status != ledger.StatusRefused || res.Reason != ledger.ReasonSuperseded || ran {
		t.Errorf("older run's claim = %s %s (effect ran: %v), want refused superseded and not run", res.Status, res.Reason, ran)
	}
	res, ran = replyAs(b, "about your latest change")
	if res.Status != ledger.StatusExecuted || !ran {
		t.Errorf("newer run's claim = %s %s (effect ran: %v), want executed", res.Status, res.Reason, ran)
	}

	// An event whose scope template does not resolve is its own scope.
	wantAnswer(t, post(`{"id":"evt_C","type":"charge.succeeded","created":300,"data":{"object":{"amount":5}}}`),
		"delivered", "evt_C", "billing:evt_C")
	if got := headerOf("evt_C").Get(forward.HeaderScope); got != "billing:evt_C" {
		t.Errorf("unresolved scope: Replyonce-Scope = %q, want the run id billing:evt_C", got)
	}
	h.deliverEntry(t, "billing:evt_C")
}
