package ingress

import (
	"time"

	"github.com/labstack/echo/v4"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// inlineRecord is what the received index keeps of an inline attempt
// (ledger.SettleInline): the event's identity, its body only when the
// source sets forward.keep_body, and the attempt's outcome.
func (g *Gateway) inlineRecord(c echo.Context, d *delivery, src *Source, body []byte, run *ledger.Run, receivedAt time.Time, out forward.Outcome) ledger.InlineRecord {
	req := c.Request()
	ev := ledger.QueuedEvent{Source: src.Name, EventID: d.eventID, Scope: d.scope, ContentType: req.Header.Get("Content-Type"),
		ReceivedAt: receivedAt, ContextAt: run.ContextAt, Body: body}
	if src.cfg.Forward.KeepBody {
		ev.Header = pickHeaders(req.Header, src.passHeaders)
	}
	rec := ledger.InlineRecord{Event: ev, KeepBody: src.cfg.Forward.KeepBody,
		Attempt: ledger.AttemptRecord{Outcome: out.Kind.String(), AgentStatus: out.Status, Latency: out.Latency, Answer: out.Answer}}
	switch out.Kind {
	case forward.Delivered:
		rec.Status = ledger.DeliveryDelivered
	case forward.Rejected:
		rec.Status = ledger.DeliveryRejected
	default:
		rec.Status = ledger.DeliveryFailed
	}
	if out.Err != nil {
		rec.Attempt.Error = out.Err.Error()
	}
	return rec
}
