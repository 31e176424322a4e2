package dispatch

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
)

// TracerName names the tracer the dispatcher's spans come from.
const TracerName = "github.com/replyonce/gateway/ingress/dispatch"

var noSpan = trace.SpanFromContext(context.Background())

// startAttempt begins the span of one delivery attempt. It is a child of
// the request that accepted the event, whose trace context the event
// carries (ingress.EventTrace), so an event's accept and every attempt to
// deliver it, hours later included, read as one trace. An event accepted
// without tracing gets a new root per attempt.
func (d *Dispatcher) startAttempt(ctx context.Context, s *source, t ledger.Taken, ev *ledger.QueuedEvent) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, noSpan
	}
	if parent := ingress.EventTrace(*ev); parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return d.tracer.Start(ctx, ingress.SpanDispatch, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
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
