package dispatch_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
)

// forward.cancel: notify. A newer event on the scope supersedes the run
// the agent is working on: the agent gets one signed cancellation notice
// naming the delivery and the newer run, and the run's next claim is
// refused superseded whatever the agent does with the notice.
func TestCancelNotice(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Runs = ledger.ModeSupersede
		c.Scope = []string{"conv"} // every event on one conversation
		c.Forward.Queue.Cancel = dispatch.CancelNotify
	}))
	release := make(chan struct{})
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get(forward.HeaderNotice) == "" && n == 1 {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	defer close(release)
	if st, _ := h.post(t, "first"); st != http.StatusAccepted {
		t.Fatalf("first: %d", st)
	}
	waitUntil(t, func() bool { return len(h.agent.requests("first")) == 1 })
	h.clock.Advance(time.Second)
	if st, _ := h.post(t, "second"); st != http.StatusAccepted {
		t.Fatalf("second: %d", st)
	}
	waitUntil(t, func() bool { return len(h.agent.requests("first")) == 2 })
	fwd, notice := h.agent.requests("first")[0], h.agent.requests("first")[1]
	if notice.Header.Get(forward.HeaderNotice) != "cancel" {
		t.Fatalf("second request for the first event is not a notice: %v", notice.Header)
	}
	wh, err := svix.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(notice.Body, notice.Header); err != nil {
		t.Fatalf("the notice's signature: %v", err)
	}
	var n dispatch.CancelNotice
	if err := json.Unmarshal(notice.Body, &n); err != nil {
		t.Fatal(err)
	}
	if n.Type != "replyonce.cancel" || n.Reason != "superseded" || n.RunID != "github:first" || n.SupersededBy != "github:second" ||
		n.SupersededByID != "second" || n.Scope != "conv" || n.FencingToken == 0 ||
		fwd.Header.Get(forward.HeaderFencingToken) != notice.Header.Get(forward.HeaderFencingToken) ||
		!strings.HasPrefix(notice.Header.Get("Webhook-Id"), "cancel_github:first_") {
		t.Fatalf("notice %+v, headers %v", n, notice.Header)
	}
	c, err := h.ledger.RunRef("conv", n.RunID, n.FencingToken).Claim(t.Context(), "reply", "x", ledger.OnceOptions{})
	if err != nil || c.Reason != ledger.ReasonSuperseded {
		t.Fatalf("the cancelled run's claim: %+v %v", c.Result, err)
	}
	// A third event: the first run was already superseded, so no second notice.
	h.clock.Advance(time.Second)
	h.post(t, "third")
	time.Sleep(200 * time.Millisecond)
	if got := len(h.agent.requests("first")); got != 2 {
		t.Fatalf("%d requests for the first event, want the forward and one notice", got)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, "the condition holds", cond)
}

// forward.order: scope. The head of a conversation in flight holds back
// the next event; when the head goes to dead letter, the conversation
// moves on, and the log and the metric say so.
func TestOrderedScopeMovesOnPastDeadLetter(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Scope = []string{"conv"}
		c.Forward.Queue.Order = ledger.OrderScope
		c.Forward.Queue.Retry.Backoff.Schedule = []time.Duration{0} // one attempt, then dead letter
	}))
	release := make(chan struct{})
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get(forward.HeaderEventID) == "e1" {
			<-release
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	if st, _ := h.post(t, "e1"); st != http.StatusAccepted {
		t.Fatalf("e1: %d", st)
	}
	waitUntil(t, func() bool { return len(h.agent.requests("e1")) == 1 })
	h.clock.Advance(time.Second)
	if st, _ := h.post(t, "e2"); st != http.StatusAccepted {
		t.Fatalf("e2: %d", st)
	}
	if _, err := h.d.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.agent.requests("e2")); n != 0 {
		t.Fatalf("e2 forwarded %d times while e1 was in flight on its conversation", n)
	}
	close(release)
	waitUntil(t, func() bool {
		items, err := h.ledger.Queue().QueueItems(t.Context(), "conv")
		return err == nil && len(items) == 2 && items[0].Status == ledger.DeliveryDead
	})
	settle(t, h.d)
	h.sweep(t)
	if n := len(h.agent.requests("e2")); n != 1 {
		t.Fatalf("e2 forwarded %d times after e1 went to dead letter, want 1", n)
	}
	if got := h.counter(t, "replyonce_scope_moved_on_total", "github"); got != 1 {
		t.Fatalf("replyonce_scope_moved_on_total = %v, want 1", got)
	}
	if n := h.logs.FilterMessageSnippet("its scope moves on").Len(); n != 1 {
		t.Fatalf("%d log lines say the scope moves on, want 1", n)
	}
}
