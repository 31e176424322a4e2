package ledgerapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// HealthPath is where the gateway serves its sources' health: GET, with
// the admin token. The ledger API has no source configuration, so the
// gateway mounts it beside the API (HealthHandler).
const HealthPath = "/v1/sources/health"

// SourceHealthJSON is one source's delivery health, read from the store
// (see docs/health.md): the same on every instance.
type SourceHealthJSON struct {
	Source string `json:"source"`
	Mode   string `json:"mode"`            // queued or inline
	URL    string `json:"url"`             // forward.url, password redacted
	Health string `json:"health"`          // healthy, failing or paused
	Since  string `json:"since,omitempty"` // RFC 3339: failing since, or recovered at
	// ConsecutiveFailures counts the agent's failed attempts in a row.
	ConsecutiveFailures int    `json:"consecutiveFailures"`
	LastError           string `json:"lastError,omitempty"` // in plain words
	Waiting             int    `json:"waiting"`             // not delivered yet, paused ones included
	OldestWaitingSecs   int64  `json:"oldestWaitingSeconds"`
	Dead                int    `json:"dead"`              // in dead letter now
	Partial             bool   `json:"partial,omitempty"` // counts are lower bounds
}

// SourcesHealthJSON answers HealthPath.
type SourcesHealthJSON struct {
	Sources []SourceHealthJSON `json:"sources"`
}

// SinceOf formats a health time for SourceHealthJSON.Since ("" for zero).
func SinceOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// HealthHandler serves HealthPath from read, behind token.
func HealthHandler(read func(ctx context.Context) (SourcesHealthJSON, error), token string, logger *zap.Logger) http.Handler {
	if logger == nil {
		logger = zap.NewNop()
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := read(r.Context())
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			logger.Warn("ledger api: reading source health failed", zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(ErrorJSON{Error: ErrorDetail{Code: "unavailable", Message: "reading source health failed: " + err.Error()}})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	return RequireToken(token, h, logger)
}

// SourcesHealth reads every configured source's health.
func (c *Client) SourcesHealth(ctx context.Context) ([]SourceHealthJSON, error) {
	var out SourcesHealthJSON
	err := c.do(ctx, http.MethodGet, HealthPath, nil, &out)
	return out.Sources, err
}
