package dispatch

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// TracerName names the tracer the dispatcher's spans come from.
const TracerName = "github.com/replyonce/gateway/ingress/dispatch"

// SpanDispatch is the name of the span of one delivery attempt.
const SpanDispatch = "dispatch"

// TraceHeader is the key under which a queued event's stored headers keep
// the trace context of the request that accepted it, so that each of its
// delivery attempts joins that trace (EventTrace). It is a Replyonce-*
// name, which the forwarder never passes to the agent, and it is always
// the gateway's own: a value the provider sent under that name is
// dropped (RememberTrace).
const TraceHeader = "Replyonce-Traceparent"

// traceContext reads and writes W3C traceparent and tracestate only.
var traceContext propagation.TraceContext

// RememberTrace stores the accepting request's trace context (the span in
// ctx) in a queued event's headers under TraceHeader, or clears whatever
// the provider sent under that name when ctx carries none.
func RememberTrace(ctx context.Context, h http.Header) {
	delete(h, TraceHeader)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return // tracing is off
	}
	// Stored sampled or not, so the attempts follow the accept's sampling.
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if v := carrier.Get("traceparent"); v != "" {
		h[TraceHeader] = []string{v}
	}
}

// EventTrace is the trace context of the request that accepted a queued
// event (the zero SpanContext when it was accepted without tracing). Each
// delivery attempt's span is a child of it.
func EventTrace(ev ledger.QueuedEvent) trace.SpanContext {
	v := ev.Header[TraceHeader]
	if len(v) == 0 {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": v[0]})
	return trace.SpanContextFromContext(ctx)
}

var noSpan = trace.SpanFromContext(context.Background())

// startAttempt begins the span of one delivery attempt. It is a child of
// the request that accepted the event, whose trace context the event
// carries (EventTrace), so an event's accept and every attempt to
// deliver it, hours later included, read as one trace. An event accepted
// without tracing gets a new root per attempt.
func (d *Dispatcher) startAttempt(ctx context.Context, s *source, t ledger.Taken, ev *ledger.QueuedEvent) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, noSpan
	}
	if parent := EventTrace(*ev); parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return d.tracer.Start(ctx, SpanDispatch, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("replyonce.source", s.src.Name),
		attribute.String("replyonce.event_id", t.Item.EventID),
		attribute.String("replyonce.run_id", t.Run.ID),
		attribute.Int("replyonce.delivery", t.Run.Delivery),
		attribute.Int("replyonce.attempt", t.Item.Failures+1),
	))
}

// endAttempt records the attempt's outcome: delivered, rejected, retry,
// fault or dead, and the agent's status. An attempt the agent failed or
// whose outcome could not be recorded is an error.
func endAttempt(span trace.Span, label string, out forward.Outcome, storeErr error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("replyonce.decision", label))
		if out.Status != 0 {
			span.SetAttributes(attribute.Int("replyonce.agent_status", out.Status))
		}
		switch {
		case storeErr != nil:
			span.SetStatus(codes.Error, "recording the outcome failed")
		case out.Kind != forward.Delivered && out.Kind != forward.Rejected:
			span.SetStatus(codes.Error, "agent "+out.Kind.String())
		}
	}
	span.End()
}
