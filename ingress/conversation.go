package ingress

import (
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
)

// Conversation-aware delivery, the gateway's side: the source's rules go
// with every queued event into the ledger (which decides); what the ledger
// settled without forwarding is counted (dispatch.ConversationMetrics),
// and the cancellation notices it calls for are handed to the dispatcher.

// notifyCancels hands the notices of one Enqueue to the dispatcher.
func (g *Gateway) notifyCancels(res ledger.Enqueued, newEvent string) {
	if g.handoff == nil {
		return
	}
	for _, in := range res.Interrupted {
		to := g.sources[in.Item.Source] // the interrupted event's source decides
		if to == nil || to.queued.Policy.Cancel != dispatch.CancelNotify {
			continue
		}
		g.handoff.SendCancel(to.queued, dispatch.CancelNotice{Type: "replyonce.cancel", Reason: "superseded", Source: in.Item.Source,
			Scope: in.Item.Scope, EventID: in.Item.EventID, RunID: in.Item.RunID, Delivery: in.Delivery, FencingToken: in.Token,
			SupersededBy: in.By, SupersededByID: newEvent})
	}
}
