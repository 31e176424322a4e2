package ingress

import (
	"net/http"
	"testing"

	"go.uber.org/zap/zapcore"
)

// The decision names are what log lines, spans and replyonce_forwards_total
// carry, and what dashboards and alerts match: these are the names shipped
// before decisions were typed, and each decision must keep its own.
func TestDecisionNamesAreTheShippedOnes(t *testing.T) {
	shipped := map[decision]string{
		decUnknownSource: "unknown_source", decMethod: "method", decBody: "body", decHandshake: "handshake",
		decUnauthorized: "unauthorized", decNoEventID: "no_event_id", decBadEventID: "bad_event_id", decBadScope: "bad_scope",
		decBadContextAt: "bad_context_at", decIgnored: "ignored", decStoreError: "store_error", decQueued: "queued",
		decDuplicate: "duplicate", decInFlight: "in_flight", decRefused: "refused", decAmbiguous: "ambiguous", decFailed: "failed",
		decClaimExpiring: "claim_expiring", decShuttingDown: "shutting_down", decDelivered: "delivered", decRejected: "rejected",
		decRetry: "retry", decFault: "fault", decBatch: "batch", decBatchRefused: "batch_refused", decBatchEmpty: "batch_empty",
		decBatchIncomplete: "batch_incomplete", decReplay: "replay",
	}
	seen := map[string]decision{}
	for d := decNone + 1; d < numDecisions; d++ {
		want, ok := shipped[d]
		if !ok {
			t.Errorf("decision %d (%q) is new: add its name here once it ships", d, d)
			continue
		}
		if d.String() != want {
			t.Errorf("decision %d is named %q, shipped as %q", d, d.String(), want)
		}
		if other, dup := seen[d.String()]; dup {
			t.Errorf("decisions %d and %d share the name %q", other, d, d.String())
		}
		seen[d.String()] = d
	}
}

// A line's level: the decision's own, a warning for a 5xx answer or a
// note the operator must see, an error for a store failure.
func TestLogLevel(t *testing.T) {
	for _, c := range []struct {
		d      decision
		status int
		reason string
		warn   bool
		want   zapcore.Level
	}{
		{decDelivered, http.StatusOK, "", false, zapcore.InfoLevel},
		{decDelivered, http.StatusOK, "", true, zapcore.WarnLevel},
		{decDelivered, http.StatusServiceUnavailable, "store", false, zapcore.ErrorLevel}, // delivered, but the settle failed
		{decStoreError, http.StatusServiceUnavailable, "", false, zapcore.ErrorLevel},
		{decInFlight, http.StatusServiceUnavailable, "in_flight", false, zapcore.WarnLevel},
		{decUnauthorized, http.StatusServiceUnavailable, "key_unavailable", false, zapcore.WarnLevel},
		{decUnauthorized, http.StatusUnauthorized, "signature_no_match", false, zapcore.InfoLevel},
		{decIgnored, http.StatusOK, "bots", false, zapcore.InfoLevel},
		{decBatchIncomplete, http.StatusServiceUnavailable, "store", false, zapcore.ErrorLevel},
		{decNoEventID, http.StatusBadRequest, "missing_event_id", false, zapcore.InfoLevel},
	} {
		if got := logLevel(c.d, c.status, c.reason, c.warn); got != c.want {
			t.Errorf("%s %d %q warn=%v: %s, want %s", c.d, c.status, c.reason, c.warn, got, c.want)
		}
	}
}
