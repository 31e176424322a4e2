package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/ledger"
)

// loopBreakerObserver is the ledger's observer in the gateway: it counts the
// loop breaker's refusals and escalations by intent, and logs each
// escalation as a warning and raises an alert (through notifier, when it
// returns one), since a person has to look at it. Intents are the agent's
// own names (reply, refund), few and fixed, so they make bounded label
// values; scopes never become labels.
func loopBreakerObserver(reg prometheus.Registerer, log *zap.Logger, caps map[string]ledger.Cap, notifier func() *alerts.Notifier) func(ledger.Event) {
	limited := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "replyonce_rate_limited_total",
		Help: "Claims refused rate_limited by the loop breaker (ledger.caps), by intent.",
	}, []string{"intent"})
	escalations := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "replyonce_escalations_total",
		Help: "Escalations opened by the loop breaker (ledger.caps), by intent; list them with gateway ledger escalations.",
	}, []string{"intent"})
	reg.MustRegister(limited, escalations)
	return func(e ledger.Event) {
		switch {
		case e.Type == "refused" && e.Reason == ledger.ReasonRateLimited:
			limited.WithLabelValues(e.Intent).Inc()
		case e.Type == "escalation":
			escalations.WithLabelValues(e.Intent).Inc()
			log.Warn("loop breaker: cap reached, claim refused and escalated",
				zap.String("scope", e.Scope), zap.String("intent", e.Intent), zap.String("run_id", e.RunID),
				zap.String("escalation", e.EscalationID))
			c := caps[e.Intent]
			// Raise only queues: the claim that escalated is not slowed.
			notifier().Raise(alerts.Alert{Kind: alerts.Escalation, Scope: e.Scope, Intent: e.Intent, RunID: e.RunID,
				EscalationID: e.EscalationID, Max: c.Max, Window: c.Window})
		}
	}
}
