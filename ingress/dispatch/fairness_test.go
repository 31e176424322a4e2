package dispatch_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
)

// A busy source's backlog at the head of the due index does not hide
// another source's due event: while every place of the busy source is
// taken, a sweep looks further down the index for work the other source
// can take.
func TestBusySourceBacklogDoesNotHideOtherSources(t *testing.T) {
	h := newHarness(t, queuedSource())
	release, unblock := gate(t)
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get(forward.HeaderSource) == "busy" {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	newSrc := func(name string) *ingress.Source {
		src, err := ingress.NewSource(queuedSource(func(c *ingress.SourceConfig) {
			c.Name = name
			c.Forward.URL = h.agent.URL + "/events"
			c.Forward.Timeout = 30 * time.Second // the busy agent never times out here
			c.Forward.Queue.Concurrency = 1
		}))
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	busy, idle := newSrc("busy"), newSrc("idle")
	// Far more than the busy source can hold: held deliveries that wait
	// too long are given back and taken again, and that churn alone must
	// not be what reaches the idle source's event within the deadline.
	const batch, busyEvents = 4, 200
	enqueue := func(src *ingress.Source, id string) {
		t.Helper()
		scope := src.Name + ":" + id
		_, err := h.ledger.Queue().Enqueue(context.Background(), ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: src.Name, EventID: id, Scope: scope, ContentType: "application/json", Body: githubBody(id)},
			Run:   ledger.RunOptions{RunID: "run-" + id},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: ingress.IntentDeliver, Payload: map[string]string{"source": src.Name, "eventId": id}},
				PendingTTL: src.Queued().Lease(), MaxAttempts: 1000},
			MaxAge: src.Queued().KeepFor(),
		})
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Millisecond) // each later in the due index
	}
	for i := range busyEvents {
		enqueue(busy, "b-"+strconv.Itoa(i))
	}
	enqueue(idle, "late")

	d, err := dispatch.New(dispatch.Options{Ledger: ledger.New(h.store, ledger.Options{Clock: h.clock.Now}), Forwarder: forward.New(nil, h.clock.Now),
		Sources: []*dispatch.Source{busy.Queued(), idle.Queued()}, Clock: h.clock.Now, Poll: 20 * time.Millisecond, Batch: batch, Logger: h.logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unblock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	run(t, d)
	testkit.Eventually(t, "the idle source's event is delivered while the busy source's backlog waits",
		func() bool { return len(h.agent.requests("late")) > 0 })
	reached := 0
	for i := range busyEvents {
		reached += len(h.agent.requests("b-" + strconv.Itoa(i)))
	}
	if reached != 1 {
		t.Fatalf("%d requests of the busy source reached its agent, want 1 (its only place, still open)", reached)
	}
}
