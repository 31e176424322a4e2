package ingress_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

// The provider's own trace context, which the gateway must only link to.
const (
	providerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	providerSpan  = "00f067aa0ba902b7"
)

// newTracedHarness is a harness whose gateway and forwarder trace into an
// in-memory exporter.
func newTracedHarness(t *testing.T, cfgs ...ingress.SourceConfig) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarnessWith(t, func(o *ingress.Options) {
		o.TracerProvider = tp
		o.Forwarder = o.Forwarder.WithTracer(tp)
	}, cfgs...)
	return h, exp
}

// spansByName indexes ended spans; a name seen twice fails the test.
func spansByName(t *testing.T, spans tracetest.SpanStubs) map[string]tracetest.SpanStub {
	t.Helper()
	out := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if _, dup := out[s.Name]; dup {
			t.Fatalf("span %q twice in %v", s.Name, names(spans))
		}
		out[s.Name] = s
	}
	return out
}

func names(spans tracetest.SpanStubs) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}

func attrsOf(s tracetest.SpanStub) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, a := range s.Attributes {
		m[a.Key] = a.Value.String()
	}
	return m
}

// noSecrets fails when any attribute of any span, or of its links and
// events, quotes one of the given strings.
func noSecrets(t *testing.T, spans tracetest.SpanStubs, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		var kvs []attribute.KeyValue
		kvs = append(kvs, s.Attributes...)
		for _, l := range s.Links {
			kvs = append(kvs, l.Attributes...)
		}
		for _, e := range s.Events {
			kvs = append(kvs, e.Attributes...)
		}
		for _, kv := range kvs {
			for _, sec := range secrets {
				if strings.Contains(kv.Value.String(), sec) {
					t.Errorf("span %s attribute %s = %q quotes %q", s.Name, kv.Key, kv.Value.String(), sec)
				}
			}
		}
		if strings.Contains(s.Status.Description, "Refund") {
			t.Errorf("span %s status quotes the body", s.Name)
		}
	}
}

// A delivered event is one trace: a new root server span linked (not
// parented) to the provider's traceparent, with verify, claim, forward and
// settle as its children, and the agent receives the forward span's
// traceparent.
func TestTraceOfADeliveredEvent(t *testing.T) {
	h, exp := newTracedHarness(t, githubSource("gh"))
	hdr := githubHeader("tr-1")
	hdr.Set("Traceparent", "00-"+providerTrace+"-"+providerSpan+"-01")
	hdr.Set("Tracestate", "vendor=provider")
	body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody("tr-1"))
	r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/gh", hdr, body))
	wantStatus(t, r, http.StatusOK)
	h.gw.Wait() // the server span ends after the answer is written
	spans := exp.GetSpans()
	by := spansByName(t, spans)
	root, ok := by["POST /hooks/{source}"]
	if !ok {
		t.Fatalf("no server span in %v", names(spans))
	}
	if root.Parent.IsValid() || root.SpanKind != trace.SpanKindServer {
		t.Errorf("server span: parent %v, kind %v; want a new root server span", root.Parent, root.SpanKind)
	}
	tid := root.SpanContext.TraceID()
	if tid.String() == providerTrace {
		t.Fatal("the server span joined the provider's trace")
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.TraceID().String() != providerTrace || root.Links[0].SpanContext.SpanID().String() != providerSpan {
		t.Errorf("links %+v, want one to the provider's %s/%s", root.Links, providerTrace, providerSpan)
	}
	if len(root.Links) == 1 && root.Links[0].SpanContext.TraceState().Len() != 0 {
		t.Errorf("the link keeps the provider's tracestate %q", root.Links[0].SpanContext.TraceState())
	}
	for _, name := range []string{ingress.SpanVerify, ingress.SpanClaim, forward.SpanForward, ingress.SpanSettle} {
		s, ok := by[name]
		if !ok {
			t.Errorf("no %s span in %v", name, names(spans))
			continue
		}
		if s.Parent.SpanID() != root.SpanContext.SpanID() || s.SpanContext.TraceID() != tid {
			t.Errorf("%s span: parent %s in trace %s, want a child of the server span %s", name, s.Parent.SpanID(), s.SpanContext.TraceID(), root.SpanContext.SpanID())
		}
		if s.Status.Code == codes.Error {
			t.Errorf("%s span is an error: %s", name, s.Status.Description)
		}
	}
	got := h.sink.requests("tr-1")
	if len(got) != 1 {
		t.Fatalf("agent got %d requests", len(got))
	}
	fs := by[forward.SpanForward]
	want := "00-" + tid.String() + "-" + fs.SpanContext.SpanID().String() + "-01"
	if tp := got[0].Header.Get("Traceparent"); tp != want {
		t.Errorf("agent got traceparent %q, want %q (the forward span, in the gateway's trace)", tp, want)
	}
	if ts := got[0].Header.Get("Tracestate"); ts != "" {
		t.Errorf("agent got the provider's tracestate %q", ts)
	}
	a := attrsOf(root)
	for k, v := range map[attribute.Key]string{"replyonce.source": "gh", "replyonce.event_id": "tr-1", "replyonce.run_id": "gh:tr-1",
		"replyonce.delivery": "1", "replyonce.decision": "delivered", "http.response.status_code": "200"} {
		if a[k] != v {
			t.Errorf("server span %s = %q, want %q", k, a[k], v)
		}
	}
	if c := attrsOf(by[ingress.SpanClaim]); c["replyonce.status"] != "claimed" || c["replyonce.event_id"] != "tr-1" {
		t.Errorf("claim span attributes %v, want status claimed and the event id", c)
	}
	noSecrets(t, spans, githubSecret, hdr.Get("X-Hub-Signature-256"), "Refund", string(body))
}

// A duplicate is a trace of its own, answered from the claim, with no
// forward; an agent failure marks the server and forward spans as errors,
// and a store failure the claim span.
func TestTraceStatusOnFailures(t *testing.T) {
	h, exp := newTracedHarness(t, githubSource("gh"))
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadGateway) })
	wantStatus(t, h.postGitHub(t, "gh", "tr-2"), http.StatusServiceUnavailable)
	h.gw.Wait()
	by := spansByName(t, exp.GetSpans())
	if s := by["POST /hooks/{source}"]; s.Status.Code != codes.Error || attrsOf(s)["replyonce.reason"] != "agent_unavailable" {
		t.Errorf("server span after an agent 502: status %v, attributes %v; want an error", s.Status, attrsOf(s))
	}
	if s := by[forward.SpanForward]; s.Status.Code != codes.Error || attrsOf(s)["http.response.status_code"] != "502" {
		t.Errorf("forward span after an agent 502: status %v, attributes %v", s.Status, attrsOf(s))
	}
	if s := by[ingress.SpanSettle]; s.Status.Code == codes.Error {
		t.Errorf("settle span is an error after a settle that worked")
	}

	exp.Reset()
	h.store.down.Store(true)
	wantStatus(t, h.postGitHub(t, "gh", "tr-3"), http.StatusServiceUnavailable)
	h.gw.Wait()
	by = spansByName(t, exp.GetSpans())
	if s := by[ingress.SpanClaim]; s.Status.Code != codes.Error {
		t.Errorf("claim span with the store down: %v, want an error", s.Status)
	}
	if _, ok := by[forward.SpanForward]; ok {
		t.Error("forwarded with the store down")
	}
	if s := by["POST /hooks/{source}"]; s.Status.Code != codes.Error || attrsOf(s)["replyonce.decision"] != "store_error" {
		t.Errorf("server span with the store down: %v %v", s.Status, attrsOf(s))
	}
}

// Without a tracer provider the agent gets no traceparent, and a provider's
// is not passed through.
func TestNoTracingNoTraceparent(t *testing.T) {
	h := newHarness(t, githubSource("gh"))
	hdr := githubHeader("tr-4")
	hdr.Set("Traceparent", "00-"+providerTrace+"-"+providerSpan+"-01")
	body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody("tr-4"))
	wantStatus(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/gh", hdr, body)), http.StatusOK)
	if tp := h.sink.requests("tr-4")[0].Header.Get("Traceparent"); tp != "" {
		t.Errorf("untraced gateway forwarded traceparent %q", tp)
	}
}

// A request for an unknown source is traced too (404), without the
// caller's path text as its source.
func TestTraceOfAnUnknownSource(t *testing.T) {
	h, exp := newTracedHarness(t, githubSource("gh"))
	wantStatus(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/nope", http.Header{}, []byte("{}"))), http.StatusNotFound)
	h.gw.Wait()
	s := spansByName(t, exp.GetSpans())["POST /hooks/{source}"]
	a := attrsOf(s)
	if a["http.response.status_code"] != "404" || a["replyonce.decision"] != "unknown_source" || s.Status.Code == codes.Error {
		t.Errorf("span %v %v, want a 404 unknown_source that is not an error", a, s.Status)
	}
	if v, ok := a["replyonce.source"]; ok {
		t.Errorf("replyonce.source = %q for a source that does not exist", v)
	}
}

// A provider that hangs up before the answer: the span, like the log, does
// not claim the answer was sent.
func TestTraceOfAnUnsentAnswer(t *testing.T) {
	h, exp := newTracedHarness(t, githubSource("gh"))
	arrived, release := make(chan struct{}), make(chan struct{})
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusOK)
	})
	// A listener of our own in front of the gateway, to learn when the
	// server has noticed the hang-up.
	seen := make(chan context.Context, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Context()
		h.gw.ServeHTTP(w, r)
	}))
	defer srv.Close()
	hdr := githubHeader("tr-5")
	body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, githubBody("tr-5"))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/hooks/gh", bytes.NewReader(body))
	req.Header = hdr
	done := make(chan error, 1)
	go func() {
		resp, err := h.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	serverCtx := <-seen
	<-arrived
	cancel() // the provider gives up while the agent works
	if err := <-done; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	<-serverCtx.Done() // the gateway's server has seen the hang-up
	close(release)
	h.gw.Wait()
	a := attrsOf(spansByName(t, exp.GetSpans())["POST /hooks/{source}"])
	if a["replyonce.unsent_status"] != "200" || a["http.response.status_code"] != "" || a["replyonce.decision"] != "delivered" {
		t.Errorf("server span %v, want delivered with unsent_status 200 and no response status", a)
	}
}

// A batch is one server span; each element has its own claim, forward and
// settle under it, named by its event id, and each agent request carries
// its own forward span's traceparent.
func TestTraceOfABatch(t *testing.T) {
	h, exp := newTracedHarness(t, ingress.SourceConfig{Name: "gc", Provider: "gocardless", Split: "default",
		Signature: signatures.Config{Secrets: []string{gcSecret}}})
	wantStatus(t, h.postGC(t, gcBatch(0, 3)), http.StatusOK)
	h.gw.Wait()
	spans := exp.GetSpans()
	var root tracetest.SpanStub
	claims, forwards := map[string]tracetest.SpanStub{}, map[string]tracetest.SpanStub{}
	for _, s := range spans {
		switch s.Name {
		case "POST /hooks/{source}":
			root = s
		case ingress.SpanClaim:
			claims[attrsOf(s)["replyonce.event_id"]] = s
		case forward.SpanForward:
			forwards[attrsOf(s)["replyonce.event_id"]] = s
		}
	}
	if attrsOf(root)["replyonce.decision"] != "batch" {
		t.Fatalf("server span %v", attrsOf(root))
	}
	for i := range 3 {
		id := fmt.Sprintf("EV%04d", i)
		c, f := claims[id], forwards[id]
		if c.Parent.SpanID() != root.SpanContext.SpanID() || f.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("%s: claim or forward span is not a child of the batch's server span", id)
		}
		want := "00-" + root.SpanContext.TraceID().String() + "-" + f.SpanContext.SpanID().String() + "-01"
		if got := h.sink.requests(id)[0].Header.Get("Traceparent"); got != want {
			t.Errorf("%s: agent got traceparent %q, want %q", id, got, want)
		}
	}
}

// The caller chooses its method, never a span's name: any method but
// POST names the server span "HTTP /hooks/{source}", and a method that is
// not HTTP's own is recorded as "_OTHER".
func TestSpanNamesCarryNoCallerMethod(t *testing.T) {
	h, exp := newTracedHarness(t, githubSource("gh"))
	for _, m := range []string{"BREW-COFFEE-" + strings.Repeat("X", 200), http.MethodGet, "PROPFIND"} {
		h.do(t, h.newRequest(t, m, "/hooks/gh", nil, nil))
		h.do(t, h.newRequest(t, m, "/hooks/nope", nil, nil))
	}
	h.gw.Wait()
	for _, s := range exp.GetSpans() {
		if s.Name != "HTTP /hooks/{source}" {
			t.Errorf("span %q, want HTTP /hooks/{source}", s.Name)
		}
		if m := attrsOf(s)["http.request.method"]; m != http.MethodGet && m != "_OTHER" {
			t.Errorf("method attribute %q", m)
		}
	}
}
