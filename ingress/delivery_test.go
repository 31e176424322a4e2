package ingress_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

var contextAtFormat = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

func tokenOf(t *testing.T, h http.Header) uint64 {
	t.Helper()
	v := h.Get(forward.HeaderFencingToken)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("Replyonce-Fencing-Token %q is not a positive integer", v)
	}
	return n
}

// The forwarded request carries every header the agent is promised (the
// table of what the agent receives), the provider's informative headers
// and raw body, never its signature, and a Standard Webhooks signature
// that svix verifies.
func TestForwardedRequest(t *testing.T) {
	h := newHarness(t, githubSource("github", func(c *ingress.SourceConfig) {
		c.Forward.SigningSecret = forwardSecret
		c.Forward.Headers = map[string]string{"Authorization": agentAuthToken}
	}))
	// The agent fails the first delivery, so the provider's retry shows
	// what stays the same across deliveries.
	h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})

	const id = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	hdr := githubHeader(id)
	hdr.Set("X-Github-Hook-Installation-Target-Type", "repository")
	hdr.Set("X-Unlisted-Provider-Header", "not on the allow-list")
	hdr.Set("Cookie", "session=provider")
	body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody(id))
	hdr.Set("X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567") // GitHub's legacy header, sent alongside
	newReq := func() *http.Request { return h.newRequest(t, http.MethodPost, "/hooks/github", hdr, body) }

	before := h.clock.Now()
	r1 := h.do(t, newReq())
	after := h.clock.Now()
	wantStatus(t, r1, http.StatusServiceUnavailable)
	wantAnswer(t, h.do(t, newReq()), "delivered", id, "github:"+id)

	got := h.sink.requests(id)
	if len(got) != 2 {
		t.Fatalf("agent got %d requests, want 2", len(got))
	}
	entry := h.deliverEntry(t, "github:"+id)
	wh, err := svix.NewWebhook(forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range got {
		g := req.Header
		want := map[string]string{
			forward.HeaderSource:                     "github",
			forward.HeaderEventID:                    id,
			forward.HeaderScope:                      "github:" + id,
			forward.HeaderRunID:                      "github:" + id,
			forward.HeaderDelivery:                   strconv.Itoa(i + 1),
			forward.HeaderIdempotencyKey:             entry.IdempotencyKey(),
			"Content-Type":                           "application/json",
			"Authorization":                          agentAuthToken,
			"X-Github-Event":                         "issues",
			"X-Github-Delivery":                      id,
			"X-Github-Hook-Id":                       "292430182",
			"X-Github-Hook-Installation-Target-Type": "repository",
			forward.HeaderWebhookID:                  entry.IdempotencyKey(),
		}
		for name, v := range want {
			if g.Get(name) != v {
				t.Errorf("delivery %d: %s = %q, want %q", i+1, name, g.Get(name), v)
			}
		}
		for _, name := range []string{"X-Hub-Signature-256", "X-Hub-Signature", "X-Unlisted-Provider-Header", "Cookie"} {
			if v, ok := g[name]; ok {
				t.Errorf("delivery %d: provider header %s = %q was forwarded", i+1, name, v)
			}
		}
		if !bytes.Equal(req.Body, body) {
			t.Errorf("delivery %d: body = %q, want the provider's raw bytes %q", i+1, req.Body, body)
		}
		ctxAt := g.Get(forward.HeaderContextAt)
		if !contextAtFormat.MatchString(ctxAt) {
			t.Errorf("delivery %d: Replyonce-Context-At = %q, want RFC 3339 UTC with milliseconds", i+1, ctxAt)
		}
		if i == 0 {
			at, err := time.Parse(time.RFC3339Nano, ctxAt)
			if err != nil {
				t.Fatal(err)
			}
			if at.Before(before.Truncate(time.Millisecond)) || at.After(after) {
				t.Errorf("Context-At %s is not the receipt time (between %s and %s)", ctxAt, before, after)
			}
		}
		if err := wh.Verify(req.Body, g); err != nil {
			t.Errorf("delivery %d: svix Verify: %v", i+1, err)
		}
		if err := wh.Verify(append(bytes.Clone(req.Body), ' '), g); err == nil {
			t.Errorf("delivery %d: svix Verify accepted a changed body; the check above proves nothing", i+1)
		}
	}
	t1, t2 := tokenOf(t, got[0].Header), tokenOf(t, got[1].Header)
	if t2 <= t1 {
		t.Errorf("fencing token of delivery 2 (%d) is not newer than delivery 1's (%d)", t2, t1)
	}
	if entry.Token != t2 {
		t.Errorf("ledger's deliver entry has token %d, the agent was given %d", entry.Token, t2)
	}
}

// A redelivery resumes the run, and the ledger keeps the run's first
// contextAt; the agent must be told the same one, not a new receipt time.
func TestRedeliveryKeepsTheRunsContextAt(t *testing.T) {
	h := newHarness(t, githubSource("github"))
	h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	newReq := h.githubDelivery(t, "github", "d-ctx")
	wantStatus(t, h.do(t, newReq()), http.StatusServiceUnavailable)
	h.clock.Advance(90 * time.Second) // the provider retries a minute and a half later
	wantAnswer(t, h.do(t, newReq()), "delivered", "d-ctx", "github:d-ctx")

	got := h.sink.requests("d-ctx")
	if len(got) != 2 {
		t.Fatalf("agent got %d requests, want 2", len(got))
	}
	c1, c2 := got[0].Header.Get(forward.HeaderContextAt), got[1].Header.Get(forward.HeaderContextAt)
	if c1 != c2 {
		t.Errorf("Replyonce-Context-At changed across deliveries of one run: %s then %s; the run's context is the first", c1, c2)
	}
}

// How the agent's answer becomes the provider's.
func TestAgentOutcomes(t *testing.T) {
	withRetry := func(d time.Duration) func(*ingress.SourceConfig) {
		return func(c *ingress.SourceConfig) { c.RetryAfter = d }
	}

	t.Run("500 then the retry is delivery 2 of the same run", func(t *testing.T) {
		h := newHarness(t, githubSource("github", withRetry(3*time.Second)))
		h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, n int) {
			if n == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		newReq := h.githubDelivery(t, "github", "d-500")
		r := h.do(t, newReq())
		wantStatus(t, r, http.StatusServiceUnavailable)
		if ra := r.retryAfter(t); ra != 3 {
			t.Errorf("Retry-After = %d, want the source's 3", ra)
		}
		wantAnswer(t, h.do(t, newReq()), "delivered", "d-500", "github:d-500")
		got := h.sink.requests("d-500")
		if len(got) != 2 {
			t.Fatalf("agent got %d requests, want 2", len(got))
		}
		for _, name := range []string{forward.HeaderRunID, forward.HeaderIdempotencyKey, forward.HeaderScope} {
			if a, b := got[0].Header.Get(name), got[1].Header.Get(name); a != b || a == "" {
				t.Errorf("%s differs across deliveries: %q then %q", name, a, b)
			}
		}
		if d := got[1].Header.Get(forward.HeaderDelivery); d != "2" {
			t.Errorf("Replyonce-Delivery of the retry = %q, want 2", d)
		}
		if tokenOf(t, got[1].Header) <= tokenOf(t, got[0].Header) {
			t.Error("the retry's fencing token is not newer")
		}
		wantAnswer(t, h.do(t, newReq()), "duplicate", "d-500", "github:d-500")
		if n := h.sink.count("d-500"); n != 2 {
			t.Errorf("agent got %d requests after the duplicate, want 2", n)
		}
	})

	t.Run("429 passes the agent's Retry-After on, within retry_after", func(t *testing.T) {
		h := newHarness(t, githubSource("github", withRetry(60*time.Second)))
		h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "42")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		r := h.do(t, h.githubDelivery(t, "github", "d-429")())
		wantStatus(t, r, http.StatusServiceUnavailable)
		if ra := r.retryAfter(t); ra != 42 {
			t.Errorf("Retry-After = %d, want the agent's 42", ra)
		}
		if e := h.deliverEntry(t, "github:d-429"); e.State != ledger.StateFailed {
			t.Errorf("deliver entry is %s, want failed (retryable)", e.State)
		}
	})

	for _, status := range []int{http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusBadGateway} {
		t.Run(strconv.Itoa(status)+" is retried", func(t *testing.T) {
			h := newHarness(t, githubSource("github", withRetry(2*time.Second)))
			h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(status) })
			r := h.do(t, h.githubDelivery(t, "github", "d-x")())
			wantStatus(t, r, http.StatusServiceUnavailable)
			if ra := r.retryAfter(t); ra != 2 {
				t.Errorf("Retry-After = %d, want 2", ra)
			}
		})
	}

	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusGone} {
		t.Run(strconv.Itoa(status)+" is a configuration fault: 503, the provider keeps the event", func(t *testing.T) {
			h := newHarness(t, githubSource("github"))
			h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 1 {
					w.WriteHeader(status)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			newReq := h.githubDelivery(t, "github", "d-fault")
			wantStatus(t, h.do(t, newReq()), http.StatusServiceUnavailable)
			if e := h.deliverEntry(t, "github:d-fault"); e.State != ledger.StateFailed {
				t.Errorf("deliver entry is %s, want failed (retryable)", e.State)
			}
			// The operator fixed the setup: the provider's retry is delivered.
			wantAnswer(t, h.do(t, newReq()), "delivered", "d-fault", "github:d-fault")
		})
	}

	t.Run("422 is rejected for good", func(t *testing.T) {
		h := newHarness(t, githubSource("github"))
		h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(http.StatusUnprocessableEntity)
		})
		newReq := h.githubDelivery(t, "github", "d-422")
		wantAnswer(t, h.do(t, newReq()), "rejected", "d-422", "github:d-422")
		for range 2 {
			r := h.do(t, newReq())
			wantAnswer(t, r, "duplicate", "d-422", "github:d-422")
			if o := r.answer(t).Outcome; o != "rejected" {
				t.Errorf("duplicate's outcome = %q, want rejected", o)
			}
		}
		if n := h.sink.count("d-422"); n != 1 {
			t.Errorf("a rejected event was forwarded %d times, want 1", n)
		}
	})

	t.Run("timeout then the retry is redelivered", func(t *testing.T) {
		h := newHarness(t, githubSource("github", withRetry(2*time.Second), func(c *ingress.SourceConfig) {
			c.Forward.Timeout = 300 * time.Millisecond
		}))
		h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				<-r.Context().Done() // hangs until the gateway gives up
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		newReq := h.githubDelivery(t, "github", "d-slow")
		start := time.Now()
		r := h.do(t, newReq())
		wantStatus(t, r, http.StatusServiceUnavailable)
		if ra := r.retryAfter(t); ra < 1 || ra > 2 {
			t.Errorf("Retry-After = %d, want 1..2", ra)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("the gateway answered after %s; the forward timeout is 300ms", el)
		}
		wantAnswer(t, h.do(t, newReq()), "delivered", "d-slow", "github:d-slow")
		got := h.sink.requests("d-slow")
		if len(got) != 2 || got[1].Header.Get(forward.HeaderDelivery) != "2" {
			t.Fatalf("agent got %d requests; want 2, the second with Replyonce-Delivery: 2", len(got))
		}
		if got[0].Header.Get(forward.HeaderRunID) != got[1].Header.Get(forward.HeaderRunID) {
			t.Error("the redelivery has another run id")
		}
	})

	t.Run("agent unreachable", func(t *testing.T) {
		gone := httptest.NewServer(http.NotFoundHandler())
		url := gone.URL
		gone.Close()
		h := newHarness(t, githubSource("github", withRetry(2*time.Second), func(c *ingress.SourceConfig) {
			c.Forward.URL = url
		}))
		r := h.do(t, h.githubDelivery(t, "github", "d-gone")())
		wantStatus(t, r, http.StatusServiceUnavailable)
		if ra := r.retryAfter(t); ra != 2 {
			t.Errorf("Retry-After = %d, want 2", ra)
		}
		if e := h.deliverEntry(t, "github:d-gone"); e.State != ledger.StateFailed {
			t.Errorf("deliver entry is %s, want failed", e.State)
		}
	})
}

// 50 identical deliveries at once: the agent gets exactly one; every other
// answer is a duplicate or an in-flight 503 with Retry-After.
func TestConcurrentIdenticalDeliveries(t *testing.T) {
	const n = 50
	h := newHarness(t, githubSource("github", func(c *ingress.SourceConfig) { c.RetryAfter = 5 * time.Second }))
	release := make(chan struct{})
	var releaseOnce sync.Once
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, _ int) {
		// Held until half the others have been answered, so that both
		// in-flight and already-delivered duplicates occur.
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})

	newReq := h.githubDelivery(t, "github", "d-burst")
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = newReq()
	}
	replies := make([]reply, n)
	errs := make([]error, n)
	var answered atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = h.send(reqs[i])
			if answered.Add(1) >= n/2 {
				releaseOnce.Do(func() { close(release) })
			}
		})
	}
	close(start)
	wg.Wait()
	releaseOnce.Do(func() { close(release) })

	delivered, duplicates, inFlight := 0, 0, 0
	for i, r := range replies {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch {
		case r.Status == http.StatusOK && r.answer(t).Status == "delivered":
			delivered++
		case r.Status == http.StatusOK && r.answer(t).Status == "duplicate":
			duplicates++
		case r.Status == http.StatusServiceUnavailable:
			inFlight++
			if ra := r.retryAfter(t); ra < 1 || ra > 5 {
				t.Errorf("request %d: Retry-After = %d, want 1..5", i, ra)
			}
		default:
			t.Errorf("request %d: unexpected answer %s", i, r)
		}
	}
	t.Logf("delivered %d, duplicates %d, in flight %d", delivered, duplicates, inFlight)
	if delivered != 1 {
		t.Errorf("%d answers say delivered, want exactly 1", delivered)
	}
	if got := h.sink.count("d-burst"); got != 1 {
		t.Fatalf("agent received %d requests, want exactly 1", got)
	}
	e := h.deliverEntry(t, "github:d-burst")
	if e.State != ledger.StateCommitted || e.Attempt != 1 || e.Delivery != 1 {
		t.Errorf("deliver entry = %s attempt %d delivery %d, want committed, 1, 1", e.State, e.Attempt, e.Delivery)
	}
	wantAnswer(t, h.do(t, newReq()), "duplicate", "d-burst", "github:d-burst")
}

// While delivery 1 is held at the agent, a duplicate is told to come back
// later (never longer than retry_after nor than the claim has left) and does
// not take the run over: delivery 1's agent can still write.
func TestInFlightDuplicate(t *testing.T) {
	cases := []struct {
		name       string
		retryAfter time.Duration
		timeout    time.Duration
		maxRA      int
	}{
		{"capped by retry_after", 4 * time.Second, 10 * time.Second, 4},
		// The claim's pending TTL is the forward timeout plus a margin of
		// a few seconds, far less than this retry_after.
		{"capped by the claim's time left", time.Hour, time.Second, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, githubSource("github", func(c *ingress.SourceConfig) {
				c.RetryAfter = tc.retryAfter
				c.Forward.Timeout = tc.timeout
			}))
			arrived := make(chan struct{})
			release := make(chan struct{})
			h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					close(arrived)
					select {
					case <-release:
					case <-r.Context().Done():
					}
				}
				w.WriteHeader(http.StatusOK)
			})
			newReq := h.githubDelivery(t, "github", "d-held")
			first := make(chan reply, 1)
			firstErr := make(chan error, 1)
			go func() {
				r, err := h.send(newReq())
				first <- r
				firstErr <- err
			}()
			select {
			case <-arrived:
			case <-time.After(5 * time.Second):
				t.Fatal("delivery 1 never reached the agent")
			}

			dup := h.do(t, newReq())
			wantStatus(t, dup, http.StatusServiceUnavailable)
			if ra := dup.retryAfter(t); ra < 1 || ra > tc.maxRA {
				t.Errorf("Retry-After = %d, want 1..%d", ra, tc.maxRA)
			}
			if n := h.sink.count("d-held"); n != 1 {
				t.Errorf("the in-flight duplicate was forwarded: agent has %d requests", n)
			}

			held := h.sink.requests("d-held")[0].Header
			run := h.ledger.RunRef(held.Get(forward.HeaderScope), held.Get(forward.HeaderRunID), tokenOf(t, held))
			reply := func(text string) ledger.Result {
				t.Helper()
				res, err := run.Once(context.Background(), "reply", map[string]string{"text": text},
					func(context.Context, ledger.Call) (any, error) { return "sent", nil })
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			// The agent answers while its delivery is still in flight...
			if res := reply("working on it"); res.Status != ledger.StatusExecuted {
				t.Errorf("delivery 1's agent claim during the forward = %s %s, want executed", res.Status, res.Reason)
			}

			close(release)
			r1 := <-first
			if err := <-firstErr; err != nil {
				t.Fatal(err)
			}
			wantAnswer(t, r1, "delivered", "d-held", "github:d-held")
			// ...and after it completed.
			if res := reply("done"); res.Status != ledger.StatusExecuted {
				t.Errorf("delivery 1's agent claim after the forward = %s %s, want executed", res.Status, res.Reason)
			}
			if e := h.deliverEntry(t, "github:d-held"); e.Delivery != 1 || e.Attempt != 1 || e.State != ledger.StateCommitted {
				t.Errorf("deliver entry = %s delivery %d attempt %d; want committed by delivery 1, attempt 1", e.State, e.Delivery, e.Attempt)
			}
		})
	}
}

// The provider hanging up mid-forward does not cut the forward short: the
// ledger still learns the agent took the event, so the provider's retry is
// a duplicate, not a second delivery.
func TestProviderHangsUpMidForward(t *testing.T) {
	h := newHarness(t, githubSource("github"))
	arrived := make(chan struct{})
	release := make(chan struct{})
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	newReq := h.githubDelivery(t, "github", "d-hangup")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.send(newReq().WithContext(ctx))
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the delivery never reached the agent")
	}
	cancel() // the provider gives up waiting
	if err := <-done; err == nil {
		t.Fatal("the provider's request succeeded although it was cancelled")
	}
	close(release)

	deadline := time.Now().Add(5 * time.Second)
	for {
		hist, err := h.ledger.Views().History(context.Background(), "github:d-hangup")
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) == 1 && hist[0].State != ledger.StatePending {
			if hist[0].State != ledger.StateCommitted {
				t.Fatalf("deliver entry settled %s, want committed: the agent answered 200", hist[0].State)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deliver claim was never settled: %+v", hist)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantAnswer(t, h.do(t, newReq()), "duplicate", "d-hangup", "github:d-hangup")
	if n := h.sink.count("d-hangup"); n != 1 {
		t.Errorf("agent got %d requests, want 1", n)
	}
}
