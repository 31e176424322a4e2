package dispatch_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/replyonce/gateway/ledger"
)

// Once PauseNow returns (the admin API calls it after recording a pause,
// before answering), this process starts no delivery of the source, with
// no sweep in between; resume delivers each event once.
func TestPauseNowStopsThisProcessAtOnce(t *testing.T) {
	h := newHarness(t, queuedSource())
	ctx := context.Background()
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
		t.Fatal(err)
	}
	h.d.PauseNow("github", true)
	if status, ans := h.post(t, "p-1"); status != http.StatusAccepted {
		t.Fatalf("a paused source must keep accepting: %d %v", status, ans)
	}
	settle(t, h.d)
	if n := len(h.agent.requests("p-1")); n != 0 {
		t.Fatalf("%d forwards right after the pause, want 0", n)
	}
	h.sweep(t)
	if n := len(h.agent.requests("p-1")); n != 0 {
		t.Fatalf("%d forwards after a sweep while paused, want 0", n)
	}
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", false); err != nil {
		t.Fatal(err)
	}
	h.d.PauseNow("github", false)
	for range 3 {
		h.sweep(t)
	}
	if q := h.item(t, "p-1"); q.Status != ledger.DeliveryDelivered || len(h.agent.requests("p-1")) != 1 {
		t.Fatalf("after resume: %s, %d forwards; want delivered once", q.Status, len(h.agent.requests("p-1")))
	}
}

// A pause recorded by another process: this dispatcher says it has
// stopped the source (its pause-acks entry) only from the sweep that
// applied it, and from then on an event accepted here is not handed over
// nor delivered.
func TestAckPausedOnlyOnceStopped(t *testing.T) {
	h := newHarness(t, queuedSource())
	ctx := context.Background()
	h.sweep(t)
	listed := func() bool {
		acks, err := h.ledger.Sources().PauseAcks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(acks[h.d.Instance()].Paused, "github")
	}
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
		t.Fatal(err)
	}
	if listed() {
		t.Fatal("the entry lists the source before any sweep applied the pause")
	}
	h.sweep(t)
	if !listed() {
		t.Fatal("the sweep that applied the pause did not say so")
	}
	if status, ans := h.post(t, "a-1"); status != http.StatusAccepted {
		t.Fatalf("a paused source must keep accepting: %d %v", status, ans)
	}
	settle(t, h.d)
	h.sweep(t)
	if n := len(h.agent.requests("a-1")); n != 0 {
		t.Fatalf("%d forwards after this process said it stopped the source, want 0", n)
	}
}
