package ingress

import (
	"go.uber.org/zap/zapcore"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// decision is what the gateway made of one request, or of one element of
// a batch. Its name is the "decision" field of the request's log line and
// the replyonce.decision attribute of its span; dashboards and alerts read
// them, so a name never changes once shipped.
type decision uint8

// The decisions, in the order a request can reach them.
const (
	decNone            decision = iota // nothing decided yet
	decUnknownSource                   // 404: no such source
	decMethod                          // 405
	decBody                            // the body could not be read, or is over max_body
	decHandshake                       // a provider handshake, answered here
	decUnauthorized                    // a bad, missing or stale signature
	decNoEventID                       // the event id rule did not resolve: 400
	decBadEventID                      // an event id no store can hold: 400
	decBadScope                        // a scope no store can hold: 400
	decBadContextAt                    // a context_at before 1970 or far ahead: 400
	decIgnored                         // an ignore rule, preset or echo_of matched: 200, nothing written
	decStoreError                      // the ledger could not be read or written: 503
	decQueued                          // recorded for queued delivery: 202
	decDuplicate                       // already delivered, rejected or recorded: 200
	decInFlight                        // the same event is being delivered elsewhere: 503
	decRefused                         // the ledger refused the run's claim: 503
	decAmbiguous                       // the ledger cannot tell whether it was delivered: 503
	decFailed                          // the ledger's claim failed for good: 503
	decClaimExpiring                   // the claim came back too late to forward safely: 503
	decShuttingDown                    // the gateway is stopping: 503
	decDelivered                       // the agent answered 2xx
	decRejected                        // the agent rejected the event for good: 200
	decRetry                           // the agent failed or timed out: 503
	decFault                           // the agent's answer points at the configuration: 503
	decBatch                           // every element of a batch recorded: 200
	decBatchRefused                    // a batch that does not split: 400
	decBatchEmpty                      // a batch with no element: 200
	decBatchIncomplete                 // an element of a batch failed: its answer
	decReplay                          // another event id already carried this signed content: 200 duplicate (replay.go)
	numDecisions
)

// decisions is the one table of what each decision is called and how its
// log line is written. name is also the outcome label under which
// replyonce_forwards_total counts the forward's own decisions (delivered,
// rejected, retry, fault). level is the least level of the line: a 5xx
// answer makes it a warning and a store failure an error whatever the
// decision (see logLevel). throttled lines are rate-limited per source
// and rule (404s of every unknown source together), since an
// unauthenticated caller or a bot talking to itself can send many; 401
// and 413 answers are throttled per status too.
var decisions = [numDecisions]struct {
	name      string
	level     zapcore.Level
	throttled bool
}{
	decNone:            {"", zapcore.InfoLevel, false},
	decUnknownSource:   {"unknown_source", zapcore.InfoLevel, true},
	decMethod:          {"method", zapcore.InfoLevel, true},
	decBody:            {"body", zapcore.InfoLevel, false},
	decHandshake:       {"handshake", zapcore.InfoLevel, true},
	decUnauthorized:    {"unauthorized", zapcore.InfoLevel, false},
	decNoEventID:       {"no_event_id", zapcore.InfoLevel, false},
	decBadEventID:      {"bad_event_id", zapcore.InfoLevel, false},
	decBadScope:        {"bad_scope", zapcore.InfoLevel, false},
	decBadContextAt:    {"bad_context_at", zapcore.InfoLevel, false},
	decIgnored:         {"ignored", zapcore.InfoLevel, true},
	decStoreError:      {"store_error", zapcore.ErrorLevel, false},
	decQueued:          {"queued", zapcore.InfoLevel, false},
	decDuplicate:       {"duplicate", zapcore.InfoLevel, false},
	decInFlight:        {"in_flight", zapcore.WarnLevel, false},
	decRefused:         {string(ledger.StatusRefused), zapcore.WarnLevel, false},
	decAmbiguous:       {string(ledger.StatusAmbiguous), zapcore.WarnLevel, false},
	decFailed:          {string(ledger.StatusFailed), zapcore.WarnLevel, false},
	decClaimExpiring:   {"claim_expiring", zapcore.WarnLevel, false},
	decShuttingDown:    {"shutting_down", zapcore.WarnLevel, false},
	decDelivered:       {"delivered", zapcore.InfoLevel, false},
	decRejected:        {"rejected", zapcore.InfoLevel, false},
	decRetry:           {"retry", zapcore.WarnLevel, false},
	decFault:           {"fault", zapcore.WarnLevel, false},
	decBatch:           {"batch", zapcore.InfoLevel, false},
	decBatchRefused:    {"batch_refused", zapcore.InfoLevel, false},
	decBatchEmpty:      {"batch_empty", zapcore.InfoLevel, false},
	decBatchIncomplete: {"batch_incomplete", zapcore.InfoLevel, false},
	decReplay:          {"replay", zapcore.WarnLevel, false},
}

func (d decision) String() string { return decisions[d].name }

// forwardDecision is the decision a forward's outcome comes to.
func forwardDecision(k forward.Kind) decision {
	switch k {
	case forward.Delivered:
		return decDelivered
	case forward.Rejected:
		return decRejected
	case forward.Fault:
		return decFault
	}
	return decRetry
}

// claimDecision is the decision of a deliver claim that was not granted
// and is not a duplicate or in flight: refused, or (not reachable with a
// redeliverable, unlimited claim) ambiguous or failed.
func claimDecision(s ledger.Status) decision {
	switch s {
	case ledger.StatusRefused:
		return decRefused
	case ledger.StatusFailed:
		return decFailed
	}
	return decAmbiguous
}

// logLevel is the level of a request's log line: its decision's, raised
// to a warning by a 5xx answer or by something the operator must see
// (warn), and to an error by a store failure (reason "store").
func logLevel(d decision, status int, reason string, warn bool) zapcore.Level {
	level := decisions[d].level
	switch {
	case reason == "store":
		level = zapcore.ErrorLevel
	case status >= 500 || warn:
		level = max(level, zapcore.WarnLevel)
	}
	return level
}
