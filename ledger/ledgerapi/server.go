package ledgerapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/ledger"
)

// MaxBodyBytes bounds every request body. A claim's payload and a settle's
// value are meant to be small identities and results, not documents.
const MaxBodyBytes = 1 << 20

// Errors of the HTTP layer itself. With the ledger's sentinel errors they
// are everything statusFor maps to an answer.
var (
	errUnauthorized = errors.New("missing or wrong bearer token")
	errTooLarge     = fmt.Errorf("request body exceeds %d bytes", MaxBodyBytes)
	errMediaType    = errors.New("request body must be Content-Type: application/json")
	errNoRoute      = errors.New("no such endpoint")
	errMethod       = errors.New("method not allowed on this endpoint")
)

// Error codes, stable across releases: clients match on them, never on
// messages.
const (
	CodeInvalidRequest    = "invalid_request"
	CodeUnauthorized      = "unauthorized"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeTooLarge          = "body_too_large"
	CodeMediaType         = "unsupported_media_type"
	CodeUnknownRun        = "unknown_run"
	CodeUnknownClaim      = "unknown_claim"
	CodeAlreadySettled    = "already_settled"
	CodeNotAmbiguous      = "not_ambiguous"
	CodeStoreUnavailable  = "store_unavailable"
	CodeDeliveryInFlight  = "delivery_in_flight"
	CodeUnknownEscalation = "unknown_escalation"
)

// statusFor is the one place where an error becomes an HTTP status and a
// machine code. Anything it does not recognise is the store's failure: a
// 503 the caller may retry, never a 2xx and never a 4xx that would make an
// agent give up on a write the ledger never judged.
func statusFor(err error) (int, string) {
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, CodeUnauthorized
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, errMediaType):
		return http.StatusUnsupportedMediaType, CodeMediaType
	case errors.Is(err, errNoRoute):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed, CodeMethodNotAllowed
	case errors.Is(err, ledger.ErrInvalid):
		return http.StatusBadRequest, CodeInvalidRequest
	case errors.Is(err, ledger.ErrUnknownRun):
		return http.StatusNotFound, CodeUnknownRun
	case errors.Is(err, ledger.ErrUnknownEscalation):
		return http.StatusNotFound, CodeUnknownEscalation
	case errors.Is(err, ledger.ErrUnknownEntry):
		return http.StatusNotFound, CodeUnknownClaim
	case errors.Is(err, ledger.ErrAlreadySettled):
		return http.StatusConflict, CodeAlreadySettled
	case errors.Is(err, ledger.ErrNotAmbiguous):
		return http.StatusConflict, CodeNotAmbiguous
	case errors.Is(err, ledger.ErrDeliveryInFlight):
		return http.StatusConflict, CodeDeliveryInFlight
	}
	return http.StatusServiceUnavailable, CodeStoreUnavailable
}

// server answers the API from one ledger.
type server struct {
	l *ledger.Ledger
	// sources are the source names the gateway is configured with
	// (WithSources); nil: any name is taken.
	sources map[string]bool
	// inline and onPause: see WithInlineSources and WithPauseHook.
	inline  map[string]bool
	onPause func(source string, paused bool)
	// trials: see WithTrials.
	trials Trials
	// pauseWait: see WithPauseWait.
	pauseWait time.Duration
	log       *zap.Logger
	refusals  *refusalLog
	// routes lists "METHOD /path" as registered, for the test that holds
	// openapi.yaml to them.
	routes []string
}

// endpoint handles one request and returns the value to send as JSON with
// 200, or an error for statusFor.
type endpoint func(r *http.Request) (any, error)

// NewHandler serves the ledger API (see API.md) from l. token is the bearer
// token every request must carry; empty means no authentication, which the
// gateway allows only on a loopback admin address. A nil logger logs
// nothing.
func NewHandler(l *ledger.Ledger, token string, logger *zap.Logger, opts ...Option) http.Handler {
	if logger == nil {
		logger = zap.NewNop()
	}
	s := &server{l: l, log: logger, refusals: newRefusalLog(1000, 50)}
	for _, o := range opts {
		o(s)
	}
	return RequireToken(token, s.mux(), logger)
}

// Option configures NewHandler.
type Option func(*server)

// WithSources names the sources the gateway is configured with: a request
// naming any other source (a listing's or a replay's source, a pause or a
// resume) is refused 400 invalid_request naming it, instead of matching
// nothing or pausing a source that does not exist. Without it (a ledger
// served on its own) every source name is taken.
func WithSources(names []string) Option {
	return func(s *server) {
		s.sources = make(map[string]bool, len(names))
		for _, n := range names {
			s.sources[n] = true
		}
	}
}

// mux routes every endpoint of the API; s.routes lists them afterwards.
func (s *server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	s.route(mux, http.MethodPost, "/v1/runs", s.begin)
	s.route(mux, http.MethodPost, "/v1/runs/heartbeat", s.heartbeat)
	s.route(mux, http.MethodPost, "/v1/runs/end", s.end)
	s.route(mux, http.MethodPost, "/v1/runs/cancel", s.cancel)
	s.route(mux, http.MethodPost, "/v1/claims", s.claim)
	s.route(mux, http.MethodPost, "/v1/claims/settle", s.settle)
	s.route(mux, http.MethodPost, "/v1/check", s.check)
	s.route(mux, http.MethodGet, "/v1/scopes/{scope}/history", s.history)
	s.route(mux, http.MethodGet, "/v1/scopes/{scope}/timeline", s.timeline)
	s.route(mux, http.MethodGet, "/v1/conversations", s.conversations)
	s.route(mux, http.MethodGet, "/v1/ambiguous", s.ambiguous)
	s.route(mux, http.MethodPost, "/v1/entries/resolve", s.resolve)
	s.routeDeliveries(mux)
	s.routeEscalations(mux)
	s.routeOpenAPI(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.fail(w, r, errNoRoute) })
	return mux
}

// route registers h for method and path, and a JSON 405 for every other
// method on the same path.
func (s *server) route(mux *http.ServeMux, method, path string, h endpoint) {
	s.routeHandler(mux, method, path, func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkQueryNames(r.PathValue("scope"), r.URL.Query()); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := refuseReservedScope(r.PathValue("scope"), r.URL.Query().Get("scope")); err != nil {
			s.fail(w, r, err)
			return
		}
		v, err := h(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// routeHandler registers a plain handler for method and path, with the
// same JSON 405 for other methods.
func (s *server) routeHandler(mux *http.ServeMux, method, path string, h http.HandlerFunc) {
	s.routes = append(s.routes, method+" "+path)
	mux.HandleFunc(method+" "+path, h)
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", method)
		s.fail(w, r, errMethod)
	})
}

// RequireToken lets a request through to next only when it carries
// "Authorization: Bearer <token>". The comparison hashes both sides first,
// so it takes the same time whatever the length or content of the guess.
// An empty token lets everything through. Refusals are JSON 401s in the
// API's error format.
func RequireToken(token string, next http.Handler, logger *zap.Logger) http.Handler {
	if token == "" {
		return next
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	want := sha256.Sum256([]byte(token))
	s := &server{log: logger}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="replyonce-ledger"`)
			s.fail(w, r, errUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) (string, bool) {
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusFor(err)
	msg := err.Error()
	if status == http.StatusServiceUnavailable {
		// The cause may name hosts or credentials; it goes to the log only.
		s.log.Error("ledger api: store failure", zap.String("path", r.URL.Path), zap.Error(err))
		msg = "the ledger store is unavailable; retry later"
		w.Header().Set("Retry-After", "1")
	} else {
		s.log.Debug("ledger api: refused request", zap.String("path", r.URL.Path), zap.Int("status", status), zap.String("code", code), zap.Error(err))
	}
	writeJSON(w, status, ErrorJSON{Error: ErrorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads exactly one JSON object into dst. It requires a JSON
// Content-Type (which also makes browsers preflight, so a web page cannot
// drive a token-less loopback ledger), bounds the body, and refuses unknown
// fields, trailing data, a body that is not UTF-8, a scope, source or id no store holds (checkName)
// and a reserved scope.
func (s *server) decode(r *http.Request, dst any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return errMediaType
	}
	raw, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge
		}
		return fmt.Errorf("%w: reading the body: %v", ledger.ErrInvalid, err)
	}
	if !utf8.Valid(raw) {
		// encoding/json would replace the bad bytes with U+FFFD, so that
		// names or payloads differing only there would collapse into one.
		return fmt.Errorf("%w: body: not valid UTF-8 (JSON text is UTF-8)", ledger.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%w: malformed JSON body: %v", ledger.ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: malformed JSON body: data after the object", ledger.ErrInvalid)
	}
	if err := s.checkBodyNames(reflect.ValueOf(dst), ""); err != nil {
		return err
	}
	if v := reflect.Indirect(reflect.ValueOf(dst)); v.Kind() == reflect.Struct {
		if f := v.FieldByName("Scope"); f.IsValid() && f.Kind() == reflect.String {
			return refuseReservedScope(f.String())
		}
	}
	return nil
}

// refuseReservedScope refuses a request that names a scope the gateway
// keeps for itself (ledger.ReservedScope), in its path, its query or the
// scope field of its body, whatever it asks: an agent has no business
// there, to read or to write.
func refuseReservedScope(scopes ...string) error {
	for _, sc := range scopes {
		if ledger.ReservedScope(sc) {
			return fmt.Errorf("%w: scope: scopes starting with %q are reserved for the gateway", ledger.ErrInvalid, ledger.ReservedPrefix)
		}
	}
	return nil
}

func (s *server) begin(r *http.Request) (any, error) {
	var req BeginRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	run, err := s.l.Begin(r.Context(), req.Scope, ledger.RunOptions{RunID: req.RunID, Mode: ledger.Mode(req.Mode),
		ContextAt: req.ContextAt, LeaseTTL: fromMs(req.LeaseTTLMs)})
	if err != nil {
		return nil, err
	}
	return runToJSON(run), nil
}

func requireRun(req RunRequest) error {
	if req.Scope == "" || req.RunID == "" {
		return fmt.Errorf("%w: scope and run_id are required", ledger.ErrInvalid)
	}
	return nil
}

func (s *server) heartbeat(r *http.Request) (any, error) {
	var req RunRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if err := requireRun(req); err != nil {
		return nil, err
	}
	if req.Reason != "" {
		return nil, fmt.Errorf("%w: heartbeat takes no reason", ledger.ErrInvalid)
	}
	alive, err := s.l.Heartbeat(r.Context(), req.Scope, req.RunID, req.Token)
	if err != nil {
		return nil, err
	}
	return HeartbeatJSON{Alive: alive}, nil
}

func (s *server) end(r *http.Request) (any, error) {
	var req RunRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if err := requireRun(req); err != nil {
		return nil, err
	}
	var err error
	if req.Token != 0 {
		err = s.l.EndDelivery(r.Context(), req.Scope, req.RunID, req.Token, req.Reason)
	} else {
		err = s.l.End(r.Context(), req.Scope, req.RunID, req.Reason)
	}
	if err != nil {
		return nil, err
	}
	return RunStateJSON{Scope: req.Scope, RunID: req.RunID, State: "ended"}, nil
}

func (s *server) cancel(r *http.Request) (any, error) {
	var req RunRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if err := requireRun(req); err != nil {
		return nil, err
	}
	if err := s.l.Cancel(r.Context(), req.Scope, req.RunID); err != nil {
		return nil, err
	}
	return RunStateJSON{Scope: req.Scope, RunID: req.RunID, State: "cancelled"}, nil
}

func (s *server) claim(r *http.Request) (any, error) {
	var req ClaimRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if req.Token != 0 && req.RunID == "" {
		return nil, fmt.Errorf("%w: a token needs the run_id it belongs to", ledger.ErrInvalid)
	}
	c, err := s.l.Claim(r.Context(), ledger.ClaimRequest{
		Key:   ledger.Key{Scope: req.Scope, Intent: req.Intent, Payload: payloadOf(req.Payload)},
		RunID: req.RunID, Token: req.Token, Summary: req.Summary, Conflict: ledger.ConflictMode(req.Conflict),
		Ack: req.Ack, PendingTTL: fromMs(req.PendingTTLMs), Redeliverable: req.Redeliverable, MaxAttempts: req.MaxAttempts,
	})
	if err != nil {
		return nil, err
	}
	if c.Status == ledger.StatusRefused {
		s.refusals.add(RefusalJSON{At: s.l.Options().Clock().UTC(), Scope: req.Scope, Intent: req.Intent, Summary: req.Summary,
			RunID: req.RunID, Token: req.Token, Reason: string(c.Reason)})
	}
	return claimToJSON(c), nil
}

// payloadOf turns an absent payload into JSON null, the same key the
// in-process API gives a nil payload.
func payloadOf(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func (s *server) settle(r *http.Request) (any, error) {
	var req SettleRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	if req.Attempt < 1 {
		return nil, fmt.Errorf("%w: attempt must be 1 or more", ledger.ErrInvalid)
	}
	var value any
	if len(req.Value) > 0 {
		value = req.Value
	}
	res, err := s.l.Settle(r.Context(), ledger.ClaimRef{Scope: req.Scope, EntryID: req.EntryID, Attempt: req.Attempt},
		ledger.Outcome(req.Outcome), value, errFromText(req.Error))
	if err != nil {
		return nil, err
	}
	return resultToJSON(res), nil
}

func (s *server) check(r *http.Request) (any, error) {
	var req KeyRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	res, err := s.l.Check(r.Context(), ledger.Key{Scope: req.Scope, Intent: req.Intent, Payload: payloadOf(req.Payload)})
	if err != nil {
		return nil, err
	}
	return CheckJSON{Done: res.Done, Status: string(res.Status), Entry: entryPtrToJSON(res.Entry)}, nil
}

func (s *server) history(r *http.Request) (any, error) {
	scope := r.PathValue("scope")
	if q, paged, err := historyQuery(r, scope, "limit"); err != nil {
		return nil, err
	} else if paged {
		p, err := s.l.Views().HistoryPage(r.Context(), q)
		if err != nil {
			return nil, err
		}
		return EntriesJSON{Scope: scope, Entries: entriesToJSON(p.Entries), Next: p.Next}, nil
	}
	es, err := s.l.Views().History(r.Context(), scope)
	if err != nil {
		return nil, err
	}
	return EntriesJSON{Scope: scope, Entries: entriesToJSON(es)}, nil
}

// historyQuery reads a page of history from the query: its size from
// the parameter named size, its cursor from before. paged is false when
// neither is there.
func historyQuery(r *http.Request, scope, size string) (q ledger.HistoryQuery, paged bool, err error) {
	v := r.URL.Query()
	q = ledger.HistoryQuery{Scope: scope, Before: v.Get("before")}
	if n := v.Get(size); n != "" {
		if q.Limit, err = strconv.Atoi(n); err != nil || q.Limit < 1 || q.Limit > ledger.MaxHistoryPage {
			return q, false, fmt.Errorf("%w: %s must be an integer from 1 to %d", ledger.ErrInvalid, size, ledger.MaxHistoryPage)
		}
	}
	return q, q.Limit != 0 || q.Before != "", nil
}

// maxAmbiguousScopes caps how many scopes one listing reads.
const maxAmbiguousScopes = 1000

// scopeLimit reads a listing's ?limit= (default 100, at most
// maxAmbiguousScopes scopes).
func scopeLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxAmbiguousScopes {
		return 0, fmt.Errorf("%w: limit must be an integer from 1 to %d", ledger.ErrInvalid, maxAmbiguousScopes)
	}
	return n, nil
}

func (s *server) ambiguous(r *http.Request) (any, error) {
	limit, err := scopeLimit(r)
	if err != nil {
		return nil, err
	}
	es, err := s.l.Views().Ambiguous(r.Context(), limit)
	if err != nil {
		return nil, err
	}
	return EntriesJSON{Entries: entriesToJSON(es)}, nil
}

func (s *server) resolve(r *http.Request) (any, error) {
	var req ResolveRequest
	if err := s.decode(r, &req); err != nil {
		return nil, err
	}
	outcome := ledger.Outcome(req.Outcome)
	var e ledger.Entry
	var err error
	switch {
	case req.EntryID != "" && (req.Intent != "" || len(req.Payload) > 0):
		return nil, fmt.Errorf("%w: name the entry by entry_id or by intent and payload, not both", ledger.ErrInvalid)
	case req.By != "" && req.By != ResolvedByOperator && req.By != ResolvedByReconciler:
		return nil, fmt.Errorf("%w: by %q (want %s or %s)", ledger.ErrInvalid, req.By, ResolvedByOperator, ResolvedByReconciler)
	case req.Who != "" && (req.EntryID == "" || req.By == ResolvedByReconciler):
		return nil, fmt.Errorf("%w: who is for an operator resolving by entry_id", ledger.ErrInvalid)
	case req.Who != "" && req.Attempt != 0:
		return nil, fmt.Errorf("%w: attempt is for by=reconciler", ledger.ErrInvalid)
	case req.By == ResolvedByReconciler && (req.EntryID == "" || req.Attempt < 1):
		return nil, fmt.Errorf("%w: a reconciler names the entry by entry_id and the attempt it found ambiguous", ledger.ErrInvalid)
	case req.By == ResolvedByReconciler:
		e, err = s.l.Reconciled(r.Context(), ledger.ClaimRef{Scope: req.Scope, EntryID: req.EntryID, Attempt: req.Attempt}, outcome)
	case req.Attempt != 0:
		return nil, fmt.Errorf("%w: attempt is for by=reconciler", ledger.ErrInvalid)
	default:
		e, err = s.l.Resolve(r.Context(), ledger.Resolution{Scope: req.Scope, EntryID: req.EntryID,
			Intent: req.Intent, Payload: payloadOf(req.Payload), Outcome: outcome, Who: req.Who})
	}
	if err != nil {
		return nil, err
	}
	return EntryOnlyJSON{Entry: entryToJSON(e)}, nil
}
