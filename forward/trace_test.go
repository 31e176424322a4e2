package forward_test

import (
	"context"
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
)

func tracedForwarder(t *testing.T) (*forward.Forwarder, *tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, clock := fixedClock()
	return newForwarder(t, clock).WithTracer(tp), exp, tp
}

// The agent receives the forward span's traceparent, under the caller's
// trace; a provider's own traceparent never reaches it.
func TestTracedForwardSendsItsOwnTraceparent(t *testing.T) {
	f, exp, tp := tracedForwarder(t)
	srv, got := captureServer(t)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "webhook")
	r := baseRequest(srv.URL + "/events?token=hunter2")
	r.Header = http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "Tracestate": {"provider=1"}}
	out := f.Forward(ctx, r)
	parent.End()
	if out.Kind != forward.Delivered {
		t.Fatalf("outcome %v: %v", out.Kind, out.Err)
	}
	h := (<-got).header
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != forward.SpanForward {
		t.Fatalf("spans %v, want forward then webhook", spans)
	}
	fs := spans[0]
	if fs.SpanKind != trace.SpanKindClient || fs.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("forward span kind %v parent %v, want a client child of the caller's span", fs.SpanKind, fs.Parent.SpanID())
	}
	want := "00-" + fs.SpanContext.TraceID().String() + "-" + fs.SpanContext.SpanID().String() + "-01"
	if tp := h.Get("Traceparent"); tp != want {
		t.Errorf("agent got traceparent %q, want the forward span's %q", tp, want)
	}
	if ts := h.Get("Tracestate"); ts != "" {
		t.Errorf("agent got the provider's tracestate %q", ts)
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, a := range fs.Attributes {
		attrs[a.Key] = a.Value
		if strings.Contains(a.Value.String(), "hunter2") || strings.Contains(a.Value.String(), "evt_1\",") {
			t.Errorf("attribute %s = %q carries the URL's query or the body", a.Key, a.Value.String())
		}
	}
	for k, v := range map[attribute.Key]string{"replyonce.event_id": "evt_1", "replyonce.run_id": "stripe:evt_1", "replyonce.source": "stripe",
		"replyonce.forward.outcome": "delivered", "http.response.status_code": "200", "replyonce.delivery": "2", "server.address": "127.0.0.1"} {
		if attrs[k].String() != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k].String(), v)
		}
	}
}

// An agent's 5xx marks the span as an error; a rejection does not.
func TestTracedForwardStatus(t *testing.T) {
	f, exp, _ := tracedForwarder(t)
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusUnprocessableEntity} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
		f.Forward(context.Background(), baseRequest(srv.URL))
		srv.Close()
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if spans[0].Status.Code != codes.Error || spans[1].Status.Code == codes.Error {
		t.Errorf("status 503 → %v, 422 → %v; want error, then not", spans[0].Status.Code, spans[1].Status.Code)
	}
}

// Without a tracer nothing is added to the request, not even a traceparent
// from the caller's context.
func TestUntracedForwardSetsNoTraceHeader(t *testing.T) {
	_, clock := fixedClock()
	f := newForwarder(t, clock)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "webhook")
	srv, got := captureServer(t)
	f.Forward(ctx, baseRequest(srv.URL))
	if h := (<-got).header; h.Get("Traceparent") != "" {
		t.Errorf("untraced forward sent traceparent %q", h.Get("Traceparent"))
	}
	if parent.(interface{ IsRecording() bool }).IsRecording() == false {
		t.Error("an untraced forward ended the caller's span")
	}
	parent.End()
}
