package ingress_test

import (
	"testing"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
)

// BenchmarkWebhookInline is BenchmarkWebhookUntraced (also inline) with
// and without keep_body: the settle keeps the event in the event log
// (ledger.SettleInline), and keep_body adds the body as a blob.
func BenchmarkWebhookInline(b *testing.B) {
	for _, keep := range []bool{false, true} {
		name := "keep_body=false"
		if keep {
			name = "keep_body=true"
		}
		b.Run(name, func(b *testing.B) {
			benchSource(b, func(c *ingress.SourceConfig) {
				c.Forward.Queue.Mode = dispatch.ModeInline
				c.Forward.KeepBody = keep
			})
		})
	}
}
