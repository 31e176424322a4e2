package ingress

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// Source is one configured webhook endpoint, /hooks/{Name}, ready to serve.
// Build it with NewSource so that everything it needs is checked at start.
// It runs with its SourceConfig as given, defaults filled in (Config):
// there is no second copy of a setting to keep in step.
type Source struct {
	Name     string
	Provider string
	cfg      SourceConfig // with its defaults (withDefaults)
	scheme   signatures.Scheme
	info     signatures.Provider

	// What the configuration compiles to.
	eventID     extract.Rule
	eventIDText string
	split       string        // gjson path of the batch array; "" when each request is one event
	scope       *extract.Rule // nil: one scope per event
	contextAt   *extract.Rule // nil: receipt time
	passHeaders []string      // canonical names of informative provider headers to forward
	ignore      []matcher     // ignore rules, then presets; first match wins
	echoOf      *extract.Rule // nil: no echo suppression
	// queued is the source as the dispatcher delivers it, made of the
	// same configuration (cfg.Forward's target and policy).
	queued *dispatch.Source
	// replays: a request whose signed content an earlier event id already
	// carried is refused as a replay (replay.go).
	replays bool
}

// SourceConfig is one source as the configuration file writes it, under
// sources.NAME (the YAML tags are the file's keys), and as programs built
// on this package give it to NewSource. Zero fields take their defaults
// (withDefaults), the same whichever way the source was configured.
type SourceConfig struct {
	Name     string `yaml:"-"` // the key under sources
	Provider string `yaml:"provider"`
	// Signature holds secrets, tolerance, url, verify_token and hmac,
	// written at the source's level.
	Signature signatures.Config `yaml:",inline"`
	EventID   extract.Templates `yaml:"event_id"`   // empty: the provider's default
	Scope     extract.Templates `yaml:"scope"`      // empty: one scope per event
	ContextAt extract.Templates `yaml:"context_at"` // empty or "receipt": receipt time
	Runs      ledger.Mode       `yaml:"runs"`       // default independent
	MaxBody   ByteSize          `yaml:"max_body"`   // default DefaultMaxBody
	// RetryAfter caps the Retry-After the gateway suggests (default
	// DefaultRetryAfter).
	RetryAfter time.Duration `yaml:"retry_after"`
	Forward    ForwardConfig `yaml:"forward"`
	// Split turns one verified request into one event per element of a JSON array:
	// "{json:PATH}" ("{json:@this}" for a body that is the array), or "default" for the
	// provider's. EventID, Scope and ContextAt then apply to each element.
	Split string `yaml:"split"`
	// Ignore lists rules whose matching events are answered 200 "ignored"
	// and not recorded or forwarded; IgnorePresets (nil: on) switches the
	// provider's presets; IgnoreFrom lists the agent's own identities for
	// the presets that need them (Slack user or bot ids, Nylas addresses).
	Ignore        []IgnoreRule `yaml:"ignore"`
	IgnorePresets *bool        `yaml:"ignore_presets"`
	IgnoreFrom    []string     `yaml:"ignore_from"`
	// EchoOf gives the provider id of the thing an event is about; an event
	// whose id an effect committed on its scope holds is the agent's echo.
	EchoOf extract.Templates `yaml:"echo_of"`
	// RefuseReplays turns refusal of replayed content on or off (replay.go);
	// nil: on when the event id reads a header or query parameter the
	// provider's signature does not cover, off otherwise.
	RefuseReplays *bool `yaml:"refuse_replays"`
}

// ForwardConfig says where and how accepted events go (forward: in the
// file).
type ForwardConfig struct {
	// Target is forward.url, forward.timeout (default DefaultTimeout),
	// forward.headers and forward.signing_secret.
	forward.Target `yaml:",inline"`
	// Queue is the delivery mode and, in queued mode, the dispatcher's
	// policy; its keys sit beside the others (forward.mode, ...).
	Queue dispatch.Policy `yaml:",inline"`
	// Respond is who answers the provider: RespondGateway (the default;
	// the gateway's JSON) or RespondAgent (the agent's status,
	// Content-Type and body, for inline sources only).
	Respond string `yaml:"respond"`
	// RespondLimit bounds the agent's answer that is passed on and stored
	// for duplicates (default DefaultRespondLimit, at most MaxRespondLimit).
	RespondLimit ByteSize `yaml:"respond_limit"`
	// KeepBody keeps an inline event's body (and its passed headers) in
	// the store beside its record in the received index, so the console
	// and `gateway events show` can show it. Off by default: the record
	// alone costs a few hundred bytes of the scope's document, the body
	// one more store write of its size. Queued events always keep theirs.
	KeepBody bool `yaml:"keep_body"`
}

// Defaults for a source.
const (
	DefaultMaxBody    = 1 << 20
	DefaultRetryAfter = 10 * time.Second
	DefaultTimeout    = 10 * time.Second
)

// contextAtReceipt is the context_at that says "receipt time", the
// default, in so many words.
const contextAtReceipt = "receipt"

// withDefaults is the source's one defaults function: every zero field
// that has a default gets it here, whether the source came from the file
// or from a program.
func (c SourceConfig) withDefaults() SourceConfig {
	if c.Runs == "" {
		c.Runs = ledger.ModeIndependent
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if len(c.ContextAt) == 1 && c.ContextAt[0] == contextAtReceipt {
		c.ContextAt = nil
	}
	if c.Forward.Timeout == 0 {
		c.Forward.Timeout = DefaultTimeout
	}
	if c.Forward.Respond == "" {
		c.Forward.Respond = RespondGateway
	}
	if c.Forward.Respond == RespondAgent && c.Forward.RespondLimit == 0 {
		c.Forward.RespondLimit = DefaultRespondLimit
	}
	c.Forward.Queue = c.Forward.Queue.WithDefaults()
	return c
}

// NewSource validates cfg and builds the source. Errors are *field.Error,
// naming the field under "sources.<name>"; every problem found is
// returned at once (joined), so gateway check lists them all instead of
// making the operator fix one per run. Checks that need the provider's
// facts are skipped when the provider is unknown.
func NewSource(cfg SourceConfig) (*Source, error) {
	path := "sources." + cfg.Name
	if err := checkSourceName(cfg.Name); err != nil {
		return nil, field.Wrap("sources", err)
	}
	var errs []error
	bad := func(err error) { errs = append(errs, err) }
	info, err := signatures.Lookup(cfg.Provider)
	known := err == nil
	if err != nil {
		bad(field.Wrap(path+".provider", err))
	}
	var scheme signatures.Scheme
	if known {
		if scheme, err = signatures.New(cfg.Provider, cfg.Signature); err != nil {
			bad(field.Wrap(path, err))
		}
	}
	cfg = cfg.withDefaults()
	s := &Source{Name: cfg.Name, Provider: cfg.Provider, cfg: cfg, scheme: scheme, info: info}
	if known {
		s.checkProviderRules(cfg, info, path, bad)
	}
	if len(cfg.Scope) > 0 {
		if r, err := extract.ParseRule(cfg.Scope); err != nil {
			bad(field.Wrap(path+".scope", err))
		} else {
			s.scope = &r
		}
	}
	if len(cfg.ContextAt) > 0 {
		if r, err := extract.ParseRule(cfg.ContextAt); err != nil {
			bad(field.Wrap(path+".context_at", err))
		} else {
			s.contextAt = &r
		}
	}
	switch cfg.Runs {
	case ledger.ModeIndependent, ledger.ModeSupersede, ledger.ModeExclusive:
	default:
		bad(field.Errorf(path+".runs", "%q is not one of independent, supersede, exclusive", cfg.Runs))
	}
	if cfg.MaxBody < 0 {
		bad(field.Errorf(path+".max_body", "must be positive"))
	}
	if cfg.RetryAfter < 0 {
		bad(field.Errorf(path+".retry_after", "must be positive"))
	}
	if cfg.Forward.Timeout < 0 {
		bad(field.Errorf(path+".forward.timeout", "must be positive"))
	}
	if cfg.Forward.URL == "" {
		bad(field.Errorf(path+".forward.url", "missing: the agent's http:// or https:// URL the gateway forwards accepted events to"))
	} else if u, err := url.Parse(cfg.Forward.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad(field.Errorf(path+".forward.url", "%q must be an http:// or https:// URL", shownURL(cfg.Forward.URL)))
	}
	if cfg.Forward.SigningSecret != "" {
		if err := forward.ValidateSigningSecret(cfg.Forward.SigningSecret); err != nil {
			bad(field.Wrap(path+".forward.signing_secret", err))
		}
	}
	if err := cfg.Forward.Queue.Validate(path + ".forward"); err != nil {
		bad(err)
	}
	if s.scope == nil && len(cfg.Scope) == 0 {
		// Without a scope rule every event is its own scope: a scope
		// never holds a second event to order or fold, so both settings
		// would silently do nothing.
		if cfg.Forward.Queue.Order != ledger.OrderNone {
			bad(field.Errorf(path+".forward.order", "needs scope: without a scope rule every event is its own scope, so there is nothing to order (e.g. scope: \"{json:conversation.id}\")"))
		}
		if cfg.Forward.Queue.Debounce != (ledger.Debounce{}) {
			bad(field.Errorf(path+".forward.debounce", "needs scope: without a scope rule every event is its own scope, so no burst is ever folded (e.g. scope: \"{json:conversation.id}\")"))
		}
	}
	if cfg.Forward.Queue.Cancel == dispatch.CancelNotify && cfg.Runs != ledger.ModeSupersede {
		// Only a newer event superseding the run in flight sends a
		// notice: without supersede the setting would do nothing.
		bad(field.Errorf(path+".forward.cancel", "notify needs runs: supersede (runs is %q): only a superseded run gets a cancellation notice", cfg.Runs))
	}
	s.queued = &dispatch.Source{Name: cfg.Name, Runs: cfg.Runs, Target: cfg.Forward.Target, Policy: cfg.Forward.Queue}
	if err := checkRespond(cfg.Forward, s.split, path+".forward"); err != nil {
		bad(err)
	}
	var err2 error
	if s.ignore, err2 = compileIgnore(cfg, path); err2 != nil {
		bad(err2)
	}
	if len(cfg.EchoOf) > 0 {
		r, err := extract.ParseRule(cfg.EchoOf)
		switch {
		case s.scope == nil:
			bad(field.Errorf(path+".echo_of", "needs scope: the echo is looked for among the effects committed on the event's scope"))
		case err != nil:
			bad(field.Wrap(path+".echo_of", err))
		default:
			s.echoOf = &r
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// checkProviderRules checks and builds what depends on the provider's
// facts: its handshake token, split, event id, forwarded headers and the
// replay guard.
func (s *Source) checkProviderRules(cfg SourceConfig, info signatures.Provider, path string, bad func(error)) {
	if info.NeedsVerifyToken && cfg.Signature.VerifyToken == "" {
		bad(field.Errorf(path+".verify_token", "required for provider %q: its subscription handshake checks it", cfg.Provider))
	}
	ids := cfg.EventID
	if cfg.Split != "" {
		var err error
		if s.split, err = splitPath(cfg.Split, info); err != nil {
			bad(field.Wrap(path+".split", err))
			return
		}
		if len(ids) == 0 {
			if ids = info.SplitEventID; len(ids) == 0 {
				bad(field.Errorf(path+".event_id", "provider %q has no default event id for split elements: set event_id", cfg.Provider))
				return
			}
		}
	}
	if len(ids) == 0 {
		ids = info.EventID
	}
	if len(ids) == 0 {
		bad(field.Errorf(path+".event_id", "provider %q has no default event id: set event_id", cfg.Provider))
		return
	}
	var err error
	if s.eventID, err = extract.ParseRule(ids); err != nil {
		bad(field.Wrap(path+".event_id", err))
		return
	}
	s.eventIDText = strings.Join(ids, " | ")
	for _, h := range info.ForwardHeaders {
		s.passHeaders = append(s.passHeaders, http.CanonicalHeaderKey(h))
	}
	if s.replays, err = refuseReplays(cfg, s, path); err != nil {
		bad(err)
	}
}

// Config is the configuration the source runs with: as given to
// NewSource, with its defaults filled in.
func (s *Source) Config() SourceConfig { return s.cfg }

// Queued is the source as the dispatcher delivers it (its mode says
// whether it does).
func (s *Source) Queued() *dispatch.Source { return s.queued }

// shownURL is a forward URL as errors and `gateway check` show it: without
// the password it may carry (user:password@host), and not at all when it
// cannot be parsed and has an '@' that might start one.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Opaque == "" {
		return u.Redacted()
	}
	if strings.Contains(raw, "@") {
		return "(a malformed URL, not shown: it may hold a password)"
	}
	return raw
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
func (s *Source) ForwardTimeout() time.Duration { return s.cfg.Forward.Timeout }

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
	if n := s.respondLimit(); n > 0 {
		respond = fmt.Sprintf(", the agent answers (up to %d bytes)", n)
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
		s.Name, s.Provider, split, s.eventIDText, scope, ctxAt, s.cfg.Runs, shownURL(s.cfg.Forward.URL), s.cfg.Forward.Timeout, s.cfg.Forward.Queue.Mode, respond, ignore)
}
