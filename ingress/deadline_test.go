package ingress_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
)

// onTransact runs f on the n-th Transact to come (from 1) and lets every
// other one through.
func onTransact(n int64, f func(ctx context.Context) error) func(ctx context.Context) error {
	var seen atomic.Int64
	return func(ctx context.Context) error {
		if seen.Add(1) == n {
			return f(ctx)
		}
		return nil
	}
}

// stall blocks until the caller's context ends, as a store behind a held
// connection does.
func stall(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// A store that stalls gets the provider a 503 with Retry-After within the
// store timeout, not silence until the provider gives up, whether it
// stalls on the claim or on the settle.
func TestStalledStoreIsA503(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transact  int64
		forwarded int
	}{
		{"claim", 1, 0},
		{"settle", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, func(o *ingress.Options) { o.StoreTimeout = 200 * time.Millisecond },
				githubSource("github", func(c *ingress.SourceConfig) { c.RetryAfter = 6 * time.Second }))
			// The provider waits 5 s; without a deadline the store would
			// hold the request until then.
			h.client.Timeout = 5 * time.Second
			h.store.setAfter(onTransact(tc.transact, stall))
			r := h.do(t, h.githubDelivery(t, "github", "d-stall")())
			wantStatus(t, r, http.StatusServiceUnavailable)
			if ra := r.retryAfter(t); ra != 6 {
				t.Errorf("Retry-After = %d, want the source's 6", ra)
			}
			if n := h.sink.count("d-stall"); n != tc.forwarded {
				t.Errorf("agent got %d requests, want %d", n, tc.forwarded)
			}
		})
	}
}

// The deliver claim's TTL counts from when the store made it. A claim that
// comes back with no more than the forward timeout plus the settle margin
// left is not forwarded: it is settled as not applied and answered 503, so
// no second copy can be claimed and forwarded while the first still runs.
func TestClaimThatCameBackLateIsNotForwarded(t *testing.T) {
	for _, tc := range []struct {
		jump      time.Duration
		forwarded bool
	}{
		// Forward timeout 10 s, store timeout 2 s: the claim lives 15 s
		// and must have more than 10 s + 3 s left.
		{1 * time.Second, true},
		{2500 * time.Millisecond, false},
		{20 * time.Second, false},
	} {
		t.Run(tc.jump.String(), func(t *testing.T) {
			h := newHarness(t, githubSource("github", func(c *ingress.SourceConfig) { c.Forward.Timeout = 10 * time.Second }))
			// The store answers the claim this long (on the injected
			// clock) after it made it.
			h.store.setAfter(onTransact(1, func(context.Context) error { h.clock.Advance(tc.jump); return nil }))
			newReq := h.githubDelivery(t, "github", "d-late")
			r := h.do(t, newReq())
			if tc.forwarded {
				wantAnswer(t, r, "delivered", "d-late", "github:d-late")
				return
			}
			wantStatus(t, r, http.StatusServiceUnavailable)
			if n := h.sink.count("d-late"); n != 0 {
				t.Fatalf("a claim with too little time left was forwarded (%d requests)", n)
			}
			if e := h.deliverEntry(t, "github:d-late"); e.State != ledger.StateFailed {
				t.Fatalf("the unforwarded claim is %s, want settled not applied (failed)", e.State)
			}
			// The provider's retry is delivered at once, not after the TTL.
			wantAnswer(t, h.do(t, newReq()), "delivered", "d-late", "github:d-late")
		})
	}
}

// A provider that hangs up while the claim is in the store does not leave
// the claim made and never answered (an orphan pending until its TTL): the
// claim runs on a context of its own, and the delivery goes on.
func TestProviderHangsUpDuringTheClaim(t *testing.T) {
	h := newHarness(t, githubSource("github"))
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	h.store.setAfter(onTransact(1, func(sctx context.Context) error {
		hangUp()
		// A store whose caller's context ends before the commit's answer
		// arrives reports an error, though the write was made.
		select {
		case <-sctx.Done():
			return sctx.Err()
		case <-time.After(500 * time.Millisecond):
			return nil
		}
	}))
	newReq := h.githubDelivery(t, "github", "d-gone-mid-claim")
	if _, err := h.send(newReq().WithContext(ctx)); err == nil {
		t.Fatal("the provider's request succeeded although it hung up")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e := h.deliverEntry(t, "github:d-gone-mid-claim")
		if e.State == ledger.StateCommitted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deliver claim was left %s", e.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantAnswer(t, h.do(t, newReq()), "duplicate", "d-gone-mid-claim", "github:d-gone-mid-claim")
	if n := h.sink.count("d-gone-mid-claim"); n != 1 {
		t.Errorf("agent got %d requests, want 1", n)
	}
}

// CancelForwards (shutdown's deadline) cuts a forward the agent is still
// holding: its claim is settled as not applied, the provider hears 503,
// and its retry is delivered again. Requests after it are not forwarded.
func TestCancelForwards(t *testing.T) {
	h := newHarness(t, githubSource("github", func(c *ingress.SourceConfig) { c.Forward.Timeout = time.Minute }))
	arrived := make(chan struct{})
	agentCancelled := make(chan struct{})
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			close(arrived)
			select {
			case <-r.Context().Done():
				close(agentCancelled)
				return
			case <-time.After(60 * time.Second):
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	newReq := h.githubDelivery(t, "github", "d-shutdown")
	first := make(chan reply, 1)
	go func() {
		r, err := h.send(newReq())
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	<-arrived
	h.gw.CancelForwards(time.Now().Add(2 * time.Second))
	r := <-first
	wantStatus(t, r, http.StatusServiceUnavailable)
	r.retryAfter(t)
	if e := h.deliverEntry(t, "github:d-shutdown"); e.State != ledger.StateFailed {
		t.Fatalf("the cancelled forward's claim is %s, want settled not applied (failed)", e.State)
	}
	// The agent's server notices the closed connection on its own
	// schedule, possibly after the gateway has answered: wait for it (the
	// agent would otherwise sit out its 60 s).
	select {
	case <-agentCancelled:
	case <-time.After(30 * time.Second):
		t.Error("the agent's request was not cancelled")
	}
	// Another request to this instance is not forwarded any more.
	wantStatus(t, h.postGitHub(t, "github", "d-after"), http.StatusServiceUnavailable)
	if n := h.sink.count("d-after"); n != 0 {
		t.Errorf("a request after CancelForwards was forwarded")
	}
	if e := h.deliverEntry(t, "github:d-after"); e.State != ledger.StateFailed {
		t.Errorf("its claim is %s, want failed", e.State)
	}
}
