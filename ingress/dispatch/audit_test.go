package dispatch_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
)

// A copy of a queued event is 200 duplicate whatever state the first copy
// is in: while it is being delivered, and once the agent rejected it (the
// other states are in TestQueuedAcceptAndDeliver and
// TestDeadLetterAndReplay). Nothing reaches the agent twice.
func TestDuplicateWhateverState(t *testing.T) {
	h := newHarness(t, queuedSource())
	release := make(chan struct{})
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get(forward.HeaderEventID) == "busy" {
			<-release
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
	})
	if st, _ := h.post(t, "busy"); st != http.StatusAccepted {
		t.Fatalf("first copy: %d", st)
	}
	testkit.Eventually(t, "busy is delivering and reached the agent", func() bool {
		return h.item(t, "busy").Status == ledger.DeliveryDelivering && len(h.agent.requests("busy")) > 0
	})
	if st, a := h.post(t, "busy"); st != http.StatusOK || a["status"] != "duplicate" || a["outcome"] != "delivering" {
		t.Errorf("copy while delivering: %d %v, want 200 duplicate (delivering)", st, a)
	}
	close(release)
	h.post(t, "bad")
	settle(t, h.d)
	if q := h.item(t, "bad"); q.Status != ledger.DeliveryRejected {
		t.Fatalf("agent 422: %s", q.Status)
	}
	if st, a := h.post(t, "bad"); st != http.StatusOK || a["status"] != "duplicate" || a["outcome"] != "rejected" {
		t.Errorf("copy of a rejected event: %d %v, want 200 duplicate (rejected)", st, a)
	}
	settle(t, h.d)
	for _, id := range []string{"busy", "bad"} {
		if n := len(h.agent.requests(id)); n != 1 {
			t.Errorf("%s reached the agent %d times, want once", id, n)
		}
	}

	// A rejected event is kept, listed, and replayable like a dead one: a
	// new delivery of the same run.
	ctx := context.Background()
	listed, err := h.ledger.Queue().ListDeliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliveryRejected})
	if err != nil || len(listed) != 1 || listed[0].EventID != "bad" {
		t.Fatalf("rejected events listed: %+v %v", listed, err)
	}
	h.agent.setAnswer(nil) // fixed: 200 from now on
	if _, err := h.ledger.Queue().ReplayDelivery(ctx, listed[0].Scope, listed[0].EntryID); err != nil {
		t.Fatal(err)
	}
	h.sweep(t)
	reqs := h.agent.requests("bad")
	if len(reqs) != 2 || h.item(t, "bad").Status != ledger.DeliveryDelivered {
		t.Fatalf("replay of a rejected event: %d forwards, %s", len(reqs), h.item(t, "bad").Status)
	}
	wantHeader(t, reqs[1], forward.HeaderDelivery, "2")
	wantHeader(t, reqs[1], forward.HeaderRunID, reqs[0].Header.Get(forward.HeaderRunID))
}

// The store fails while a delivery is in flight, so its outcome cannot be
// recorded: the delivery stays held until its claim runs out, then is due
// again and delivered under a newer token. Meanwhile the loop backs off
// instead of polling the dead store at its usual rate. Nothing is lost.
func TestStoreOutageMidDelivery(t *testing.T) {
	h := newHarness(t, queuedSource())
	answered := make(chan struct{})
	down := make(chan struct{})
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			close(answered)
			<-down // the store goes down before the outcome is recorded
		}
		w.WriteHeader(http.StatusOK)
	})
	run(t, h.d)
	if st, _ := h.post(t, "mid"); st != http.StatusAccepted {
		t.Fatalf("accept: %d", st)
	}
	<-answered
	h.store.down.Store(true)
	reads := h.store.reads.Load()
	close(down)
	settle(t, h.d)
	time.Sleep(time.Second) // poll is 20 ms: about 50 sweeps without a backoff
	if n := h.store.reads.Load() - reads; n > 10 {
		t.Errorf("%d sweeps' store reads in 1 s of outage: no backoff", n)
	}
	h.store.down.Store(false)
	if q := h.item(t, "mid"); q.Status != ledger.DeliveryDelivering {
		t.Fatalf("after a failed settle: %s, want still delivering until the claim runs out", q.Status)
	}
	h.clock.Advance(h.source.Queued().Lease())
	h.d.Notify()
	testkit.Eventually(t, "mid is delivered", func() bool { return h.item(t, "mid").Status == ledger.DeliveryDelivered })
	reqs := h.agent.requests("mid")
	if len(reqs) != 2 {
		t.Fatalf("%d forwards, want 2 (the unrecorded one and its redelivery)", len(reqs))
	}
	wantHeader(t, reqs[1], forward.HeaderDelivery, "2")
}

// The dispatcher's metrics: queue depth and oldest due age per source,
// attempts by outcome, dead letters and dispatch lag.
func TestMetrics(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Forward.Queue.Retry.Backoff.Schedule = []time.Duration{0, time.Second}
	}))
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get(forward.HeaderEventID) == "fail" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	slots := fillHolds(t, h.d, "github")
	h.post(t, "m-1") // both wait in the store: no slot free
	h.post(t, "fail")
	h.clock.Advance(3 * time.Second)
	if _, err := h.d.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, h.dreg, "replyonce_queue_due", "source", "github"); got != 2 {
		t.Errorf("queue depth %v, want 2", got)
	}
	if got := metricValue(t, h.dreg, "replyonce_queue_oldest_due_seconds", "source", "github"); got != 3 {
		t.Errorf("oldest due %vs, want 3s", got)
	}
	for _, sl := range slots {
		sl.Release()
	}
	h.sweep(t) // delivers m-1; fail fails once
	h.clock.Advance(2 * time.Second)
	h.sweep(t) // fail fails again: its schedule is spent
	if got := metricValue(t, h.dreg, "replyonce_delivery_attempts_total", "source", "github", "outcome", "delivered"); got != 1 {
		t.Errorf("delivered attempts %v, want 1", got)
	}
	if got := metricValue(t, h.dreg, "replyonce_delivery_attempts_total", "source", "github", "outcome", "retry"); got != 1 {
		t.Errorf("retry attempts %v, want 1", got)
	}
	if got := metricValue(t, h.dreg, "replyonce_dead_letters_total", "source", "github"); got != 1 {
		t.Errorf("dead letters %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(h.dreg, "replyonce_dispatch_lag_seconds"); err != nil || n != 1 {
		t.Errorf("dispatch lag series %d, want 1 (github)", n)
	}
	h.clock.Advance(dispatch.GaugeEvery)
	h.sweep(t)
	if got := metricValue(t, h.dreg, "replyonce_queue_due", "source", "github"); got != 0 {
		t.Errorf("queue depth once all is done: %v, want 0", got)
	}
}
