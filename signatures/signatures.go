package signatures

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Sentinel errors, matched with errors.Is. Every error from this package wraps exactly one.
var (
	ErrMissingHeader = errors.New("signatures: missing signature, timestamp or id")
	ErrMalformed     = errors.New("signatures: malformed signature header")
	ErrStale         = errors.New("signatures: timestamp outside tolerance")
	ErrNoMatch       = errors.New("signatures: no matching signature")
	// ErrUnsupportedAlgorithm: the request names a signature algorithm the verifier does not
	// implement (Twilio's settings header), so no secret was tried. Kept apart from
	// ErrMalformed: the header is well formed, and the operator's fix is a newer gateway.
	ErrUnsupportedAlgorithm = errors.New("signatures: unsupported signature algorithm")
	ErrUnknownProvider      = errors.New("signatures: unknown provider")
	ErrConfig               = errors.New("signatures: invalid configuration")
)

// Request is what a verifier sees: the raw request as received.
type Request struct {
	Method string
	// URL is the public URL the provider called (see the package doc); URL-signing schemes and
	// query-string handshakes read it. Other schemes ignore it.
	URL    string
	Header http.Header
	Body   []byte // raw bytes, never re-encoded
}

// Config is one source's verification settings. Its YAML tags are the keys written at a
// gateway source's level (secrets, tolerance, url, verify_token, hmac).
type Config struct {
	// Secrets are tried in order; several while rotating. For Discord and SendGrid they are the
	// public keys (verifiers) or a private key (signers), see the package doc.
	Secrets []string `yaml:"secrets"`
	// Tolerance bounds the age of timestamped requests, in both directions. 0 means the
	// provider's default.
	Tolerance time.Duration `yaml:"tolerance"`
	// URL is the public URL for URL-signing schemes (Twilio, Square, HubSpot), required for them.
	URL string `yaml:"url"`
	// VerifyToken answers Meta's hub.verify_token in the GET handshake.
	VerifyToken string `yaml:"verify_token"`
	// HMAC configures the generic "hmac" provider and is required for it.
	HMAC *HMACConfig `yaml:"hmac"`
	// Fetcher fetches and caches the certificates and keys of the schemes that look them up at
	// run time (sns, paypal, plaid). Share one across sources so the cache is shared; nil gives
	// each verifier its own with default settings (system roots, a 10 s timeout).
	Fetcher *Fetcher `yaml:"-"`
}

// HMACConfig describes a generic HMAC scheme for providers not listed by name. The YAML tags
// are the keys of a source's hmac section.
type HMACConfig struct {
	Header    string `yaml:"header"`    // signature header, required
	Algorithm string `yaml:"algorithm"` // sha1 | sha256 | sha512
	Encoding  string `yaml:"encoding"`  // hex | base64
	Prefix    string `yaml:"prefix"`    // stripped from each signature, e.g. "sha256="
	// Separator splits several signatures in one header value (e.g. "," or " "); empty means the
	// whole value is one signature.
	Separator string `yaml:"separator"`
	// Template is the signed content over {id}, {timestamp}, {body}, {url} and {method} with
	// literal text between them; empty means "{body}". It must contain {body}, so the payload is
	// always authenticated.
	Template        string `yaml:"template"`
	IDHeader        string `yaml:"id_header"`        // required when the template uses {id}
	TimestampHeader string `yaml:"timestamp_header"` // required when the template uses {timestamp}; unix s, ms, or RFC 3339
	// Tolerance for the timestamp; 0 falls back to Config.Tolerance, then to 300 s. Only used
	// when TimestampHeader is set.
	Tolerance time.Duration `yaml:"tolerance"`
}

// Scheme verifies a request.
type Scheme interface {
	// Verify checks the request against the configured secrets at time now. nil means authentic.
	Verify(r *Request, now time.Time) error
}

// Signer signs a request as the provider would.
type Signer interface {
	// Sign adds the provider's signature headers (and for schemes that need them, the
	// timestamp and id headers) to r, using the first secret or private key. A few schemes carry
	// the signature in the body (Mailgun, Microsoft Graph); their signers rewrite r.Body.
	Sign(r *Request, now time.Time) error
}

// Provider holds a provider's static facts, used by the ingress as defaults.
type Provider struct {
	Name string
	// EventID lists extraction templates; the first that fully resolves is the event id. Empty
	// when there is no sensible default and the operator must configure one.
	EventID []string
	// ContextAt is a template for the provider's own event time, when there is one.
	ContextAt string
	// ForwardHeaders are informative headers safe to pass to the agent.
	ForwardHeaders []string
	// SignatureHeaders must never be forwarded (signatures, tokens, credentials).
	SignatureHeaders []string
	NeedsURL         bool // the scheme signs the public URL: Config.URL is required
	Timestamped      bool // a signed timestamp is checked against a tolerance by default
	// DefaultTolerance applies when Config.Tolerance is 0 (Timestamped providers only).
	DefaultTolerance time.Duration
	// BodySigned is false for schemes that authenticate the sender but not the payload (shared
	// tokens, basic auth, Mailgun's timestamp+token signature): an intermediary could alter the
	// body without detection.
	BodySigned bool
	// Handshake is true when Handshake answers an endpoint verification for this provider.
	Handshake bool
	// SignedHeaders are the headers, besides the signature's own, whose
	// values the signature covers (an id or timestamp header the scheme
	// signs), canonical; filled in by Lookup. An event id read from any
	// other header can be changed by whoever holds a copy of a request.
	SignedHeaders []string
	// HandshakeByGET is true when the handshake arrives as a GET (Meta, Nylas, Dropbox, X): the
	// only GET the gateway answers on a source.
	HandshakeByGET bool
	// NeedsVerifyToken is true when the handshake checks Config.VerifyToken (Meta).
	NeedsVerifyToken bool
	// Split is the gjson path ("@this" for the root) of the array that a batched delivery
	// carries, used when a source sets split: default; SplitEventID is the event id rule applied
	// to each element. Empty when the provider does not batch.
	Split        string
	SplitEventID []string
	// Scheme and HandshakeNote describe the verification and the handshake in one line each,
	// for people (`gateway providers`); Timestamp states which timestamp is signed and how it
	// is checked (the window, its directions, or why there is none). Filled in by Lookup.
	Scheme, HandshakeNote, Timestamp string
	// Secret says where the provider shows the secret to put in
	// Config.Secrets (its dashboard's path, or that the user chose it),
	// for people (`gateway providers NAME`); filled in by Lookup.
	Secret string
}

// HandshakeResponse is the answer to a provider's endpoint verification request.
type HandshakeResponse struct {
	Status      int
	ContentType string
	Header      http.Header
	Body        []byte
	// Note is for the operator's log, never sent: what the operator must copy from this
	// handshake (Notion's verification token).
	Note string
}

// New builds the verifier for a provider. Unknown names wrap ErrUnknownProvider; missing or bad
// settings wrap ErrConfig and name the field.
func New(provider string, cfg Config) (Scheme, error) {
	d, err := lookup(provider)
	if err != nil {
		return nil, err
	}
	if err := checkCommon(d, cfg); err != nil {
		return nil, err
	}
	return d.verifier(cfg)
}

// NewSigner builds a signer for a provider. For shared-secret schemes it signs with
// cfg.Secrets[0]; for Discord and SendGrid cfg.Secrets[0] is a private key (see the package doc).
// Postmark's signer takes "user:password"; Microsoft Graph's writes clientState into the body.
func NewSigner(provider string, cfg Config) (Signer, error) {
	d, err := lookup(provider)
	if err != nil {
		return nil, err
	}
	if err := checkCommon(d, cfg); err != nil {
		return nil, err
	}
	return d.signer(cfg)
}

// Lookup returns a provider's static facts.
func Lookup(provider string) (Provider, error) {
	d, err := lookup(provider)
	if err != nil {
		return Provider{}, err
	}
	p := d.info
	p.Name = provider
	// Hand out copies so callers cannot change the registry's slices.
	p.EventID = slices.Clone(p.EventID)
	p.ForwardHeaders = slices.Clone(p.ForwardHeaders)
	p.SignatureHeaders = slices.Clone(p.SignatureHeaders)
	p.Handshake = d.handshake != nil
	p.SignedHeaders = d.signedHeaders()
	p.Scheme = describe(provider, d)
	p.Timestamp = timestampRule(provider, d)
	p.Secret = secretHelp(provider)
	if sd, ok := splitDefaults[provider]; ok {
		p.Split, p.SplitEventID = sd.path, slices.Clone(sd.eventID)
	}
	if p.Handshake {
		p.HandshakeNote = handshakeNotes[provider]
	}
	return p, nil
}

// Providers returns the registered provider names, sorted.
func Providers() []string {
	names := make([]string, 0, len(registry)+len(registryA)+len(familyRegistry))
	for n := range registry {
		names = append(names, n)
	}
	for n := range registryA {
		names = append(names, n)
	}
	for n := range familyRegistry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Handshake answers a provider's endpoint verification request, if r is one. handled=false means
// "not a handshake, go on to Verify". Where the provider signs its handshake (Slack, Zoom, Twitch,
// Discord, GitHub and Intercom pings, Front), the signature is verified here and its error returned;
// the gateway answers 401. No I/O and the clock is now, with one exception: Amazon SNS's
// SubscriptionConfirmation is confirmed by a GET of its SubscribeURL through Config.Fetcher.
func Handshake(provider string, cfg Config, r *Request, now time.Time) (resp *HandshakeResponse, handled bool, err error) {
	d, err := lookup(provider)
	if err != nil {
		return nil, false, err
	}
	if d.handshake == nil || r == nil {
		return nil, false, nil
	}
	return d.handshake(d, cfg, r, now)
}

func lookup(provider string) (*def, error) {
	d, ok := registry[provider]
	if !ok {
		d, ok = registryA[provider]
	}
	if !ok {
		d, ok = familyRegistry[provider]
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, provider)
	}
	return d, nil
}

func checkCommon(d *def, cfg Config) error {
	if len(cfg.Secrets) == 0 {
		return fmt.Errorf("%w: secrets: at least one is required", ErrConfig)
	}
	for i, s := range cfg.Secrets {
		if s == "" {
			return fmt.Errorf("%w: secrets[%d] is empty", ErrConfig, i)
		}
	}
	if cfg.Tolerance < 0 {
		return fmt.Errorf("%w: tolerance must not be negative", ErrConfig)
	}
	if d.info.NeedsURL && cfg.URL == "" {
		return fmt.Errorf("%w: url: required, this provider signs the public URL", ErrConfig)
	}
	return nil
}

// tolerance picks the configured tolerance or the provider default.
func tolerance(cfg Config, def time.Duration) time.Duration {
	if cfg.Tolerance > 0 {
		return cfg.Tolerance
	}
	return def
}
