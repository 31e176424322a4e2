package dispatch_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
)

// forward.concurrency bounds the requests the agent sees at once, not the
// deliveries a process holds: with a fast agent the dispatcher holds more
// than that many (their store steps overlap the forwards), yet the agent
// never has more than forward.concurrency requests open.
func TestConcurrencyBoundsAgentRequestsNotHolds(t *testing.T) {
	const concurrency, events = 4, 60
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) { c.Forward.Queue.Concurrency = concurrency }))
	var open, most atomic.Int64
	var heldMost atomic.Int64
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		now := open.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		if held := int64(h.d.Held("github")); held > heldMost.Load() {
			heldMost.Store(held)
		}
		time.Sleep(2 * time.Millisecond)
		open.Add(-1)
		w.WriteHeader(http.StatusOK)
	})
	run(t, h.d)
	var wg sync.WaitGroup
	for i := range events {
		wg.Go(func() { h.post(t, "c-"+strconv.Itoa(i)) })
	}
	wg.Wait()
	for i := range events {
		id := "c-" + strconv.Itoa(i)
		testkit.Eventually(t, id+" is delivered", func() bool { return h.item(t, id).Status == ledger.DeliveryDelivered })
		if n := len(h.agent.requests(id)); n != 1 {
			t.Errorf("%s forwarded %d times, want once", id, n)
		}
	}
	if m := most.Load(); m > concurrency {
		t.Errorf("the agent had %d requests open at once, forward.concurrency is %d", m, concurrency)
	}
	if m := heldMost.Load(); m <= concurrency {
		t.Errorf("the dispatcher held at most %d deliveries while the agent was busy; it should hold ahead of forward.concurrency (%d)", m, concurrency)
	}
}

// A held delivery that cannot get one of the agent's places in time to
// settle within its claim is given back, due at once and not counted as a
// failure, and is never forwarded under the old claim; it is delivered
// later under a newer one.
func TestHeldDeliveryGivenBackWhenNoAgentPlaceInTime(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Forward.Queue.Concurrency = 1
		c.Forward.Timeout = 20 * time.Second // the first forward outlasts the second's wait
	}))
	release, unblock := gate(t)
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get(forward.HeaderEventID) == "slow" {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	h.post(t, "slow") // handed over: holds the agent's only place
	testkit.Eventually(t, "slow reached the agent", func() bool { return len(h.agent.requests("slow")) > 0 })
	h.post(t, "waiting") // handed over too, and waits for the place
	if q := h.item(t, "waiting"); q.Status != ledger.DeliveryDelivering {
		t.Fatalf("second event %s, want held (delivering)", q.Status)
	}
	// Half the claim's margin after the accept, the wait is over.
	testkit.Eventually(t, "the waiting delivery is given back", func() bool { return h.item(t, "waiting").Status != ledger.DeliveryDelivering })
	q := h.item(t, "waiting")
	if q.Status != ledger.DeliveryQueued || q.Failures != 0 || !q.Due(h.clock.Now()) {
		t.Fatalf("given back as %s with %d failures (due %v), want queued, due now, no failure", q.Status, q.Failures, q.Due(h.clock.Now()))
	}
	if n := len(h.agent.requests("waiting")); n != 0 {
		t.Fatalf("forwarded %d times under the claim it gave back", n)
	}
	atts, err := h.ledger.Queue().AttemptsOf(context.Background(), q)
	if err != nil || len(atts) != 1 || atts[0].Outcome != "interrupted" {
		t.Fatalf("attempt records %+v (%v), want one interrupted", atts, err)
	}
	if got := metricValue(t, h.dreg, "replyonce_delivery_attempts_total", "source", "github", "outcome", "given_back"); got != 1 {
		t.Errorf("given-back attempts counted %v, want 1", got)
	}
	unblock()
	settle(t, h.d)
	h.sweep(t)
	h.wantDeliveredOnceAsSecond(t, "waiting")
}

// With every place taken, an accept waits briefly for one while the agent
// answers fast (the event is handed over, not stored and swept), and does
// not wait at all while the agent is slow.
func TestReserveWaitsForAPlaceOnlyWhileTheAgentIsFast(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Forward.Queue.AcceptWait = dispatch.AcceptWaitOf(dispatch.MaxAcceptWait)
	}))
	slots := fillHolds(t, h.d, "github")

	got := make(chan *dispatch.Slot, 1)
	go func() {
		sl, _ := h.d.Reserve(context.Background(), "github")
		got <- sl
	}()
	// The place is freed only once the accept waits for it: freed before,
	// the accept would take it without reaching the wait this tests.
	testkit.Eventually(t, "the accept waits for a place", func() bool { return h.d.Waiting("github") == 1 })
	slots[0].Release()
	waited := <-got
	if waited == nil {
		t.Fatal("a place freed while an accept waited, and the accept did not get it")
	}
	slots[0] = waited

	if _, ok := h.d.Reserve(context.Background(), "github"); ok {
		t.Fatal("a place with every one taken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := h.d.Reserve(ctx, "github"); ok {
		t.Fatal("a place for a request that has gone away")
	}

	h.d.SetLatency("github", time.Second)
	start := time.Now()
	if _, ok := h.d.Reserve(context.Background(), "github"); ok {
		t.Fatal("a place with every one taken")
	}
	if waited := time.Since(start); waited >= dispatch.MaxAcceptWait {
		t.Errorf("an accept waited %s for a place although the agent is slow", waited)
	}
	for _, sl := range slots {
		sl.Release()
	}
}

// forward.accept_wait 0s: an accept never waits for a place.
func TestNoAcceptWait(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) { c.Forward.Queue.AcceptWait = dispatch.AcceptWaitOf(0) }))
	fillHolds(t, h.d, "github")
	start := time.Now()
	if _, ok := h.d.Reserve(context.Background(), "github"); ok {
		t.Fatal("a place with every one taken")
	}
	if waited := time.Since(start); waited >= 50*time.Millisecond {
		t.Errorf("an accept waited %s with forward.accept_wait 0s", waited)
	}
}

// With a slow agent, no delivery is held beyond forward.concurrency: it
// would only wait and be given back.
func TestSlowAgentGetsNoTakeAhead(t *testing.T) {
	h := newHarness(t, queuedSource())
	h.d.SetLatency("github", dispatch.TakeAheadLatency)
	slots := fillHolds(t, h.d, "github")
	if n, c := len(slots), h.source.Queued().Policy.Concurrency; n != c {
		t.Fatalf("%d places for a slow agent, want forward.concurrency (%d)", n, c)
	}
	for _, sl := range slots {
		sl.Release()
	}
}

// runs: supersede holds no delivery ahead of a request place: a held one is
// in flight for the ledger, and newest-wins could no longer drop it.
func TestSupersedeSourceGetsNoTakeAhead(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Runs = ledger.ModeSupersede
		c.Forward.Queue.AcceptWait = dispatch.AcceptWaitOf(dispatch.MaxAcceptWait)
	}))
	slots := fillHolds(t, h.d, "github")
	if n, c := len(slots), h.source.Queued().Policy.Concurrency; n != c {
		t.Fatalf("%d places for a runs: supersede source, want forward.concurrency (%d)", n, c)
	}
	start := time.Now()
	if _, ok := h.d.Reserve(context.Background(), "github"); ok {
		t.Fatal("a place with every one taken")
	}
	if waited := time.Since(start); waited >= dispatch.MaxAcceptWait {
		t.Errorf("an accept of a runs: supersede source waited %s for a place", waited)
	}
}

// The queue gauges: replyonce_queue_due_scopes counts the whole due
// backlog from the store's index, beyond the one page that
// replyonce_queue_due sees, also while every place is taken.
func TestQueueGaugesCountTheWholeBacklog(t *testing.T) {
	h := newHarness(t, queuedSource())
	fillHolds(t, h.d, "github")
	const events = dispatch.DefaultBatch + 36
	for i := range events {
		if st, _ := h.post(t, "g-"+strconv.Itoa(i)); st != http.StatusAccepted {
			t.Fatalf("post %d: %d", i, st)
		}
	}
	if _, err := h.d.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, h.dreg, "replyonce_queue_due_scopes"); got != events {
		t.Errorf("replyonce_queue_due_scopes = %v, want %d", got, events)
	}
	if got := metricValue(t, h.dreg, "replyonce_queue_due", "source", "github"); got != dispatch.DefaultBatch {
		t.Errorf("replyonce_queue_due{source=github} = %v, want one page (%d)", got, dispatch.DefaultBatch)
	}
}

// A due backlog that cannot be counted costs the gauge, not the delivery:
// the sweep still takes what is due, and counts a sweep error.
func TestUncountableBacklogStillDelivers(t *testing.T) {
	h := newHarness(t, queuedSource())
	slots := fillHolds(t, h.d, "github")
	if st, _ := h.post(t, "uncounted"); st != http.StatusAccepted {
		t.Fatalf("post: %d", st)
	}
	for _, sl := range slots {
		sl.Release()
	}
	h.store.countDown.Store(true)
	h.sweep(t)
	if q := h.item(t, "uncounted"); q.Status != ledger.DeliveryDelivered {
		t.Fatalf("the event is %s, want delivered", q.Status)
	}
	if got := metricValue(t, h.dreg, "replyonce_dispatch_sweep_errors_total"); got != 1 {
		t.Errorf("sweep errors %v, want 1 (the count)", got)
	}
}
