package ledgerapi

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// The loop breaker over HTTP: the caps in force, and the escalations a
// tripped cap left for an operator (see the ledger package's caps).

// CapJSON is one intent's cap.
type CapJSON struct {
	Intent   string `json:"intent"`
	Max      int    `json:"max"`
	WindowMs int64  `json:"window_ms"`
}

// CapsJSON answers GET /v1/caps, sorted by intent.
type CapsJSON struct {
	Caps []CapJSON `json:"caps"`
}

// EscalationJSON is an escalation as the API returns it.
type EscalationJSON struct {
	ID          string    `json:"id"`
	Scope       string    `json:"scope"`
	Intent      string    `json:"intent"`
	Reason      string    `json:"reason"`
	Max         int       `json:"max"`
	WindowMs    int64     `json:"window_ms"`
	Count       int       `json:"count"`
	OpenedAt    time.Time `json:"opened_at"`
	LastAt      time.Time `json:"last_at"`
	Refused     int       `json:"refused"`
	RunID       string    `json:"run_id,omitempty"`
	EntryID     string    `json:"entry_id"`
	Summary     string    `json:"summary,omitempty"`
	DismissedAt time.Time `json:"dismissed_at,omitzero"`
	DismissedBy string    `json:"dismissed_by,omitempty"`
}

// EscalationsJSON answers the escalation listings.
type EscalationsJSON struct {
	Scope       string           `json:"scope,omitempty"`
	Escalations []EscalationJSON `json:"escalations"`
}

// DismissRequest is the body of POST /v1/escalations/dismiss.
type DismissRequest struct {
	Scope string `json:"scope"`
	ID    string `json:"id"`
	By    string `json:"by,omitempty"`
}

// EscalationOnlyJSON answers a dismissal.
type EscalationOnlyJSON struct {
	Escalation EscalationJSON `json:"escalation"`
}

// EscalationToJSON is e as the API shows it.
func EscalationToJSON(e ledger.Escalation) EscalationJSON {
	return EscalationJSON{ID: e.ID, Scope: e.Scope, Intent: e.Intent, Reason: string(e.Reason), Max: e.Max,
		WindowMs: e.Window.Milliseconds(), Count: e.Count, OpenedAt: utc(e.OpenedAt), LastAt: utc(e.LastAt),
		Refused: e.Refused, RunID: e.RunID, EntryID: e.EntryID, Summary: e.Summary,
		DismissedAt: utc(e.DismissedAt), DismissedBy: e.DismissedBy}
}

func escalationFromJSON(j EscalationJSON) ledger.Escalation {
	return ledger.Escalation{ID: j.ID, Scope: j.Scope, Intent: j.Intent, Reason: ledger.Reason(j.Reason), Max: j.Max,
		Window: time.Duration(j.WindowMs) * time.Millisecond, Count: j.Count, OpenedAt: j.OpenedAt, LastAt: j.LastAt,
		Refused: j.Refused, RunID: j.RunID, EntryID: j.EntryID, Summary: j.Summary,
		DismissedAt: j.DismissedAt, DismissedBy: j.DismissedBy}
}

func escalationsToJSON(es []ledger.Escalation) []EscalationJSON {
	out := make([]EscalationJSON, 0, len(es))
	for _, e := range es {
		out = append(out, EscalationToJSON(e))
	}
	return out
}

func escalationsFromJSON(js []EscalationJSON) []ledger.Escalation {
	out := make([]ledger.Escalation, 0, len(js))
	for _, j := range js {
		out = append(out, escalationFromJSON(j))
	}
	return out
}

func (s *server) routeEscalations(mux *http.ServeMux) {
	s.route(mux, http.MethodGet, "/v1/caps", s.caps)
	s.route(mux, http.MethodGet, "/v1/escalations", s.escalations)
	s.route(mux, http.MethodGet, "/v1/scopes/{scope}/escalations", s.scopeEscalations)
	s.route(mux, http.MethodPost, "/v1/escalations/dismiss", s.dismiss)
}

func (s *server) caps(*http.Request) (any, error) {
	out := CapsJSON{Caps: []CapJSON{}}
	for intent, c := range s.l.Options().Caps {
		if c.Valid() {
			out.Caps = append(out.Caps, CapJSON{Intent: intent, Max: c.Max, WindowMs: c.Window.Milliseconds()})
		}
	}
	sort.Slice(out.Caps, func(i, j int) bool { return out.Caps[i].Intent < out.Caps[j].Intent })
	return out, nil
}

func (s *server) escalations(r *http.Request) (any, error) {
	limit, err := scopeLimit(r)
	if err != nil {
		return nil, err
	}
	es, err := s.l.Views().Escalations(r.Context(), limit)
	if err != nil {
		return nil, err
	}
	return EscalationsJSON{Escalations: escalationsToJSON(es)}, nil
}

func (s *server) scopeEscalations(r *http.Request) (any, error) {
	scope := r.PathValue("scope")
	es, err := s.l.Views().ScopeEscalations(r.Context(), scope)
	if err != nil {
		return nil, err
	}
	return EscalationsJSON{Scope: scope, Escalations: escalationsToJSON(es)}, nil
}

func (s *server) dismiss(r *http.Request) (any, error) {
	var req DismissRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	e, err := s.l.DismissEscalation(r.Context(), req.Scope, req.ID, req.By)
	if err != nil {
		return nil, err
	}
	return EscalationOnlyJSON{Escalation: EscalationToJSON(e)}, nil
}

// Caps returns the caps the server's ledger enforces, by intent.
func (c *Client) Caps(ctx context.Context) (map[string]ledger.Cap, error) {
	var out CapsJSON
	if err := c.do(ctx, http.MethodGet, "/v1/caps", nil, &out); err != nil {
		return nil, err
	}
	caps := make(map[string]ledger.Cap, len(out.Caps))
	for _, j := range out.Caps {
		caps[j.Intent] = ledger.Cap{Max: j.Max, Window: time.Duration(j.WindowMs) * time.Millisecond}
	}
	return caps, nil
}

// Escalations lists open escalations from up to limit scopes (0: the
// server's default of 100), oldest first.
func (c *Client) Escalations(ctx context.Context, limit int) ([]ledger.Escalation, error) {
	path := "/v1/escalations"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var out EscalationsJSON
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return escalationsFromJSON(out.Escalations), nil
}

// ScopeEscalations lists every escalation a scope remembers, dismissed
// ones included.
func (c *Client) ScopeEscalations(ctx context.Context, scope string) ([]ledger.Escalation, error) {
	var out EscalationsJSON
	if err := c.do(ctx, http.MethodGet, "/v1/scopes/"+url.PathEscape(scope)+"/escalations", nil, &out); err != nil {
		return nil, err
	}
	return escalationsFromJSON(out.Escalations), nil
}

// DismissEscalation records that an operator (by; default "operator") has
// dealt with an escalation.
func (c *Client) DismissEscalation(ctx context.Context, scope, id, by string) (ledger.Escalation, error) {
	var out EscalationOnlyJSON
	if err := c.do(ctx, http.MethodPost, "/v1/escalations/dismiss", DismissRequest{Scope: scope, ID: id, By: by}, &out); err != nil {
		return ledger.Escalation{}, err
	}
	return escalationFromJSON(out.Escalation), nil
}
