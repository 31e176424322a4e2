package ingress_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

// A bad, missing or stale signature is a 401 that touches neither the ledger
// nor the agent, and whose body is the same whatever the reason.
func TestSignatureFailuresAre401WithNoTrace(t *testing.T) {
	h := newHarness(t, githubSource("github"), stripeSource("stripe"))
	now := h.clock.Now()
	ghCfg := signatures.Config{Secrets: []string{githubSecret}}

	cases := []struct {
		name, source, scope string
		req                 func(t *testing.T) *http.Request
	}{
		{"github wrong secret", "github", "github:d-bad", func(t *testing.T) *http.Request {
			hdr := githubHeader("d-bad")
			body := sign(t, "github", signatures.Config{Secrets: []string{"not-the-secret"}}, now, http.MethodPost, "", hdr, githubBody("d-bad"))
			return h.newRequest(t, http.MethodPost, "/hooks/github", hdr, body)
		}},
		{"github body changed after signing", "github", "github:d-tampered", func(t *testing.T) *http.Request {
			hdr := githubHeader("d-tampered")
			body := sign(t, "github", ghCfg, now, http.MethodPost, "", hdr, githubBody("d-tampered"))
			body = bytes.Replace(body, []byte(`"z":1.50`), []byte(`"z":1.5`), 1) // same JSON value, other bytes
			return h.newRequest(t, http.MethodPost, "/hooks/github", hdr, body)
		}},
		{"github missing signature", "github", "github:d-missing", func(t *testing.T) *http.Request {
			return h.newRequest(t, http.MethodPost, "/hooks/github", githubHeader("d-missing"), githubBody("d-missing"))
		}},
		{"github malformed signature", "github", "github:d-malformed", func(t *testing.T) *http.Request {
			hdr := githubHeader("d-malformed")
			hdr.Set("X-Hub-Signature-256", "sha256=not-hex")
			return h.newRequest(t, http.MethodPost, "/hooks/github", hdr, githubBody("d-malformed"))
		}},
		{"stripe stale timestamp", "stripe", "stripe:evt_stale", func(t *testing.T) *http.Request {
			hdr := http.Header{"Content-Type": {"application/json"}}
			body := sign(t, "stripe", signatures.Config{Secrets: []string{stripeSecret}}, now.Add(-time.Hour), http.MethodPost, "", hdr, []byte(`{"id":"evt_stale","type":"invoice.paid"}`))
			return h.newRequest(t, http.MethodPost, "/hooks/stripe", hdr, body)
		}},
		{"stripe timestamp from the future", "stripe", "stripe:evt_future", func(t *testing.T) *http.Request {
			hdr := http.Header{"Content-Type": {"application/json"}}
			body := sign(t, "stripe", signatures.Config{Secrets: []string{stripeSecret}}, now.Add(time.Hour), http.MethodPost, "", hdr, []byte(`{"id":"evt_future","type":"invoice.paid"}`))
			return h.newRequest(t, http.MethodPost, "/hooks/stripe", hdr, body)
		}},
		{"stripe missing signature", "stripe", "stripe:evt_nosig", func(t *testing.T) *http.Request {
			return h.newRequest(t, http.MethodPost, "/hooks/stripe", http.Header{"Content-Type": {"application/json"}}, []byte(`{"id":"evt_nosig"}`))
		}},
	}
	var bodies []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, tc.req(t))
			wantStatus(t, r, http.StatusUnauthorized)
			if leaked := contains(r.Body, "stale", "expired", "timestamp", "missing", "match", "malformed", "hex", "secret", "header", "tolerance"); len(leaked) > 0 {
				t.Errorf("401 body %q reveals the reason: %v", r.Body, leaked)
			}
			bodies = append(bodies, string(r.Body))
			h.assertNothingRecorded(t, tc.scope)
		})
	}
	for i := 1; i < len(bodies); i++ {
		if bodies[i] != bodies[0] {
			t.Errorf("401 bodies differ by reason, so they tell a prober why: %q vs %q", bodies[0], bodies[i])
		}
	}
	if n := h.store.writes.Load(); n != 0 {
		t.Errorf("the ledger wrote %d documents for unauthenticated requests", n)
	}
	if n := h.sink.totalCount(); n != 0 {
		t.Errorf("the agent received %d requests, want 0", n)
	}

	// The same requests correctly signed go through: the 401s above were
	// about the signatures, nothing else.
	wantAnswer(t, h.postGitHub(t, "github", "d-good"), "delivered", "d-good", "github:d-good")
	wantAnswer(t, h.postStripe(t, "stripe", []byte(`{"id":"evt_good"}`), h.clock.Now()), "delivered", "evt_good", "stripe:evt_good")
}

// A body past max_body is a 413, judged on the bytes read: with and without
// a Content-Length. A body of exactly max_body is fine.
func TestBodyLimit(t *testing.T) {
	const limit = 1024
	h := newHarness(t, githubSource("small", func(c *ingress.SourceConfig) { c.MaxBody = limit }))

	// bodyOf returns a JSON body of exactly n bytes.
	bodyOf := func(n int) []byte {
		b := []byte(`{"pad":"`)
		b = append(b, bytes.Repeat([]byte("x"), n-len(b)-2)...)
		b = append(b, `"}`...)
		if len(b) != n {
			t.Fatalf("body is %d bytes, want %d", len(b), n)
		}
		return b
	}
	send := func(t *testing.T, eventID string, body []byte, chunked bool) reply {
		t.Helper()
		hdr := githubHeader(eventID)
		body = sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, body)
		req := h.newRequest(t, http.MethodPost, "/hooks/small", hdr, nil)
		if chunked {
			// A reader of unknown length: net/http sends it chunked.
			req.Body = io.NopCloser(struct{ io.Reader }{bytes.NewReader(body)})
			req.ContentLength = -1
		} else {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
		}
		r := h.do(t, req)
		te, _ := h.lastTE.Load().([]string)
		gotChunked := len(te) > 0 && te[0] == "chunked"
		if gotChunked != chunked {
			t.Fatalf("the gateway saw Transfer-Encoding %v, Content-Length %d; want chunked=%v", te, h.lastCL.Load(), chunked)
		}
		return r
	}

	for _, chunked := range []bool{false, true} {
		mode := "content-length"
		if chunked {
			mode = "chunked"
		}
		t.Run(mode, func(t *testing.T) {
			for _, size := range []int{limit + 1, 3 * limit} {
				id := mode + "-over-" + strconv.Itoa(size)
				r := send(t, id, bodyOf(size), chunked)
				wantStatus(t, r, http.StatusRequestEntityTooLarge)
				h.assertNothingRecorded(t, "small:"+id)
				if n := h.sink.count(id); n != 0 {
					t.Errorf("oversized event forwarded %d times", n)
				}
			}
			id := mode + "-at-limit"
			r := send(t, id, bodyOf(limit), chunked)
			wantAnswer(t, r, "delivered", id, "small:"+id)
			got := h.sink.requests(id)
			if len(got) != 1 || len(got[0].Body) != limit {
				t.Fatalf("agent got %d requests for the at-limit event, want 1 with the %d-byte body", len(got), limit)
			}
		})
	}
	if n := h.sink.totalCount(); n != 2 {
		t.Errorf("agent received %d requests, want only the 2 at-limit ones", n)
	}
}

// Missing event id → 400 naming the rule; unknown source → 404; wrong
// method → 405 with Allow.
func TestRoutingAndRequestErrors(t *testing.T) {
	h := newHarness(t, githubSource("github"), stripeSource("stripe"))

	t.Run("missing event id", func(t *testing.T) {
		hdr := githubHeader("") // no X-GitHub-Delivery
		body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody("x"))
		r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/github", hdr, body))
		wantStatus(t, r, http.StatusBadRequest)
		if !bytes.Contains(r.Body, []byte("{header:X-GitHub-Delivery}")) {
			t.Errorf("400 body %q does not name the event id rule {header:X-GitHub-Delivery}", r.Body)
		}
		if n := h.store.writes.Load(); n != 0 {
			t.Errorf("ledger written %d times for an event without an id", n)
		}
		h.assertNothingRecorded(t, "github:")
	})
	t.Run("missing event id in the body", func(t *testing.T) {
		r := h.postStripe(t, "stripe", []byte(`{"id":"","type":"invoice.paid"}`), h.clock.Now())
		wantStatus(t, r, http.StatusBadRequest)
		if !bytes.Contains(r.Body, []byte("{json:id}")) {
			t.Errorf("400 body %q does not name the rule {json:id}", r.Body)
		}
		h.assertNothingRecorded(t, "stripe:")
	})
	t.Run("unknown source", func(t *testing.T) {
		hdr := githubHeader("d-1")
		body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody("d-1"))
		r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/nosuchsource", hdr, body))
		wantStatus(t, r, http.StatusNotFound)
	})
	for _, tc := range []struct{ method, source string }{
		{http.MethodGet, "stripe"},
		{http.MethodPut, "stripe"},
		{http.MethodDelete, "stripe"},
		// GitHub's only handshake is a signed POST ping: a GET is never
		// valid there, so Allow must not advertise it.
		{http.MethodGet, "github"},
	} {
		t.Run(tc.method+" "+tc.source, func(t *testing.T) {
			r := h.do(t, h.newRequest(t, tc.method, "/hooks/"+tc.source, nil, nil))
			wantStatus(t, r, http.StatusMethodNotAllowed)
			if got := r.Header.Get("Allow"); got != http.MethodPost {
				t.Errorf("Allow = %q, want %q", got, http.MethodPost)
			}
		})
	}
	if n := h.sink.totalCount(); n != 0 {
		t.Errorf("agent received %d requests, want 0", n)
	}
}

// Store unreachable → 503 with Retry-After and nothing forwarded; once it is
// back, the provider's next retry is delivered, and from then on its
// redeliveries are duplicates, store or no store.
func TestStoreOutage(t *testing.T) {
	h := newHarness(t, githubSource("github", func(c *ingress.SourceConfig) { c.RetryAfter = 7 * time.Second }))

	h.store.down.Store(true)
	for range 2 {
		r := h.postGitHub(t, "github", "d-outage")
		wantStatus(t, r, http.StatusServiceUnavailable)
		if ra := r.retryAfter(t); ra != 7 {
			t.Errorf("Retry-After = %d, want the source's retry_after 7", ra)
		}
	}
	if n := h.sink.count("d-outage"); n != 0 {
		t.Fatalf("forwarded %d times while the store was down", n)
	}

	h.store.down.Store(false)
	wantAnswer(t, h.postGitHub(t, "github", "d-outage"), "delivered", "d-outage", "github:d-outage")
	if n := h.sink.count("d-outage"); n != 1 {
		t.Fatalf("agent received %d requests after the store came back, want 1", n)
	}
	if e := h.deliverEntry(t, "github:d-outage"); e.State != "committed" {
		t.Errorf("deliver entry is %s, want committed", e.State)
	}
	wantAnswer(t, h.postGitHub(t, "github", "d-outage"), "duplicate", "d-outage", "github:d-outage")
	if n := h.sink.count("d-outage"); n != 1 {
		t.Fatalf("agent received %d requests, want still 1", n)
	}

	// Down again: this instance settled the event itself, so its ledger
	// still knows the answer; a new event still gets 503.
	h.store.down.Store(true)
	wantAnswer(t, h.postGitHub(t, "github", "d-outage"), "duplicate", "d-outage", "github:d-outage")
	wantStatus(t, h.postGitHub(t, "github", "d-outage-2"), http.StatusServiceUnavailable)
	if n := h.sink.count("d-outage") + h.sink.count("d-outage-2"); n != 1 {
		t.Fatalf("agent received %d requests, want still 1", n)
	}
}
