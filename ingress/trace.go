package ingress

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names the tracer the gateway's spans come from.
const TracerName = "github.com/replyonce/gateway/ingress"

// Span names. The server span is named after its route, "POST
// /hooks/{source}"; its children after the step they time.
const (
	SpanVerify  = "verify"
	SpanClaim   = "ledger.begin_claim"
	SpanEnqueue = "ledger.enqueue"
	SpanSettle  = "ledger.settle"
)

// traceContext reads and writes W3C traceparent and tracestate only.
var traceContext propagation.TraceContext

// noSpan records nothing; ending it does nothing. Steps run without a
// tracer get it, so the code that times them has no branch of its own.
var noSpan = trace.SpanFromContext(context.Background())

// tracerOf is the gateway's tracer, nil when tracing is off.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// startWebhook begins the server span of one webhook request and puts it in
// the request's context. The span is a new root: the provider's own
// traceparent, if it sent one, is untrusted (anyone can send one, and
// joining it would let a caller choose our trace ids and sampling), so it
// is only linked.
func (g *Gateway) startWebhook(c echo.Context) trace.Span {
	if g.tracer == nil {
		return noSpan
	}
	req := c.Request()
	method := spanMethod(req.Method)
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", "/hooks/{source}"),
			attribute.String("url.path", req.URL.Path),
		)}
	if pc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.HeaderCarrier(req.Header))); pc.IsValid() {
		// Its tracestate is the provider's vendor data: nothing to keep.
		pc = pc.WithTraceState(trace.TraceState{})
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: pc,
			Attributes: []attribute.KeyValue{attribute.String("replyonce.link", "provider_traceparent")}}))
	}
	name := "HTTP /hooks/{source}"
	if method == http.MethodPost {
		name = "POST /hooks/{source}"
	}
	ctx, span := g.tracer.Start(req.Context(), name, opts...)
	c.SetRequest(req.WithContext(ctx))
	return span
}

// spanMethod is the request's method as spans record it: a method of
// HTTP's own, or "_OTHER" (OpenTelemetry's word) for any other token, which
// is the caller's text. Span names carry no method but POST: a caller
// choosing its method must not choose span names.
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// endWebhook records what the request came to and ends its span. Only
// identifiers and outcomes: never a secret, a signature, a header or the
// body, and not the reason text, which can quote the agent's or the
// store's error.
func endWebhook(span trace.Span, c echo.Context, d *delivery, status int, reason string) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if !answerSent(c) {
		// As in the log: the provider heard nothing.
		span.SetAttributes(attribute.Int("replyonce.unsent_status", status))
	} else {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	span.SetAttributes(attribute.String("replyonce.decision", d.decision.String()))
	if d.source != nil {
		// Only a configured name: the path of a 404 is the caller's text.
		span.SetAttributes(attribute.String("replyonce.source", d.source.Name))
	}
	if d.eventID != "" {
		span.SetAttributes(attribute.String("replyonce.event_id", d.eventID), attribute.String("replyonce.run_id", d.runID),
			attribute.Int("replyonce.delivery", d.deliveryN))
	}
	if reason != "" {
		span.SetAttributes(attribute.String("replyonce.reason", reason))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(status)+" "+d.decision.String())
	}
	span.End()
}

// startStep begins a child span of the one in ctx for one step of the
// request: verify, a ledger call.
func (g *Gateway) startStep(ctx context.Context, name string, d *delivery) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, noSpan
	}
	ctx, span := g.tracer.Start(ctx, name)
	if d.eventID != "" {
		// Set here too: the elements of a batch share one server span.
		span.SetAttributes(attribute.String("replyonce.event_id", d.eventID), attribute.String("replyonce.run_id", d.runID))
	}
	return ctx, span
}

// endStep ends a step's span; a failed step (err) marks it as an error,
// with only what (a fixed phrase) as its description. status, when not
// empty, is the ledger's answer (claimed, replayed, ...).
func endStep(span trace.Span, err error, what, status string) {
	if span.IsRecording() {
		if status != "" {
			span.SetAttributes(attribute.String("replyonce.status", status))
		}
		if err != nil {
			span.SetStatus(codes.Error, what)
		}
	}
	span.End()
}
