package ledgerapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/replyonce/gateway/ledger"
)

// TrialRequest asks POST /v1/deliveries/trial to send one queued event to
// another URL (a staging agent) once, without changing the event.
type TrialRequest struct {
	Scope   string `json:"scope,omitempty"`
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	To      string `json:"to"`
}

// Trials sends a queued event to another URL and records the attempt
// (the gateway's dispatcher, dispatch.Dispatcher.SendTrial).
type Trials func(ctx context.Context, q ledger.QueueItem, to string) (ledger.AttemptRecord, error)

// WithTrials lets POST /v1/deliveries/trial send events through send.
// Without it (a ledger served on its own, with no dispatcher to sign and
// send) the endpoint answers 400 invalid_request saying so.
func WithTrials(send Trials) Option {
	return func(s *server) { s.trials = send }
}

func (s *server) routeTrials(mux *http.ServeMux) {
	s.route(mux, http.MethodPost, "/v1/deliveries/trial", s.trial)
}

func (s *server) trial(r *http.Request) (any, error) {
	var req TrialRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if req.Source == "" || req.EventID == "" {
		return nil, fmt.Errorf("%w: source and event_id are required", ledger.ErrInvalid)
	}
	if err := s.checkSource("source", req.Source); err != nil {
		return nil, err
	}
	if err := ledger.CheckTrialURL(req.To); err != nil {
		return nil, err
	}
	if s.trials == nil {
		return nil, fmt.Errorf("%w: this server sends no trials: it has no dispatcher to sign and send events", ledger.ErrInvalid)
	}
	item, err := s.findEvent(r.Context(), req.Scope, req.Source, req.EventID)
	if err != nil {
		return nil, err
	}
	rec, err := s.trials(r.Context(), item, req.To)
	if err != nil {
		return nil, err
	}
	return attemptJSON(rec), nil
}

// attemptJSON is one attempt record on the wire.
func attemptJSON(a ledger.AttemptRecord) AttemptJSON {
	return AttemptJSON{N: a.N, At: a.At, Delivery: a.Delivery, Token: a.Token, Outcome: a.Outcome,
		AgentStatus: a.AgentStatus, LatencyMs: float64(a.Latency.Microseconds()) / 1000, Error: a.Error,
		Answer: strings.ToValidUTF8(string(a.Answer), "\uFFFD"), Late: a.Late, To: a.To}
}

// Trial sends one queued event to another URL (req.To) once and returns
// the attempt as recorded.
func (c *Client) Trial(ctx context.Context, req TrialRequest) (AttemptJSON, error) {
	var out AttemptJSON
	err := c.do(ctx, http.MethodPost, "/v1/deliveries/trial", req, &out)
	return out, err
}
