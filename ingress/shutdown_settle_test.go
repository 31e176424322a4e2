package ingress_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress"
)

// A store that stalls on the settle of a forward cut by shutdown does not hold the request past
// CancelForwards' deadline, even with a store timeout far beyond it: serve's drain, which ends
// with that deadline, is bounded by shutdown_grace whatever the store does (#15 item 3).
func TestCancelForwardsBoundsAStalledSettle(t *testing.T) {
	h := newHarnessWith(t, func(o *ingress.Options) { o.StoreTimeout = time.Minute },
		githubSource("github", func(c *ingress.SourceConfig) { c.Forward.Timeout = time.Minute }))
	h.client.Timeout = 2 * time.Minute // the bound under test is the gateway's, not the client's
	arrived := make(chan struct{})
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		close(arrived)
		<-r.Context().Done() // the agent holds the event until the gateway gives up
	})
	h.store.setAfter(onTransact(2, stall)) // the settle after the forward
	first := make(chan reply, 1)
	go func() {
		r, err := h.send(h.githubDelivery(t, "github", "d-stalled-settle")())
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	<-arrived
	h.gw.CancelForwards(time.Now().Add(300 * time.Millisecond))
	select {
	case r := <-first:
		wantStatus(t, r, http.StatusServiceUnavailable)
	case <-time.After(15 * time.Second):
		t.Fatal("the request was still held 15 s after a 300 ms settle deadline (store timeout 1 min)")
	}
}
