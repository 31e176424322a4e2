package ledgerapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/ledger"
)

// The operator's side of queued delivery: list, show and replay queued
// events, and pause or resume a source's dispatch. Same token, same error
// format as the rest of the API.

// DeliveryItemJSON is a queued delivery on the wire.
type DeliveryItemJSON struct {
	Source     string    `json:"source"`
	EventID    string    `json:"event_id"`
	Scope      string    `json:"scope"`
	RunID      string    `json:"run_id"`
	EntryID    string    `json:"entry_id"`
	Status     string    `json:"status"`
	ReceivedAt time.Time `json:"received_at"`
	ContextAt  time.Time `json:"context_at"`
	NextAt     time.Time `json:"next_at,omitzero"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Attempts   int       `json:"attempts"`
	Failures   int       `json:"failures"`
	Replays    int       `json:"replays,omitempty"`
	LastStatus int       `json:"last_status,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	BodyBytes  int       `json:"body_bytes"`
	// Inline: forwarded while the provider waited; never replayed by the
	// gateway. BodyKept says whether its body is in the store
	// (forward.keep_body); a queued event's always is.
	Inline   bool `json:"inline,omitempty"`
	BodyKept bool `json:"body_kept"`
	// Conversation-aware delivery: what a debounced delivery stands for,
	// which event covers a coalesced one, which run superseded one.
	CoverCount   int      `json:"cover_count,omitempty"`
	Covers       []string `json:"covers,omitempty"`
	CoveredBy    string   `json:"covered_by,omitempty"`
	SupersededBy string   `json:"superseded_by,omitempty"`
}

func itemJSON(q ledger.QueueItem) DeliveryItemJSON {
	return DeliveryItemJSON{Source: q.Source, EventID: q.EventID, Scope: q.Scope, RunID: q.RunID, EntryID: q.EntryID,
		Status: string(q.Status), ReceivedAt: q.ReceivedAt, ContextAt: q.ContextAt, NextAt: q.NextAt, LeaseUntil: q.LeaseUntil,
		Attempts: q.Attempts, Failures: q.Failures, Replays: q.Replays, LastStatus: q.LastStatus, LastError: q.LastError,
		FinishedAt: q.FinishedAt, BodyBytes: q.BodySize, Inline: q.Inline, BodyKept: !q.Inline || q.Blob != "",
		CoverCount: q.CoverCount, Covers: q.Covers, CoveredBy: q.CoveredBy, SupersededBy: q.SupersededBy}
}

func itemsJSON(items []ledger.QueueItem) DeliveriesJSON {
	out := DeliveriesJSON{Deliveries: make([]DeliveryItemJSON, 0, len(items))}
	for _, q := range items {
		out.Deliveries = append(out.Deliveries, itemJSON(q))
	}
	return out
}

// DeliveriesJSON answers GET /v1/deliveries and POST /v1/deliveries/replay.
type DeliveriesJSON struct {
	Deliveries []DeliveryItemJSON `json:"deliveries"`
}

// EventJSON is a queued event's record. Body is the raw body as text when
// it is UTF-8, else base64 with BodyBase64 set.
type EventJSON struct {
	ContentType string              `json:"content_type,omitempty"`
	Header      map[string][]string `json:"header,omitempty"`
	ReceivedAt  time.Time           `json:"received_at"`
	ContextAt   time.Time           `json:"context_at"`
	Body        string              `json:"body"`
	BodyBase64  bool                `json:"body_base64,omitempty"`
}

// AttemptJSON is one delivery attempt.
type AttemptJSON struct {
	N           int       `json:"n"`
	At          time.Time `json:"at"`
	Delivery    int       `json:"delivery"`
	Token       uint64    `json:"token"`
	Outcome     string    `json:"outcome"`
	AgentStatus int       `json:"agent_status,omitempty"`
	LatencyMs   float64   `json:"latency_ms"`
	Error       string    `json:"error,omitempty"`
	Answer      string    `json:"answer,omitempty"` // the first bytes of the agent's answer
	Late        bool      `json:"late,omitempty"`
	// To is set on a trial: the URL the event was sent to instead of its
	// source's agent (POST /v1/deliveries/trial).
	To string `json:"to,omitempty"`
}

// DeliveryJSON answers GET /v1/deliveries/show: the delivery, its event
// and every attempt recorded so far.
type DeliveryJSON struct {
	Delivery DeliveryItemJSON `json:"delivery"`
	Event    EventJSON        `json:"event"`
	Attempts []AttemptJSON    `json:"attempts"`
}

// ReplayRequest names one event (Scope, Source, EventID) or, with Filter,
// every listed delivery matching it.
type ReplayRequest struct {
	Scope   string          `json:"scope,omitempty"`
	Source  string          `json:"source,omitempty"`
	EventID string          `json:"event_id,omitempty"`
	Filter  *DeliveryFilter `json:"filter,omitempty"`
}

// DeliveryFilter is ledger.DeliveryFilter on the wire.
type DeliveryFilter struct {
	Source string    `json:"source,omitempty"`
	Status string    `json:"status,omitempty"`
	Scope  string    `json:"scope,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Until  time.Time `json:"until,omitzero"`
	Limit  int       `json:"limit,omitempty"`
}

// StatusPaused is the filter status of the queued events of the sources
// paused now: not a state of the event but of its source.
const StatusPaused = "paused"

// ledgerFilter is f for the ledger, with "paused" read as the queued
// events of the sources paused now.
func (s *server) ledgerFilter(ctx context.Context, f DeliveryFilter) (ledger.DeliveryFilter, error) {
	if f.Status != StatusPaused {
		return f.ledger()
	}
	f.Status = string(ledger.DeliveryQueued)
	lf, err := f.ledger()
	if err != nil {
		return lf, err
	}
	set, err := s.l.Sources().PausedSources(ctx)
	if err != nil && !errors.Is(err, ledger.ErrCorruptControl) {
		return lf, err
	}
	lf.SourceIn = map[string]bool{}
	for name := range set {
		lf.SourceIn[name] = true
	}
	return lf, nil
}

func (f DeliveryFilter) ledger() (ledger.DeliveryFilter, error) {
	switch ledger.DeliveryStatus(f.Status) {
	case "", ledger.DeliveryQueued, ledger.DeliveryDelivering, ledger.DeliveryDelivered, ledger.DeliveryRejected, ledger.DeliveryDead,
		ledger.DeliverySuperseded, ledger.DeliveryCoalesced, ledger.DeliveryFailed:
	default:
		return ledger.DeliveryFilter{}, fmt.Errorf("%w: status %q (want queued, delivering, delivered, rejected, failed, dead, superseded, coalesced or paused)", ledger.ErrInvalid, f.Status)
	}
	return ledger.DeliveryFilter{Source: f.Source, Status: ledger.DeliveryStatus(f.Status), Scope: f.Scope, Since: f.Since, Until: f.Until, Limit: f.Limit}, nil
}

// SourceRequest names a source to pause or resume.
type SourceRequest struct {
	Source string `json:"source"`
}

// PausedJSON answers the pause endpoints.
type PausedJSON struct {
	Paused []string `json:"paused"`
	// StoppedOn (a pause only) names the gateway instances whose
	// dispatchers have stopped the source, which the pause waited for;
	// NotConfirmed the live ones that had not when the wait ended.
	StoppedOn    []string `json:"stoppedOn,omitempty"`
	NotConfirmed []string `json:"notConfirmed,omitempty"`
}

func (s *server) routeDeliveries(mux *http.ServeMux) {
	s.route(mux, http.MethodGet, "/v1/deliveries", s.listDeliveries)
	s.route(mux, http.MethodGet, "/v1/deliveries/show", s.showDelivery)
	s.route(mux, http.MethodPost, "/v1/deliveries/replay", s.replayDeliveries)
	s.routeTrials(mux)
	s.route(mux, http.MethodGet, "/v1/sources/paused", s.pausedSources)
	s.route(mux, http.MethodPost, "/v1/sources/pause", func(r *http.Request) (any, error) { return s.setPaused(r, true) })
	s.route(mux, http.MethodPost, "/v1/sources/resume", func(r *http.Request) (any, error) { return s.setPaused(r, false) })
}

func filterFrom(q url.Values) (DeliveryFilter, error) {
	f := DeliveryFilter{Source: q.Get("source"), Status: q.Get("status"), Scope: q.Get("scope")}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return f, fmt.Errorf("%w: since %q is not RFC 3339", ledger.ErrInvalid, v)
		}
		f.Since = t
	}
	if v := q.Get("until"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return f, fmt.Errorf("%w: until %q is not RFC 3339", ledger.ErrInvalid, v)
		}
		f.Until = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, fmt.Errorf("%w: limit %q is not a count", ledger.ErrInvalid, v)
		}
		f.Limit = n
	}
	return f, nil
}

func (s *server) listDeliveries(r *http.Request) (any, error) {
	f, err := filterFrom(r.URL.Query())
	if err != nil {
		return nil, err
	}
	if r.URL.Query().Has("page") {
		return s.page(r, f)
	}
	lf, err := s.ledgerFilter(r.Context(), f)
	if err != nil {
		return nil, err
	}
	items, err := s.l.Queue().ListDeliveries(r.Context(), lf)
	if err != nil {
		return nil, err
	}
	return itemsJSON(items), nil
}

func (s *server) showDelivery(r *http.Request) (any, error) {
	q := r.URL.Query()
	scope, source, id := q.Get("scope"), q.Get("source"), q.Get("event_id")
	if source == "" || id == "" {
		return nil, fmt.Errorf("%w: source and event_id are required", ledger.ErrInvalid)
	}
	item, err := s.findEvent(r.Context(), scope, source, id)
	if err != nil {
		return nil, err
	}
	ev, err := s.l.Queue().QueuedEventOf(r.Context(), item)
	if err != nil {
		return nil, err
	}
	attempts, err := s.attemptsOf(r.Context(), item)
	if err != nil {
		return nil, err
	}
	out := DeliveryJSON{Delivery: itemJSON(item), Attempts: attempts,
		Event: EventJSON{ContentType: ev.ContentType, Header: ev.Header, ReceivedAt: ev.ReceivedAt, ContextAt: ev.ContextAt}}
	if utf8.Valid(ev.Body) {
		out.Event.Body = string(ev.Body)
	} else {
		out.Event.Body, out.Event.BodyBase64 = base64.StdEncoding.EncodeToString(ev.Body), true
	}
	return out, nil
}

// attemptsOf reads a delivery's attempts, oldest first, as the API
// shows them (the event page and the timeline alike).
func (s *server) attemptsOf(ctx context.Context, item ledger.QueueItem) ([]AttemptJSON, error) {
	attempts, err := s.l.Queue().AttemptsOf(ctx, item)
	if err != nil {
		return nil, err
	}
	out := make([]AttemptJSON, 0, len(attempts))
	for _, a := range attempts {
		if item.Status == ledger.DeliveryDead && a.N == item.Attempts && !a.Late && a.To == "" {
			// The attempt after which the schedule ran out: its outcome
			// is the event's, as the list shows it.
			a.Outcome = string(ledger.DeliveryDead)
		}
		out = append(out, attemptJSON(a))
	}
	return out, nil
}

// findScopes is how many of the scopes that received an event last
// findEvent reads to find an event named without its scope.
const findScopes = 5000

// findEvent finds one event by source and id. Without a scope it tries the
// scope of a source without a scope rule ({source}:{eventId}), then walks
// the received index, newest first, for a source whose scope rule put it
// elsewhere.
func (s *server) findEvent(ctx context.Context, scope, source, id string) (ledger.QueueItem, error) {
	if scope != "" {
		return s.l.Queue().FindDelivery(ctx, scope, source, id)
	}
	item, err := s.l.Queue().FindDelivery(ctx, source+":"+id, source, id)
	if !errors.Is(err, ledger.ErrUnknownEntry) {
		return item, err
	}
	page, err := s.l.Views().RecentDeliveries(ctx, ledger.DeliveryFilter{Source: source, EventID: id, Limit: findScopes}, nil, 1)
	if err != nil {
		return ledger.QueueItem{}, err
	}
	if len(page.Items) == 0 {
		return ledger.QueueItem{}, fmt.Errorf("%w: no event %s %s in the %d scopes that received an event last; if it is older, name its scope (--scope, or scope= in the API)",
			ledger.ErrUnknownEntry, source, id, findScopes)
	}
	return page.Items[0], nil
}

func (s *server) replayDeliveries(r *http.Request) (any, error) {
	var req ReplayRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if err := s.checkSource("source", req.Source); err != nil {
		return nil, err
	}
	if req.Filter != nil {
		if err := s.checkSource("filter.source", req.Filter.Source); err != nil {
			return nil, err
		}
	}
	ctx := r.Context()
	var targets []ledger.QueueItem
	switch {
	case req.Filter != nil:
		lf, err := s.ledgerFilter(ctx, *req.Filter)
		if err != nil {
			return nil, err
		}
		if lf.Status == "" {
			return nil, fmt.Errorf("%w: a bulk replay needs a status", ledger.ErrInvalid)
		}
		if targets, err = s.l.Queue().ListDeliveries(ctx, lf); err != nil {
			return nil, err
		}
	case req.Source != "" && req.EventID != "":
		item, err := s.findEvent(ctx, req.Scope, req.Source, req.EventID)
		if err != nil {
			return nil, err
		}
		targets = []ledger.QueueItem{item}
	default:
		return nil, fmt.Errorf("%w: name an event (source, eventId) or give a filter", ledger.ErrInvalid)
	}
	var out []ledger.QueueItem
	for _, q := range targets {
		item, err := s.l.Queue().ReplayDelivery(ctx, q.Scope, q.EntryID)
		if (errors.Is(err, ledger.ErrDeliveryInFlight) || errors.Is(err, ledger.ErrInline)) && req.Filter != nil {
			continue // being delivered right now, or inline: nothing to replay
		}
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return itemsJSON(out), nil
}

func (s *server) pausedSources(r *http.Request) (any, error) { return s.paused(r) }

func (s *server) paused(r *http.Request) (PausedJSON, error) {
	set, err := s.l.Sources().PausedSources(r.Context())
	if errors.Is(err, ledger.ErrCorruptControl) {
		// Nothing counts as paused, as for the dispatchers; the next pause
		// or resume writes a fresh record.
		s.log.Error("ledger api: paused sources record is corrupt; answering none paused", zap.Error(err))
	} else if err != nil {
		return PausedJSON{}, err
	}
	out := PausedJSON{Paused: []string{}}
	for name := range set {
		out.Paused = append(out.Paused, name)
	}
	return out, nil
}

func (s *server) setPaused(r *http.Request, paused bool) (any, error) {
	var req SourceRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if err := s.checkSource("source", req.Source); err != nil {
		// A source paused and then taken out of the configuration may
		// still be resumed (the console lists it), never paused anew.
		set, perr := s.l.Sources().PausedSources(r.Context())
		if perr != nil && !errors.Is(perr, ledger.ErrCorruptControl) {
			return nil, perr
		}
		if paused || !set[req.Source] {
			return nil, err
		}
	}
	if paused && s.inline[req.Source] {
		return nil, fmt.Errorf("%w: source: %q delivers inline (forward.mode: inline): pause applies to queued delivery, the provider's own retries hold an inline source's events", ledger.ErrInvalid, req.Source)
	}
	if err := s.l.Sources().SetSourcePaused(r.Context(), req.Source, paused); err != nil {
		return nil, err
	}
	if s.onPause != nil {
		s.onPause(req.Source, paused)
	}
	var w ledger.PauseWait
	if paused && s.pauseWait > 0 {
		var err error
		if w, err = s.l.Sources().WaitPaused(r.Context(), req.Source, s.pauseWait); err != nil {
			return nil, err
		}
	}
	out, err := s.paused(r)
	if err != nil {
		return nil, err
	}
	out.StoppedOn, out.NotConfirmed = w.Stopped, w.Missing
	return out, nil
}

// Deliveries lists queued deliveries by filter.
func (c *Client) Deliveries(ctx context.Context, f DeliveryFilter) ([]DeliveryItemJSON, error) {
	q := url.Values{}
	for k, v := range map[string]string{"source": f.Source, "status": f.Status, "scope": f.Scope} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out DeliveriesJSON
	err := c.do(ctx, http.MethodGet, "/v1/deliveries?"+q.Encode(), nil, &out)
	return out.Deliveries, err
}

// ShowDelivery returns one queued event with its attempts. An empty scope
// means the source's default scope ({source}:{eventId}).
func (c *Client) ShowDelivery(ctx context.Context, scope, source, eventID string) (DeliveryJSON, error) {
	q := url.Values{"source": {source}, "event_id": {eventID}}
	if scope != "" {
		q.Set("scope", scope)
	}
	var out DeliveryJSON
	err := c.do(ctx, http.MethodGet, "/v1/deliveries/show?"+q.Encode(), nil, &out)
	return out, err
}

// Replay makes queued deliveries due again: one event, or every delivery
// matching req.Filter.
func (c *Client) Replay(ctx context.Context, req ReplayRequest) ([]DeliveryItemJSON, error) {
	var out DeliveriesJSON
	err := c.do(ctx, http.MethodPost, "/v1/deliveries/replay", req, &out)
	return out.Deliveries, err
}

// PauseSource pauses (or, with paused false, resumes) a source's dispatch
// and returns the sources paused now and, for a pause, the instances that
// have stopped it.
func (c *Client) PauseSource(ctx context.Context, source string, paused bool) (PausedJSON, error) {
	path := "/v1/sources/resume"
	if paused {
		path = "/v1/sources/pause"
	}
	var out PausedJSON
	err := c.do(ctx, http.MethodPost, path, SourceRequest{Source: source}, &out)
	return out, err
}

// PausedSources returns the sources whose dispatch is paused.
func (c *Client) PausedSources(ctx context.Context) ([]string, error) {
	var out PausedJSON
	err := c.do(ctx, http.MethodGet, "/v1/sources/paused", nil, &out)
	return out.Paused, err
}
