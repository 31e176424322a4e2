package forward

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names the tracer Forward's spans come from.
const TracerName = "github.com/replyonce/gateway/forward"

// SpanForward is the name of the client span of one forward.
const SpanForward = "forward"

// WithTracer returns a copy of f that records each forward as a client
// span under tp, a child of the span in the forward's context, and sends
// that span's context to the agent as a W3C traceparent header, so the
// agent's own spans join the gateway's trace. A nil tp returns f itself:
// without tracing, Forward starts no span and sets no header.
//
// The span carries the agent's host and port, never the forward URL's
// path or query (they may hold a token), and none of the request's
// headers or body.
func (f *Forwarder) WithTracer(tp trace.TracerProvider) *Forwarder {
	if tp == nil {
		return f
	}
	c := *f
	c.tracer = tp.Tracer(TracerName)
	return &c
}

// traceContext propagates only the W3C traceparent and tracestate: the
// agent is told which trace it is part of, and nothing else (no baggage).
var traceContext propagation.TraceContext

// startSpan begins the forward's client span; without a tracer it returns
// a span that records nothing and costs nothing.
func (f *Forwarder) startSpan(ctx context.Context, r *Request) (context.Context, trace.Span) {
	if f.tracer == nil {
		// Not the span in ctx: that one belongs to the caller, who ends it.
		return ctx, noSpan
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", http.MethodPost),
		attribute.String("replyonce.source", r.Source),
		attribute.String("replyonce.event_id", r.EventID),
		attribute.String("replyonce.run_id", r.RunID),
		attribute.Int("replyonce.delivery", r.Delivery),
	}
	if u, err := url.Parse(r.URL); err == nil && u.Host != "" {
		host, port := u.Hostname(), u.Port()
		attrs = append(attrs, attribute.String("server.address", host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("server.port", p))
		} else if u.Scheme == "https" {
			attrs = append(attrs, attribute.Int("server.port", 443))
		} else if u.Scheme == "http" {
			attrs = append(attrs, attribute.Int("server.port", 80))
		}
	}
	return f.tracer.Start(ctx, SpanForward, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// noSpan records nothing; ending it does nothing.
var noSpan = trace.SpanFromContext(context.Background())

// inject writes the span's trace context into the forwarded request.
func (f *Forwarder) inject(ctx context.Context, h http.Header) {
	if f.tracer != nil {
		traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// endSpan records what the agent's answer came to. An answer that the
// provider or the dispatcher must retry (no answer, 5xx, a fault) marks
// the span as an error; a rejection is the agent's considered answer and
// is not.
func endSpan(span trace.Span, out Outcome) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if out.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", out.Status))
	}
	span.SetAttributes(attribute.String("replyonce.forward.outcome", out.Kind.String()))
	switch out.Kind {
	case Delivered, Rejected:
	default:
		span.SetStatus(codes.Error, "agent "+out.Kind.String())
	}
	span.End()
}
