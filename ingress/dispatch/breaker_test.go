package dispatch_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest/backends"
)

// forward.pause_after: 5 with an agent answering 401: the source pauses
// itself after five attempts, says so once, loses nothing, and resume
// with the agent fixed delivers every event once.
func TestPauseAfterPausesTheSource(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, _ := b.Open(t)
			// A poll long enough that the sweeps below that a freed place
			// starts go by the paused sources they last read.
			h := newHarnessOn(t, queuedSource(func(c *ingress.SourceConfig) { c.Forward.Queue.PauseAfter = 5 }), nil, store,
				func(h *harness) { h.poll = time.Hour })
			ctx := context.Background()
			h.sweep(t) // the dispatcher holds the record as it was: nothing paused
			var broken atomic.Bool
			broken.Store(true)
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				if broken.Load() {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			ids := []string{"b-1", "b-2", "b-3", "b-4", "b-5"}
			for _, id := range ids {
				h.post(t, id)
				settle(t, h.d)
			}
			paused, err := h.ledger.Sources().PausedSources(ctx)
			if err != nil || !paused["github"] {
				t.Fatalf("after five 401s paused = %v, %v; want github paused", paused, err)
			}
			if n := len(h.logs.FilterMessageSnippet("paused itself").AllUntimed()); n != 1 {
				t.Fatalf("%d 'paused itself' lines, want 1", n)
			}
			// Events keep queueing while paused; nothing is attempted, by
			// the sweeps an accept starts (which must not go by the copy
			// of the record from before the pause) nor by the poll's.
			h.post(t, "b-6")
			h.d.Notify()
			if _, err := h.d.SweepFreed(ctx); err != nil {
				t.Fatal(err)
			}
			settle(t, h.d)
			if n := len(h.agent.requests("b-6")); n != 0 {
				t.Fatalf("b-6: %d forwards after the source paused itself, want 0", n)
			}
			h.clock.Advance(time.Minute)
			h.sweep(t)
			h.sweep(t)
			for _, id := range append(ids, "b-6") {
				want := 1
				if id == "b-6" {
					want = 0
				}
				if n := len(h.agent.requests(id)); n != want {
					t.Fatalf("%s: %d forwards while paused, want %d", id, n, want)
				}
			}
			broken.Store(false)
			if err := h.ledger.Sources().SetSourcePaused(ctx, "github", false); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				h.sweep(t)
			}
			for _, id := range append(ids, "b-6") {
				if q := h.item(t, id); q.Status != ledger.DeliveryDelivered {
					t.Fatalf("%s after resume: %s, want delivered", id, q.Status)
				}
				want := 2
				if id == "b-6" {
					want = 1
				}
				if n := len(h.agent.requests(id)); n != want {
					t.Fatalf("%s: %d forwards, want %d (each delivered once)", id, n, want)
				}
			}
		})
	}
}
