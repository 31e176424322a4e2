package forward_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/forward"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixedClock is the injected clock. It sits at the real current second because svix's Verify
// checks the timestamp against the wall clock.
func fixedClock() (time.Time, func() time.Time) {
	t := time.Now().UTC().Truncate(time.Second)
	return t, func() time.Time { return t }
}

func newForwarder(t *testing.T, now func() time.Time) *forward.Forwarder {
	t.Helper()
	c := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(c.CloseIdleConnections)
	return forward.New(c, now)
}

func baseRequest(url string) forward.Request {
	return forward.Request{
		URL:            url,
		Timeout:        5 * time.Second,
		Body:           []byte(`{"id":"evt_1","type":"invoice.paid"}`),
		ContentType:    "application/json; charset=utf-8",
		Source:         "stripe",
		EventID:        "evt_1",
		Scope:          "cus_9",
		RunID:          "stripe:evt_1",
		Delivery:       2,
		FencingToken:   17,
		ContextAt:      time.Date(2026, 12, 2, 12, 0, 0, 123_456_789, time.FixedZone("CET", 3600)),
		IdempotencyKey: "idem-abc",
	}
}

// A source's own final statuses reject; the answer's first bytes are kept.
func TestFinalStatusesAndAnswer(t *testing.T) {
	_, clock := fixedClock()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(strings.Repeat("x", 1000)))
	}))
	defer srv.Close()
	req := baseRequest(srv.URL)
	if out := newForwarder(t, clock).Forward(context.Background(), req); out.Kind != forward.Retry || len(out.Answer) != 256 {
		t.Fatalf("402 without a final list: kind %v, %d answer bytes; want retry and 256", out.Kind, len(out.Answer))
	}
	req.Final = []int{http.StatusPaymentRequired}
	if out := newForwarder(t, clock).Forward(context.Background(), req); out.Kind != forward.Rejected {
		t.Fatalf("402 listed as final: kind %v, want rejected", out.Kind)
	}
}

func TestClassification(t *testing.T) {
	now, clock := fixedClock()
	httpDate := now.Add(2 * time.Minute).Format(http.TimeFormat)
	pastDate := now.Add(-time.Minute).Format(http.TimeFormat)

	cases := []struct {
		status     int
		retryAfter string
		kind       forward.Kind
		wantAfter  time.Duration
		wantErr    error
	}{
		{200, "", forward.Delivered, 0, nil},
		{202, "", forward.Delivered, 0, nil},
		{204, "", forward.Delivered, 0, nil},
		{400, "", forward.Rejected, 0, forward.ErrAgentStatus},
		{413, "", forward.Rejected, 0, forward.ErrAgentStatus},
		{415, "", forward.Rejected, 0, forward.ErrAgentStatus},
		{422, "", forward.Rejected, 0, forward.ErrAgentStatus},
		// Configuration faults: the event is fine, the gateway's setup is not.
		{401, "", forward.Fault, 0, forward.ErrAgentStatus},
		{403, "", forward.Fault, 0, forward.ErrAgentStatus},
		{404, "", forward.Fault, 0, forward.ErrAgentStatus},
		{405, "", forward.Fault, 0, forward.ErrAgentStatus},
		{410, "", forward.Fault, 0, forward.ErrAgentStatus},
		// A 4xx nobody declared final is not taken to mean "never".
		{402, "", forward.Retry, 0, forward.ErrAgentStatus},
		{451, "", forward.Retry, 0, forward.ErrAgentStatus},
		{408, "", forward.Retry, 0, forward.ErrAgentStatus},
		{409, "", forward.Retry, 0, forward.ErrAgentStatus},
		{425, "", forward.Retry, 0, forward.ErrAgentStatus},
		{429, "", forward.Retry, 0, forward.ErrAgentStatus},
		{429, "7", forward.Retry, 7 * time.Second, forward.ErrAgentStatus},
		{429, httpDate, forward.Retry, 2 * time.Minute, forward.ErrAgentStatus},
		{429, pastDate, forward.Retry, 0, forward.ErrAgentStatus},
		{429, "0", forward.Retry, 0, forward.ErrAgentStatus},
		{503, "-5", forward.Retry, 0, forward.ErrAgentStatus},
		{429, "soon", forward.Retry, 0, forward.ErrAgentStatus},
		{500, "30", forward.Retry, 0, forward.ErrAgentStatus}, // Retry-After only counts on 429/503
		{502, "", forward.Retry, 0, forward.ErrAgentStatus},
		{503, "", forward.Retry, 0, forward.ErrAgentStatus},
		{503, "12", forward.Retry, 12 * time.Second, forward.ErrAgentStatus},
		{503, httpDate, forward.Retry, 2 * time.Minute, forward.ErrAgentStatus},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.status)+"_"+tc.retryAfter, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()

			out := newForwarder(t, clock).Forward(context.Background(), baseRequest(srv.URL))
			if out.Kind != tc.kind || out.Status != tc.status || out.RetryAfter != tc.wantAfter {
				t.Fatalf("got kind=%v status=%d retryAfter=%v, want kind=%v status=%d retryAfter=%v (err %v)",
					out.Kind, out.Status, out.RetryAfter, tc.kind, tc.status, tc.wantAfter, out.Err)
			}
			given := (tc.status == 429 || tc.status == 503) && tc.retryAfter != "" && tc.retryAfter != "soon" && tc.retryAfter != "-5"
			if out.RetryAfterGiven != given {
				t.Fatalf("RetryAfterGiven = %v, want %v", out.RetryAfterGiven, given)
			}
			if tc.wantErr == nil && out.Err != nil {
				t.Fatalf("delivered outcome carries error %v", out.Err)
			}
			if tc.wantErr != nil && !errors.Is(out.Err, tc.wantErr) {
				t.Fatalf("err = %v, want it to wrap %v", out.Err, tc.wantErr)
			}
		})
	}
}

func TestRedirectIsRetryAndNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()

	for _, status := range []int{301, 302, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/stolen", status)
		}))
		// A client that would follow redirects: the Forwarder must refuse anyway.
		following := &http.Client{Transport: &http.Transport{}}
		out := forward.New(following, time.Now).Forward(context.Background(), baseRequest(srv.URL))
		following.CloseIdleConnections()
		srv.Close()

		if out.Kind != forward.Retry || out.Status != status || !errors.Is(out.Err, forward.ErrRedirect) {
			t.Fatalf("%d: got kind=%v status=%d err=%v, want Retry with ErrRedirect", status, out.Kind, out.Status, out.Err)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("redirect target received %d requests, want 0", n)
	}
}

func TestAgentTimeoutIsRetry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body first lets the server notice when the gateway hangs up, which is what
		// ends the request context; then the agent hangs until the gateway gives up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()

	req := baseRequest(srv.URL)
	req.Timeout = 50 * time.Millisecond
	out := newForwarder(t, time.Now).Forward(context.Background(), req)
	if out.Kind != forward.Retry || out.Status != 0 {
		t.Fatalf("got kind=%v status=%d, want Retry with no status", out.Kind, out.Status)
	}
	if !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", out.Err)
	}
	if out.Latency <= 0 || out.Latency > 5*time.Second {
		t.Fatalf("latency %v, want about the %v timeout", out.Latency, req.Timeout)
	}
}

func TestCallerCancellationIsRetry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := newForwarder(t, time.Now).Forward(ctx, baseRequest(srv.URL))
	if out.Kind != forward.Retry || !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("got kind=%v err=%v, want Retry wrapping context.Canceled", out.Kind, out.Err)
	}
}

func TestConnectionRefusedIsRetry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more

	out := newForwarder(t, time.Now).Forward(context.Background(), baseRequest("http://"+addr+"/events"))
	if out.Kind != forward.Retry || out.Status != 0 || out.Err == nil {
		t.Fatalf("got kind=%v status=%d err=%v, want Retry with an error and no status", out.Kind, out.Status, out.Err)
	}
	var opErr *net.OpError
	if !errors.As(out.Err, &opErr) {
		t.Fatalf("err = %v, want the dial error to be reachable with errors.As", out.Err)
	}
}

func TestUnsendableRequestsAreRetryAndNeverSent(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	f := newForwarder(t, time.Now)

	noURL := baseRequest("")
	badSecret := baseRequest(srv.URL)
	badSecret.SigningSecret = "whsec_not base64!"
	noKey := baseRequest(srv.URL)
	noKey.SigningSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	noKey.IdempotencyKey, noKey.RunID = "", ""

	for name, r := range map[string]forward.Request{"no url": noURL, "bad secret": badSecret, "nothing to sign as webhook-id": noKey} {
		out := f.Forward(context.Background(), r)
		if out.Kind != forward.Retry || !errors.Is(out.Err, forward.ErrBadRequest) {
			t.Errorf("%s: got kind=%v err=%v, want Retry wrapping ErrBadRequest", name, out.Kind, out.Err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("agent received %d requests, want 0", n)
	}
}

type captured struct {
	header http.Header
	body   []byte
	method string
}

func captureServer(t *testing.T) (*httptest.Server, <-chan captured) {
	t.Helper()
	ch := make(chan captured, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- captured{header: r.Header.Clone(), body: b, method: r.Method}
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func TestForwardedHeadersAndBody(t *testing.T) {
	srv, got := captureServer(t)
	_, clock := fixedClock()

	req := baseRequest(srv.URL + "/events")
	req.Header = http.Header{
		"X-Github-Event":        {"issues"},
		"x-github-delivery":     {"d-1"},             // non-canonical key from a careless caller
		"Stripe-Signature":      {"t=1,v1=abc"},      // provider signature: never forwarded
		"X-Hub-Signature-256":   {"sha256=abc"},      // likewise
		"X-Shopify-Hmac-Sha256": {"abc"},             // likewise
		"Replyonce-Run-Id":      {"forged"},          // only the gateway says this
		"Webhook-Signature":     {"v1,forged"},       // only the gateway signs
		"Authorization":         {"Bearer provider"}, // the provider's credentials stay at the edge
	}
	req.StaticHeaders = map[string]string{
		"Authorization":    "Bearer agent-token",
		"X-Tenant":         "acme",
		"User-Agent":       "acme-gateway",
		"replyonce-run-id": "forged-by-config",
	}
	out := newForwarder(t, clock).Forward(context.Background(), req)
	if out.Kind != forward.Delivered || out.Err != nil {
		t.Fatalf("outcome %+v, want Delivered", out)
	}
	c := <-got

	if c.method != http.MethodPost {
		t.Errorf("method %s, want POST", c.method)
	}
	if string(c.body) != string(req.Body) {
		t.Errorf("body %q, want the raw bytes %q", c.body, req.Body)
	}
	want := map[string]string{
		"Content-Type":               "application/json; charset=utf-8",
		forward.HeaderSource:         "stripe",
		forward.HeaderEventID:        "evt_1",
		forward.HeaderScope:          "cus_9",
		forward.HeaderRunID:          "stripe:evt_1",
		forward.HeaderDelivery:       "2",
		forward.HeaderFencingToken:   "17",
		forward.HeaderContextAt:      "2026-12-02T11:00:00.123Z",
		forward.HeaderIdempotencyKey: "idem-abc",
		"X-Github-Event":             "issues",
		"X-Github-Delivery":          "d-1",
		"Authorization":              "Bearer agent-token",
		"X-Tenant":                   "acme",
		"User-Agent":                 "acme-gateway",
	}
	for name, v := range want {
		if g := c.header.Values(name); len(g) != 1 || g[0] != v {
			t.Errorf("header %s = %q, want exactly %q", name, g, v)
		}
	}
	for _, name := range []string{"Stripe-Signature", "X-Hub-Signature-256", "X-Shopify-Hmac-Sha256",
		forward.HeaderWebhookID, forward.HeaderWebhookTimestamp, forward.HeaderWebhookSignature} {
		if v := c.header.Values(name); len(v) != 0 {
			t.Errorf("header %s = %q, want it absent", name, v)
		}
	}
}

func TestContextAtKeepsMillisecondsInUTC(t *testing.T) {
	srv, got := captureServer(t)
	req := baseRequest(srv.URL)
	req.ContextAt = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) // whole second: still three digits
	newForwarder(t, time.Now).Forward(context.Background(), req)
	h := (<-got).header
	if v := h.Get(forward.HeaderContextAt); v != "2026-12-02T12:00:00.000Z" {
		t.Fatalf("Replyonce-Context-At = %q, want 2026-12-02T12:00:00.000Z", v)
	}
	if v := h.Get("User-Agent"); v != "replyonce-gateway" {
		t.Fatalf("User-Agent = %q, want replyonce-gateway when none is configured", v)
	}
}

func TestSignatureVerifiesWithSvix(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	srv, got := captureServer(t)
	now, clock := fixedClock()

	req := baseRequest(srv.URL)
	req.SigningSecret = secret
	if out := newForwarder(t, clock).Forward(context.Background(), req); out.Kind != forward.Delivered {
		t.Fatalf("outcome %+v, want Delivered", out)
	}
	c := <-got

	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(c.body, c.header); err != nil {
		t.Fatalf("svix Verify of the forwarded request: %v", err)
	}
	if id := c.header.Get("webhook-id"); id != req.IdempotencyKey {
		t.Errorf("webhook-id = %q, want the idempotency key %q", id, req.IdempotencyKey)
	}
	if ts := c.header.Get("webhook-timestamp"); ts != strconv.FormatInt(now.Unix(), 10) {
		t.Errorf("webhook-timestamp = %q, want the injected clock %d", ts, now.Unix())
	}
	// The signature must cover the body: a tampered body must fail.
	if err := wh.Verify(append([]byte(nil), append(c.body, ' ')...), c.header); err == nil {
		t.Fatal("svix Verify accepted a tampered body")
	}
	// And the secret: another secret must fail.
	other, _ := svix.NewWebhook("whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=")
	if err := other.Verify(c.body, c.header); err == nil {
		t.Fatal("svix Verify accepted the signature under another secret")
	}
}

func TestWebhookIDIsStableAcrossDeliveries(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	srv, got := captureServer(t)
	f := newForwarder(t, time.Now)

	var ids []string
	for delivery := 1; delivery <= 2; delivery++ {
		req := baseRequest(srv.URL)
		req.SigningSecret = secret
		req.IdempotencyKey = ""
		req.Delivery = delivery
		f.Forward(context.Background(), req)
		h := (<-got).header
		ids = append(ids, h.Get("webhook-id"))
		if h.Get(forward.HeaderIdempotencyKey) != req.RunID {
			t.Fatalf("Idempotency-Key = %q, want the run id when no key is given", h.Get(forward.HeaderIdempotencyKey))
		}
	}
	if ids[0] != ids[1] || ids[0] != "stripe:evt_1" {
		t.Fatalf("webhook-id across deliveries = %q, want the same run id twice", ids)
	}
}

func TestValidateSigningSecret(t *testing.T) {
	if err := forward.ValidateSigningSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); err != nil {
		t.Fatalf("valid secret rejected: %v", err)
	}
	for _, s := range []string{"", "whsec_%%%"} {
		if err := forward.ValidateSigningSecret(s); err == nil {
			t.Errorf("secret %q accepted", s)
		}
	}
}

func TestLargeAgentAnswerDoesNotStall(t *testing.T) {
	big := make([]byte, 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(big)
	}))
	defer srv.Close()
	out := newForwarder(t, time.Now).Forward(context.Background(), baseRequest(srv.URL))
	if out.Kind != forward.Delivered {
		t.Fatalf("outcome %+v, want Delivered", out)
	}
}

func TestConnectionsAreReusedUnderConcurrency(t *testing.T) {
	var newConns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	const workers, each = 16, 25
	f := newForwarder(t, time.Now)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if out := f.Forward(context.Background(), baseRequest(srv.URL)); out.Kind != forward.Delivered {
					t.Errorf("outcome %+v, want Delivered", out)
					return
				}
			}
		})
	}
	wg.Wait()
	// net/http may race a dial against a connection coming free, so allow some slack; without
	// pooling this would be one connection per request.
	if n := newConns.Load(); n > 2*workers {
		t.Fatalf("%d connections opened for %d requests from %d workers, want at most %d", n, workers*each, workers, 2*workers)
	}
}

func TestIsReservedHeader(t *testing.T) {
	for _, name := range []string{"replyonce-run-id", "Replyonce-Anything", "webhook-signature", "svix-id", "idempotency-key", "content-type", "Host"} {
		if !forward.IsReservedHeader(name) {
			t.Errorf("%s not reserved", name)
		}
	}
	for _, name := range []string{"Authorization", "X-Tenant", "User-Agent"} {
		if forward.IsReservedHeader(name) {
			t.Errorf("%s reserved, but configuration may set it", name)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[forward.Kind]string{forward.Delivered: "delivered", forward.Rejected: "rejected", forward.Retry: "retry"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(k), k.String(), want)
		}
	}
	var zero forward.Outcome
	if zero.Kind != forward.Retry {
		t.Fatal("the zero Outcome must not acknowledge anything")
	}
}

func BenchmarkForward(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := forward.NewClient(forward.ClientOptions{})
	defer c.CloseIdleConnections()
	f := forward.New(c, time.Now)
	req := baseRequest(srv.URL)
	req.SigningSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	req.Header = http.Header{"X-Github-Event": {"issues"}}
	req.StaticHeaders = map[string]string{"Authorization": "Bearer t"}

	b.ReportAllocs()
	for b.Loop() {
		if out := f.Forward(context.Background(), req); out.Kind != forward.Delivered {
			b.Fatalf("outcome %+v", out)
		}
	}
}
