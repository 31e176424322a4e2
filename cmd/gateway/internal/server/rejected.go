package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// RejectedPath serves the requests an instance refused before the ledger
// (ingress.Gateway.RejectedRequests), behind the admin token. They live in
// that instance's memory only: each instance answers for itself.
const RejectedPath = "/v1/rejected"

// RejectedJSON answers GET /v1/rejected?source=NAME.
type RejectedJSON struct {
	Source   string             `json:"source"`
	Rejected []ingress.Rejected `json:"rejected"`
}

// rejectedHandler serves GET /v1/rejected from list, behind the admin
// token. adminHandler mounts it beside the ledger API, so the console reads
// it through the same handler as every other API caller.
func rejectedHandler(list func(source string) []ingress.Rejected, token string, log *zap.Logger) http.Handler {
	return ledgerapi.RequireToken(token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		source := r.URL.Query().Get("source")
		w.Header().Set("Content-Type", "application/json")
		if source == "" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "invalid_request", "message": "source is required"}})
			return
		}
		_ = json.NewEncoder(w).Encode(RejectedJSON{Source: source, Rejected: list(source)})
	}), log)
}

// rejectedFetcher reads GET /v1/rejected from the admin API handler in
// process, token and all, as `gateway events rejected` reads it over HTTP.
func rejectedFetcher(api http.Handler, token string) func(ctx context.Context, source string) ([]ingress.Rejected, error) {
	return func(ctx context.Context, source string) ([]ingress.Rejected, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://console.internal"+RejectedPath+"?source="+url.QueryEscape(source), nil)
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := inProcess{api}.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("rejected requests: the admin API answered %s", resp.Status)
		}
		var out RejectedJSON
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, fmt.Errorf("rejected requests: %w", err)
		}
		return out.Rejected, nil
	}
}
