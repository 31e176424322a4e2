package dispatch_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
)

// Each delivery attempt of a queued event is a dispatch span, a child of
// the request that accepted the event, whether the attempt was handed over
// at once or found later in the store; the agent receives the traceparent
// of the attempt's forward span, and never the stored trace header.
func TestTraceOfAQueuedDelivery(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newTracedHarness(t, queuedSource(), tp)
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	if st, _ := h.post(t, "q-1"); st != http.StatusAccepted {
		t.Fatalf("accept: %d", st)
	}
	settle(t, h.d) // the first attempt, handed over with the event in memory
	q := h.item(t, "q-1")
	h.clock.Advance(q.NextAt.Sub(h.clock.Now()))
	h.sweep(t) // the retry, read back from the store
	h.srv.Close()

	var root *tracetest.SpanStub
	var enqueue, dispatches, forwards []tracetest.SpanStub
	spans := exp.GetSpans()
	for i, s := range spans {
		switch s.Name {
		case "POST /hooks/{source}":
			if root != nil {
				t.Fatal("two server spans")
			}
			root = &spans[i]
		case ingress.SpanEnqueue:
			enqueue = append(enqueue, s)
		case dispatch.SpanDispatch:
			dispatches = append(dispatches, s)
		case forward.SpanForward:
			forwards = append(forwards, s)
		}
	}
	if root == nil || len(enqueue) != 1 || len(dispatches) != 2 || len(forwards) != 2 {
		t.Fatalf("spans: server %v, %d enqueue, %d dispatch, %d forward; want 1, 1, 2, 2", root != nil, len(enqueue), len(dispatches), len(forwards))
	}
	tid, rootID := root.SpanContext.TraceID(), root.SpanContext.SpanID()
	if enqueue[0].Parent.SpanID() != rootID || attr(enqueue[0], "replyonce.status") != "queued" {
		t.Errorf("enqueue span: parent %s, status %q; want a child of the server span, queued", enqueue[0].Parent.SpanID(), attr(enqueue[0], "replyonce.status"))
	}
	reqs := h.agent.requests("q-1")
	if len(reqs) != 2 {
		t.Fatalf("agent got %d requests, want 2", len(reqs))
	}
	for i, d := range dispatches {
		if d.Parent.SpanID() != rootID || d.SpanContext.TraceID() != tid || d.SpanKind != trace.SpanKindConsumer {
			t.Errorf("attempt %d: parent %s trace %s kind %v; want a consumer child of the server span %s", i+1, d.Parent.SpanID(), d.SpanContext.TraceID(), d.SpanKind, rootID)
		}
		wantAttrs := map[string]string{"replyonce.source": "github", "replyonce.event_id": "q-1", "replyonce.run_id": "github:q-1",
			"replyonce.delivery": []string{"1", "2"}[i], "replyonce.decision": []string{"retry", "delivered"}[i],
			"replyonce.agent_status": []string{"502", "200"}[i]}
		for k, v := range wantAttrs {
			if got := attr(d, k); got != v {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, k, got, v)
			}
		}
		if (d.Status.Code == codes.Error) != (i == 0) {
			t.Errorf("attempt %d: status %v; only the 502 is an error", i+1, d.Status)
		}
		f := forwards[i]
		if f.Parent.SpanID() != d.SpanContext.SpanID() {
			t.Errorf("forward %d is not a child of its dispatch span", i+1)
		}
		want := "00-" + tid.String() + "-" + f.SpanContext.SpanID().String() + "-01"
		if got := reqs[i].Header.Get("Traceparent"); got != want {
			t.Errorf("attempt %d: agent got traceparent %q, want %q", i+1, got, want)
		}
		if v := reqs[i].Header.Get(dispatch.TraceHeader); v != "" {
			t.Errorf("attempt %d: agent got the stored %s %q", i+1, dispatch.TraceHeader, v)
		}
	}
}

// An event accepted without tracing still gets a span per attempt from a
// tracing dispatcher: a root of its own.
func TestTraceOfAnUntracedAccept(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, queuedSource())
	h.tp = tp
	d := h.newDispatcher(t, forward.New(nil, h.clock.Now).WithTracer(tp), nil)
	h.d.StopTaking() // the gateway's own dispatcher takes nothing: d does
	if st, _ := h.post(t, "q-2"); st != http.StatusAccepted {
		t.Fatalf("accept: %d", st)
	}
	if _, err := d.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, d)
	var n int
	for _, s := range exp.GetSpans() {
		if s.Name == dispatch.SpanDispatch {
			n++
			if s.Parent.IsValid() {
				t.Errorf("dispatch span has parent %v, want a root", s.Parent)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d dispatch spans, want 1", n)
	}
	if tp := h.agent.requests("q-2")[0].Header.Get("Traceparent"); tp == "" {
		t.Error("no traceparent from a tracing dispatcher")
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}
