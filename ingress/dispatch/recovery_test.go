package dispatch_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest/backends"
)

// When a failing source's agent answers again, its waiting events are due
// at once rather than at their scheduled times, on every store, and each
// is delivered once.
func TestRecoveryMakesWaitingEventsDue(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, _ := b.Open(t)
			h := newHarnessOn(t, queuedSource(), nil, store)
			var down atomic.Bool
			down.Store(true)
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				if down.Load() {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			ids := []string{"w-1", "w-2", "w-3"}
			for _, id := range ids {
				h.post(t, id)
			}
			settle(t, h.d)
			h.clock.Advance(5 * time.Second)
			// Second failures: next attempts 5 minutes away.
			testkit.Eventually(t, "two failures each", func() bool {
				h.sweep(t)
				for _, id := range ids {
					if q := h.item(t, id); q.Status != ledger.DeliveryQueued || q.Failures != 2 || q.NextAt.Sub(h.clock.Now()) < 4*time.Minute {
						return false
					}
				}
				return true
			})
			down.Store(false)
			h.post(t, "fresh") // answered: the incident ends
			settle(t, h.d)
			h.sweep(t) // no clock moved: only what was made due is taken
			for _, id := range append(ids, "fresh") {
				if q := h.item(t, id); q.Status != ledger.DeliveryDelivered {
					t.Fatalf("%s: %s, want delivered without waiting for its schedule", id, q.Status)
				}
				if n := len(h.agent.requests(id)); id != "fresh" && n != 3 || id == "fresh" && n != 1 {
					t.Fatalf("%s: %d forwards", id, n)
				}
			}
			rec := h.logs.FilterMessageSnippet("agent answering again").AllUntimed()
			if len(rec) != 1 || !strings.Contains(rec[0].Message, "3 waiting events now due") {
				t.Fatalf("recovery lines %+v, want one saying 3 waiting events now due", rec)
			}
		})
	}
}
