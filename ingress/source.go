package ingress

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// Source is one configured webhook endpoint, /hooks/{Name}, ready to serve.
// Build it with NewSource so that everything it needs is checked at start.
type Source struct {
	Name     string
	Provider string
	scheme   signatures.Scheme
	sigCfg   signatures.Config
	info     signatures.Provider

	eventID     extract.Rule
	eventIDText string
	split       string        // gjson path of the batch array; "" when each request is one event
	scope       *extract.Rule // nil: one scope per event
	contextAt   *extract.Rule // nil: receipt time
	runs        ledger.Mode
	maxBody     int64
	retryAfter  time.Duration

	forwardURL     string
	forwardTimeout time.Duration
	forwardHeaders map[string]string
	signingSecret  string
	passHeaders    []string // canonical names of informative provider headers to forward
	queue          QueueConfig
	// respondLimit > 0: forward.respond is agent, and the agent's 2xx
	// answer, up to this many bytes, is the provider's (respond.go).
	respondLimit int64

	ignore []matcher     // ignore rules, then presets; first match wins
	echoOf *extract.Rule // nil: no echo suppression
}

// SourceConfig is what NewSource needs; cmd/gateway fills it from YAML.
type SourceConfig struct {
	Name      string
	Provider  string
	Signature signatures.Config
	EventID   []string // templates; empty: the provider's default
	Scope     []string // templates; empty: one scope per event
	ContextAt []string // templates; empty: receipt time
	Runs      ledger.Mode
	MaxBody   int64
	// RetryAfter caps the Retry-After the gateway suggests.
	RetryAfter time.Duration
	Forward    ForwardConfig
	// Split turns one verified request into one event per element of a JSON array:
	// "{json:PATH}" ("{json:@this}" for a body that is the array), or "default" for the
	// provider's. EventID, Scope and ContextAt then apply to each element.
	Split string
	// Ignore lists rules whose matching events are answered 200 "ignored"
	// and not recorded or forwarded; IgnorePresets (nil: on) switches the
	// provider's presets; IgnoreFrom lists the agent's own identities for
	// the presets that need them (Slack user or bot ids, Nylas addresses).
	Ignore        []IgnoreRule
	IgnorePresets *bool
	IgnoreFrom    []string
	// EchoOf gives the provider id of the thing an event is about; an event
	// whose id an effect committed on its scope holds is the agent's echo.
	EchoOf []string
}

// ForwardConfig says where and how accepted events go.
type ForwardConfig struct {
	URL           string
	Timeout       time.Duration
	Headers       map[string]string
	SigningSecret string
	Queue         QueueConfig
	// Respond is who answers the provider: RespondGateway (the default;
	// the gateway's JSON) or RespondAgent (the agent's status,
	// Content-Type and body, for inline sources only).
	Respond string
	// RespondLimit bounds the agent's answer that is passed on and stored
	// for duplicates (default DefaultRespondLimit, at most MaxRespondLimit).
	RespondLimit int64
}

// Defaults for a source.
const (
	DefaultMaxBody    = 1 << 20
	DefaultRetryAfter = 10 * time.Second
	DefaultTimeout    = 10 * time.Second
	// deliverMargin is added to the forward timeout to make the deliver
	// claim's pending TTL: long enough that a live forward is never taken
	// for dead, short enough that a crashed instance's claim frees up by the
	// provider's next retry.
	deliverMargin = 5 * time.Second
)

// FieldError names the configuration field a problem is in.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// NewSource validates cfg and builds the source. Errors are *FieldError,
// naming the field under "sources.<name>".
func NewSource(cfg SourceConfig) (*Source, error) {
	field := "sources." + cfg.Name
	if err := checkSourceName(cfg.Name); err != nil {
		return nil, &FieldError{Field: "sources", Err: err}
	}
	info, err := signatures.Lookup(cfg.Provider)
	if err != nil {
		return nil, &FieldError{Field: field + ".provider", Err: err}
	}
	scheme, err := signatures.New(cfg.Provider, cfg.Signature)
	if err != nil {
		return nil, &FieldError{Field: field, Err: err}
	}
	s := &Source{
		Name: cfg.Name, Provider: cfg.Provider, scheme: scheme, sigCfg: cfg.Signature, info: info,
		runs: cfg.Runs, maxBody: cfg.MaxBody, retryAfter: cfg.RetryAfter,
		forwardURL: cfg.Forward.URL, forwardTimeout: cfg.Forward.Timeout,
		forwardHeaders: cfg.Forward.Headers, signingSecret: cfg.Forward.SigningSecret,
	}
	if info.NeedsVerifyToken && cfg.Signature.VerifyToken == "" {
		return nil, fieldErr(field+".verify_token", "required for provider %q: its subscription handshake checks it", cfg.Provider)
	}
	ids := cfg.EventID
	if cfg.Split != "" {
		if s.split, err = splitPath(cfg.Split, info); err != nil {
			return nil, &FieldError{Field: field + ".split", Err: err}
		}
		if len(ids) == 0 {
			if ids = info.SplitEventID; len(ids) == 0 {
				return nil, fieldErr(field+".event_id", "provider %q has no default event id for split elements: set event_id", cfg.Provider)
			}
		}
	}
	if len(ids) == 0 {
		ids = info.EventID
	}
	if len(ids) == 0 {
		return nil, fieldErr(field+".event_id", "provider %q has no default event id: set event_id", cfg.Provider)
	}
	if s.eventID, err = extract.ParseRule(ids); err != nil {
		return nil, &FieldError{Field: field + ".event_id", Err: err}
	}
	s.eventIDText = strings.Join(ids, " | ")
	if len(cfg.Scope) > 0 {
		r, err := extract.ParseRule(cfg.Scope)
		if err != nil {
			return nil, &FieldError{Field: field + ".scope", Err: err}
		}
		s.scope = &r
	}
	if len(cfg.ContextAt) > 0 {
		r, err := extract.ParseRule(cfg.ContextAt)
		if err != nil {
			return nil, &FieldError{Field: field + ".context_at", Err: err}
		}
		s.contextAt = &r
	}
	switch s.runs {
	case "":
		s.runs = ledger.ModeIndependent
	case ledger.ModeIndependent, ledger.ModeSupersede, ledger.ModeExclusive:
	default:
		return nil, fieldErr(field+".runs", "%q is not one of independent, supersede, exclusive", s.runs)
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.maxBody < 0 {
		return nil, fieldErr(field+".max_body", "must be positive")
	}
	if s.retryAfter == 0 {
		s.retryAfter = DefaultRetryAfter
	}
	if s.retryAfter < 0 {
		return nil, fieldErr(field+".retry_after", "must be positive")
	}
	if s.forwardTimeout == 0 {
		s.forwardTimeout = DefaultTimeout
	}
	if s.forwardTimeout < 0 {
		return nil, fieldErr(field+".forward.timeout", "must be positive")
	}
	if !strings.HasPrefix(s.forwardURL, "http://") && !strings.HasPrefix(s.forwardURL, "https://") {
		return nil, fieldErr(field+".forward.url", "%q must be an http:// or https:// URL", s.forwardURL)
	}
	if s.signingSecret != "" {
		if err := forward.ValidateSigningSecret(s.signingSecret); err != nil {
			return nil, &FieldError{Field: field + ".forward.signing_secret", Err: err}
		}
	}
	for _, h := range info.ForwardHeaders {
		s.passHeaders = append(s.passHeaders, http.CanonicalHeaderKey(h))
	}
	if s.queue, err = cfg.Forward.Queue.validate(field + ".forward"); err != nil {
		return nil, err
	}
	if s.respondLimit, err = respondLimit(cfg.Forward, s.queue.Mode, s.split, field+".forward"); err != nil {
		return nil, err
	}
	// Ignore rules and echo_of are checked together, so that gateway check
	// lists every bad rule at once.
	var ignoreErr, echoErr error
	s.ignore, ignoreErr = compileIgnore(cfg, field)
	if len(cfg.EchoOf) > 0 {
		r, err := extract.ParseRule(cfg.EchoOf)
		switch {
		case s.scope == nil:
			echoErr = fieldErr(field+".echo_of", "needs scope: the echo is looked for among the effects committed on the event's scope")
		case err != nil:
			echoErr = &FieldError{Field: field + ".echo_of", Err: err}
		default:
			s.echoOf = &r
		}
	}
	if ignoreErr != nil || echoErr != nil {
		return nil, errors.Join(ignoreErr, echoErr)
	}
	return s, nil
}

// MaxSourceName bounds a source's name, which every run id starts with.
const MaxSourceName = 64

// checkSourceName accepts letters, digits, '_' and '-' (no '.': config
// field paths such as sources.NAME.forward.timeout split on it). The name is
// the route's path segment and the start of every run id,
// "{source}:{eventId}": a ':' in it would let source "a" event "b:c" and
// source "a:b" event "c" share a run.
func checkSourceName(name string) error {
	if name == "" || len(name) > MaxSourceName {
		return fmt.Errorf("source name %q must be 1 to %d characters", name, MaxSourceName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("source name %q may hold only letters, digits, '_' and '-' (not %q): it is the route and the start of every run id {source}:{eventId}", name, r)
		}
	}
	if ledger.ReservedScope(name + ":") {
		return fmt.Errorf("source name %q is reserved: {source}:{eventId} is every event's default scope, and scopes starting with %q are the gateway's own", name, ledger.ReservedPrefix)
	}
	return nil
}

// splitPath reads a split setting: "default", or "{json:PATH}".
func splitPath(v string, info signatures.Provider) (string, error) {
	if v == "default" {
		if info.Split == "" {
			return "", fmt.Errorf("provider %q has no default split: give {json:PATH}", info.Name)
		}
		return info.Split, nil
	}
	p, ok := strings.CutPrefix(v, "{json:")
	if !ok || !strings.HasSuffix(p, "}") || len(p) < 2 || strings.ContainsAny(p[:len(p)-1], "{}") {
		return "", fmt.Errorf("%q: want {json:PATH} (e.g. {json:events}, {json:@this} for a top-level array) or default", v)
	}
	return p[:len(p)-1], nil
}

// ForwardTimeout is the source's forward timeout.
func (s *Source) ForwardTimeout() time.Duration { return s.forwardTimeout }

// Info is the provider's static facts.
func (s *Source) Info() signatures.Provider { return s.info }

// Describe is a one-line summary for `gateway check`.
func (s *Source) Describe() string {
	scope := "one scope per event"
	if s.scope != nil {
		scope = "scope " + s.scope.String()
	}
	ctxAt := "receipt"
	if s.contextAt != nil {
		ctxAt = s.contextAt.String()
	}
	split := ""
	if s.split != "" {
		split = " split={json:" + s.split + "}"
	}
	respond := ""
	if s.respondLimit > 0 {
		respond = fmt.Sprintf(", the agent answers (up to %d bytes)", s.respondLimit)
	}
	ignore := ""
	for _, m := range s.ignore {
		ignore += " " + m.label
	}
	if ignore != "" {
		ignore = " ignore:" + ignore
	}
	if s.echoOf != nil {
		ignore += " echo_of=" + s.echoOf.String()
	}
	return fmt.Sprintf("POST /hooks/%s  provider=%s%s event_id=%s %s context_at=%s runs=%s → %s (timeout %s, %s%s)%s",
		s.Name, s.Provider, split, s.eventIDText, scope, ctxAt, s.runs, s.forwardURL, s.forwardTimeout, s.queue.Mode, respond, ignore)
}
