package ingress_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/replyonce/gateway/ingress"
)

// discard is an exporter that drops what it is given, so the benchmark
// measures making and batching the spans, not storing them.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

var _ sdktrace.SpanExporter = discard{}

// BenchmarkWebhookTraced is the handler with tracing on: every webhook
// sampled (ratio 1) or none (ratio 0), spans batched to an exporter that
// drops them.
func BenchmarkWebhookTraced(b *testing.B) {
	for _, tc := range []struct {
		name  string
		ratio float64
	}{{"sampled", 1}, {"sampled_out", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}),
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.ratio))))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			benchWebhooks(b, func(o *ingress.Options) {
				o.TracerProvider = tp
				o.Forwarder = o.Forwarder.WithTracer(tp)
			})
		})
	}
}
