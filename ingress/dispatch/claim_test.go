package dispatch_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
)

// lateStore delays its answer to one Transact on one scope, once armed:
// the store does the write at once and the caller hears of it only when
// the test opens the gate, as with a store that answers one instance
// slowly.
type lateStore struct {
	ledger.Store
	scope   string
	armed   atomic.Bool
	written chan struct{} // closed once the delayed write is done
	gate    chan struct{} // the answer waits for it
	once    sync.Once
}

func (s *lateStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	err := s.Store.Transact(ctx, scope, fn)
	if scope == s.scope && s.armed.CompareAndSwap(true, false) {
		s.once.Do(func() { close(s.written) })
		<-s.gate // the answer is late, whatever the caller's context says
	}
	return err
}

// A dispatcher whose store answers its take only after the claim it made
// has run out forwards nothing under it: another instance has meanwhile
// taken the delivery under a newer token and delivered it, and the agent
// sees that delivery alone.
func TestTakeAnsweredAfterItsClaimIsAbandoned(t *testing.T) {
	h := newHarness(t, queuedSource())
	// No free place in the harness's own dispatcher: the event waits in
	// the store for the two below.
	for _, sl := range fillHolds(t, h.d, "github") {
		defer sl.Release()
	}
	h.post(t, "late")
	late := &lateStore{Store: h.store, scope: h.item(t, "late").Scope, written: make(chan struct{}), gate: make(chan struct{})}
	var openOnce sync.Once
	open := func() { openOnce.Do(func() { close(late.gate) }) }
	t.Cleanup(open)
	late.armed.Store(true)
	slow := h.newDispatcherOn(t, late, forward.New(nil, h.clock.Now))
	fast := h.newDispatcher(t, forward.New(nil, h.clock.Now), nil)

	sweepDone := make(chan error, 1)
	go func() {
		_, err := slow.Sweep(context.Background())
		sweepDone <- err
	}()
	select {
	case <-late.written:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow instance never took the delivery")
	}
	if err := <-sweepDone; err != nil {
		t.Fatal(err)
	}
	// The slow instance's claim runs out while it waits for the answer;
	// the other instance takes the delivery over and delivers it.
	h.clock.Advance(h.source.Queued().Lease() + time.Second)
	if _, err := fast.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, fast)
	if n := len(h.agent.requests("late")); n != 1 {
		t.Fatalf("the other instance forwarded %d times, want 1", n)
	}
	// Now the slow instance hears that its take succeeded.
	open()
	settle(t, slow)
	h.wantDeliveredOnceAsSecond(t, "late")
}

// A held delivery that gets one of the agent's places only once too little
// of its claim is left (by the injected clock, whatever the timer said) is
// given back unsent, not forwarded.
func TestPlaceCameTooLateByTheClock(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Forward.Queue.Concurrency = 1
		c.Forward.Timeout = 20 * time.Second // the real-time wait for a place outlasts the test
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
	// The claim's start-by time passes on the clock, then the place frees.
	h.clock.Advance(h.source.Queued().Lease() - h.source.Queued().Target.Timeout)
	unblock()
	settle(t, h.d)
	if n := len(h.agent.requests("waiting")); n != 0 {
		t.Fatalf("forwarded %d times with too little of its claim left", n)
	}
	q := h.item(t, "waiting")
	if q.Status != ledger.DeliveryQueued || q.Failures != 0 {
		t.Fatalf("%s with %d failures, want given back: queued, no failure", q.Status, q.Failures)
	}
	h.sweep(t)
	h.wantDeliveredOnceAsSecond(t, "waiting")
}
