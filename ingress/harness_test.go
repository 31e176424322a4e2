package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.uber.org/zap"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
)

// TestMain fails the package when any test leaves a goroutine behind. Nothing
// is ignored: every server, transport and held agent request is closed or
// released by the test that made it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Secrets the fake providers sign with. The Standard Webhooks one is the
// format forward.signing_secret takes ("whsec_" + base64).
const (
	githubSecret   = "gh-test-secret-7c1f"
	stripeSecret   = "whsec_stripe_test_0a9b8c7d"
	slackSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	zoomSecret     = "zoom-secret-token-4d2e"
	twitchSecret   = "twitch-eventsub-secret-0123"
	metaAppSecret  = "meta-app-secret-55aa"
	metaVerify     = "meta-verify-token-91"
	graphState     = "graph-client-state-secret"
	forwardSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	agentAuthToken = "Bearer agent-token-xyz"
)

// testClock is the clock shared by the gateway, the ledger and the fake
// providers' signers: wall time plus an offset a test can move forward.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

var errStoreDown = errors.New("teststore: connection refused")

// switchStore is the memory store behind a switch that makes it unreachable,
// and a counter of the writes the ledger asked for.
type switchStore struct {
	*memory.Store
	down   atomic.Bool
	writes atomic.Int64
	// after, when set, runs once a Transact has reached the store (its
	// write, if any, made) and decides what the caller hears: a stall, a
	// lost answer, a clock that jumps.
	after atomic.Pointer[func(ctx context.Context) error]
}

func (s *switchStore) setAfter(f func(ctx context.Context) error) { s.after.Store(&f) }

var _ ledger.Store = (*switchStore)(nil)

func (s *switchStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	if s.down.Load() {
		return fmt.Errorf("teststore: transact %q: %w", scope, errStoreDown)
	}
	err := s.Store.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
		w, err := fn(cur)
		if err == nil && w != nil {
			s.writes.Add(1)
		}
		return w, err
	})
	if f := s.after.Load(); f != nil && *f != nil && err == nil {
		return (*f)(ctx)
	}
	return err
}

func (s *switchStore) Read(ctx context.Context, scope string) ([]byte, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("teststore: read %q: %w", scope, errStoreDown)
	}
	return s.Store.Read(ctx, scope)
}

// sinkRequest is one forwarded request as the agent saw it.
type sinkRequest struct {
	Header http.Header
	Body   []byte
}

// sink is the agent: it records every request by Replyonce-Event-Id and
// answers as the test tells it (200 by default).
type sink struct {
	*httptest.Server
	mu     sync.Mutex
	byID   map[string][]sinkRequest
	total  int
	answer func(w http.ResponseWriter, r *http.Request, n int) // n: which request for this event id, from 1
}

func newSink(t *testing.T) *sink {
	s := &sink{byID: map[string][]sinkRequest{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get(forward.HeaderEventID)
	s.mu.Lock()
	s.byID[id] = append(s.byID[id], sinkRequest{Header: r.Header.Clone(), Body: body})
	n := len(s.byID[id])
	s.total++
	answer := s.answer
	s.mu.Unlock()
	if answer == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	answer(w, r, n)
}

func (s *sink) setAnswer(f func(w http.ResponseWriter, r *http.Request, n int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = f
}

func (s *sink) count(eventID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID[eventID])
}

func (s *sink) requests(eventID string) []sinkRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkRequest(nil), s.byID[eventID]...)
}

func (s *sink) totalCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// harness is one gateway on loopback with its ledger, store and agent.
type harness struct {
	clock  *testClock
	store  *switchStore
	ledger *ledger.Ledger
	sink   *sink
	gw     *ingress.Gateway
	srv    *httptest.Server
	client *http.Client

	// What the gateway's listener saw of the last request: its
	// Transfer-Encoding and Content-Length.
	lastTE atomic.Value // []string
	lastCL atomic.Int64
	// serving maps a client connection's address to a channel closed
	// when the gateway's handler of its current request has returned:
	// the answer leaves before the handler writes its log line.
	serving sync.Map // remote address → chan struct{}
}

// newHarness starts a gateway serving cfgs. A source without a forward URL
// forwards to the harness's sink.
func newHarness(t *testing.T, cfgs ...ingress.SourceConfig) *harness {
	t.Helper()
	return newHarnessWith(t, nil, cfgs...)
}

// newLoggedHarness is newHarness with the gateway logging to log.
func newLoggedHarness(t *testing.T, log *zap.Logger, cfgs ...ingress.SourceConfig) *harness {
	t.Helper()
	return newHarnessWith(t, func(o *ingress.Options) { o.Logger = log }, cfgs...)
}

// newHarnessWith is newHarness with the gateway's options changed by mod.
func newHarnessWith(t *testing.T, mod func(*ingress.Options), cfgs ...ingress.SourceConfig) *harness {
	t.Helper()
	h := &harness{clock: &testClock{}}
	h.sink = newSink(t) // closed last: the gateway's forwards end first
	h.store = &switchStore{Store: memory.New(h.clock.Now)}
	h.ledger = ledger.New(h.store, ledger.Options{Clock: h.clock.Now})
	var sources []*ingress.Source
	for _, c := range cfgs {
		if c.Forward.URL == "" {
			c.Forward.URL = h.sink.URL + "/events"
		}
		if c.Forward.Queue.Mode == "" {
			// The harness's gateway has no dispatcher: its sources are
			// inline unless a test asks for queued.
			c.Forward.Queue.Mode = dispatch.ModeInline
		}
		s, err := ingress.NewSource(c)
		if err != nil {
			t.Fatalf("NewSource(%s): %v", c.Name, err)
		}
		sources = append(sources, s)
	}
	fclient := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(fclient.CloseIdleConnections)
	opts := ingress.Options{
		Sources: sources, Ledger: h.ledger, Forwarder: forward.New(fclient, time.Now), Clock: h.clock.Now,
	}
	if mod != nil {
		mod(&opts)
	}
	gw, err := ingress.New(opts)
	if err != nil {
		t.Fatalf("ingress.New: %v", err)
	}
	h.gw = gw
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.lastTE.Store(append([]string(nil), r.TransferEncoding...))
		h.lastCL.Store(r.ContentLength)
		done := make(chan struct{})
		h.serving.Store(r.RemoteAddr, done)
		defer close(done)
		gw.ServeHTTP(w, r)
	}))
	h.client = &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(h.client.CloseIdleConnections)
	t.Cleanup(func() {
		h.srv.Close()
		gw.Wait()
	})
	return h
}

// reply is what the provider sees.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) String() string {
	return fmt.Sprintf("%d %v %s", r.Status, r.Header, r.Body)
}

// answerBody is the gateway's 2xx JSON.
type answerBody struct {
	Status  string `json:"status"`
	EventID string `json:"event_id"`
	RunID   string `json:"run_id"`
	Outcome string `json:"outcome"`
}

func (r reply) answer(t *testing.T) answerBody {
	t.Helper()
	var a answerBody
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("answer body %q is not JSON: %v", r.Body, err)
	}
	return a
}

// retryAfter returns the Retry-After in whole seconds, failing the test when
// it is absent or not delta-seconds.
func (r reply) retryAfter(t *testing.T) int {
	t.Helper()
	v := r.Header.Get("Retry-After")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("Retry-After %q is not delta-seconds (reply %s)", v, r)
	}
	return n
}

func (r reply) mediaType(t *testing.T) string {
	t.Helper()
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		t.Fatalf("Content-Type %q: %v", r.Header.Get("Content-Type"), err)
	}
	return mt
}

// send sends req, reads the whole answer and waits for the gateway's
// handler to return (its log line and metrics are written by then); safe
// from any goroutine.
func (h *harness) send(req *http.Request) (reply, error) {
	var local string
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(c httptrace.GotConnInfo) { local = c.Conn.LocalAddr().String() },
	}))
	resp, err := h.client.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("reading the answer to %s %s: %w", req.Method, req.URL, err)
	}
	if done, ok := h.serving.Load(local); ok {
		select {
		case <-done.(chan struct{}):
		case <-time.After(10 * time.Second):
			return reply{}, fmt.Errorf("%s %s: the handler did not return 10 s after its answer", req.Method, req.URL)
		}
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// do is send for the test goroutine: it fails the test on a transport error.
func (h *harness) do(t *testing.T, req *http.Request) reply {
	t.Helper()
	r, err := h.send(req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newRequest builds a request to the gateway; pathAndQuery starts with "/".
func (h *harness) newRequest(t *testing.T, method, pathAndQuery string, header http.Header, body []byte) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+pathAndQuery, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = append([]string(nil), v...)
	}
	return req
}

// sign signs (method, url, header, body) as provider would with secrets at
// the given time: header gains the signature headers, and the body comes
// back (rewritten for the schemes that sign inside it).
func sign(t *testing.T, provider string, cfg signatures.Config, at time.Time, method, url string, header http.Header, body []byte) []byte {
	t.Helper()
	s, err := signatures.NewSigner(provider, cfg)
	if err != nil {
		t.Fatalf("NewSigner(%s): %v", provider, err)
	}
	r := &signatures.Request{Method: method, URL: url, Header: header, Body: body}
	if err := s.Sign(r, at); err != nil {
		t.Fatalf("sign %s: %v", provider, err)
	}
	return r.Body
}

// githubSource is a GitHub source forwarding to the sink, changed by mods.
// Replay refusal is off: these tests send one body under many ids, and
// count the store's writes; replay_test.go tests it on.
func githubSource(name string, mods ...func(*ingress.SourceConfig)) ingress.SourceConfig {
	off := false
	c := ingress.SourceConfig{Name: name, Provider: "github", Signature: signatures.Config{Secrets: []string{githubSecret}}, RefuseReplays: &off}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func stripeSource(name string, mods ...func(*ingress.SourceConfig)) ingress.SourceConfig {
	c := ingress.SourceConfig{Name: name, Provider: "stripe", Signature: signatures.Config{Secrets: []string{stripeSecret}}}
	for _, m := range mods {
		m(&c)
	}
	return c
}

// githubHeader is what GitHub sends besides its signature.
func githubHeader(eventID string) http.Header {
	h := http.Header{
		"Content-Type":      {"application/json"},
		"User-Agent":        {"GitHub-Hookshot/abc123"},
		"X-Github-Event":    {"issues"},
		"X-Github-Hook-Id":  {"292430182"},
		"X-Github-Delivery": {eventID},
	}
	if eventID == "" {
		h.Del("X-Github-Delivery")
	}
	return h
}

func githubBody(eventID string) []byte {
	return []byte(`{"action":"opened",  "issue":{"number":7,"title":"Refund ` + eventID + `"}, "z":1.50}`)
}

// postGitHub sends one correctly signed GitHub delivery to /hooks/{source}.
func (h *harness) postGitHub(t *testing.T, source, eventID string) reply {
	t.Helper()
	hdr := githubHeader(eventID)
	body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody(eventID))
	return h.do(t, h.newRequest(t, http.MethodPost, "/hooks/"+source, hdr, body))
}

// postStripe sends one Stripe delivery signed at the given time.
func (h *harness) postStripe(t *testing.T, source string, body []byte, at time.Time) reply {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	body = sign(t, "stripe", signatures.Config{Secrets: []string{stripeSecret}}, at, http.MethodPost, "", hdr, body)
	return h.do(t, h.newRequest(t, http.MethodPost, "/hooks/"+source, hdr, body))
}

// assertNothingRecorded checks that the ledger holds nothing for scope: no
// document in the store and no history.
func (h *harness) assertNothingRecorded(t *testing.T, scope string) {
	t.Helper()
	ctx := context.Background()
	doc, err := h.store.Read(ctx, scope)
	if err != nil {
		t.Fatalf("store.Read(%q): %v", scope, err)
	}
	if doc != nil {
		t.Errorf("store has a document for scope %q: %s", scope, doc)
	}
	hist, err := h.ledger.Views().History(ctx, scope)
	if err != nil {
		t.Fatalf("History(%q): %v", scope, err)
	}
	if len(hist) != 0 {
		t.Errorf("ledger history for scope %q has %d entries, want none: %+v", scope, len(hist), hist)
	}
}

// deliverEntry returns the scope's one deliver entry.
func (h *harness) deliverEntry(t *testing.T, scope string) ledger.Entry {
	t.Helper()
	hist, err := h.ledger.Views().History(context.Background(), scope)
	if err != nil {
		t.Fatalf("History(%q): %v", scope, err)
	}
	var found []ledger.Entry
	for _, e := range hist {
		if e.Intent == ingress.IntentDeliver {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("scope %q has %d deliver entries, want 1: %+v", scope, len(found), hist)
	}
	return found[0]
}

func wantStatus(t *testing.T, r reply, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.Status, status, r.Body)
	}
}

func wantAnswer(t *testing.T, r reply, status, eventID, runID string) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	a := r.answer(t)
	if a.Status != status || a.EventID != eventID || a.RunID != runID {
		t.Fatalf("answer = %+v, want status %q event %q run %q", a, status, eventID, runID)
	}
}

func contains(haystack []byte, needles ...string) []string {
	var found []string
	low := strings.ToLower(string(haystack))
	for _, n := range needles {
		if strings.Contains(low, strings.ToLower(n)) {
			found = append(found, n)
		}
	}
	return found
}

// githubDelivery signs one GitHub delivery once and returns a maker of
// identical requests, as the provider sends on every retry of it.
func (h *harness) githubDelivery(t *testing.T, source, eventID string) func() *http.Request {
	t.Helper()
	hdr := githubHeader(eventID)
	body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody(eventID))
	return func() *http.Request {
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/hooks/"+source, bytes.NewReader(body))
		if err != nil {
			panic(err) // the URL is the harness's own
		}
		for k, v := range hdr {
			req.Header[k] = append([]string(nil), v...)
		}
		return req
	}
}
