package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Header names set on every forwarded request, in canonical MIME form so they index an http.Header
// directly. Agents may read them case-insensitively.
const (
	HeaderSource           = "Replyonce-Source"
	HeaderEventID          = "Replyonce-Event-Id"
	HeaderScope            = "Replyonce-Scope"
	HeaderRunID            = "Replyonce-Run-Id"
	HeaderDelivery         = "Replyonce-Delivery"
	HeaderFencingToken     = "Replyonce-Fencing-Token"
	HeaderContextAt        = "Replyonce-Context-At"
	HeaderCovers           = "Replyonce-Covers"
	HeaderNotice           = "Replyonce-Notice"
	HeaderIdempotencyKey   = "Idempotency-Key"
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// ContextAtFormat is the layout of HeaderContextAt: RFC 3339 in UTC with exactly three fractional
// digits, so agents can compare values as strings as well as parse them.
const ContextAtFormat = "2006-01-02T15:04:05.000Z"

// DefaultTimeout bounds a forward whose Request has no Timeout.
const DefaultTimeout = 10 * time.Second

// maxDrain is how much of an agent's response body is read before closing it. Reading to EOF lets
// the connection be reused; past this bound a fresh connection is cheaper than reading on.
const maxDrain = 64 << 10

var (
	// ErrRedirect is wrapped by the Err of an Outcome whose agent answered 3xx.
	ErrRedirect = errors.New("forward: agent answered with a redirect, which is never followed")
	// ErrAgentStatus is wrapped by the Err of an Outcome whose agent answered a non-2xx, non-3xx status.
	ErrAgentStatus = errors.New("forward: agent answered a non-2xx status")
	// ErrAnswerTooLarge is wrapped by an Outcome's BodyErr when a 2xx answer was longer than
	// Request.KeepBody.
	ErrAnswerTooLarge = errors.New("forward: the agent's answer is too large to keep")
	// ErrBadRequest is wrapped when the Request itself cannot be sent (no URL, no message id to sign).
	ErrBadRequest = errors.New("forward: request cannot be sent")
)

// Request is one accepted webhook on its way to the agent.
type Request struct {
	URL     string
	Timeout time.Duration // <= 0 means DefaultTimeout

	Body        []byte // the provider's raw bytes, forwarded unchanged
	ContentType string // the provider's Content-Type; left out when empty

	// Header holds the provider's informative headers, already allow-listed by the caller.
	Header http.Header
	// StaticHeaders are the source's configured forward.headers, such as Authorization.
	StaticHeaders map[string]string

	Source, EventID, Scope, RunID string
	Delivery                      int
	FencingToken                  uint64
	ContextAt                     time.Time

	// IdempotencyKey is stable for the event across deliveries and instances. When empty, RunID is
	// used, which has the same stability.
	IdempotencyKey string
	// SigningSecret is a Standard Webhooks secret ("whsec_" + base64). Empty means unsigned.
	SigningSecret string
	// Final lists agent statuses, besides 400, 413, 415 and 422, that reject the event for good.
	Final []int
	// KeepBody, when positive, keeps up to that many bytes of a 2xx answer's body in the Outcome
	// (Body, ContentType), for passing the agent's answer back to the provider. A longer body is
	// not kept: the Outcome's BodyErr wraps ErrAnswerTooLarge.
	KeepBody int64
	// CoverCount and Covers say, for a debounced delivery, how many events it stands for and
	// which (oldest first, this one last, at most the newest ledger.MaxCovers): HeaderCovers.
	CoverCount int
	Covers     []string
	// Notice marks a request that is not an event but a notice about one ("cancel"): HeaderNotice.
	Notice string
}

// Kind is what the agent's answer means for the provider.
type Kind int

const (
	// Retry is the zero value on purpose: an Outcome nobody filled in must never acknowledge an
	// event to the provider.
	Retry Kind = iota
	// Delivered means the agent answered 2xx.
	Delivered
	// Rejected means the agent refused the event for good; redelivering it cannot help.
	Rejected
	// Fault means the agent's answer points at the gateway's configuration rather than the event
	// (401, 403, 404, 405, 410: a wrong secret, a wrong path): it must be kept and retried, and
	// counted apart so an operator sees it.
	Fault
)

// finalStatuses are the agent answers that say the event itself is bad, whatever the setup.
var finalStatuses = []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
	http.StatusUnprocessableEntity}

// faultStatuses say the request reached the wrong place or the wrong credentials.
var faultStatuses = []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed,
	http.StatusGone}

// maxAnswer is how much of the agent's answer an Outcome keeps, for operators.
const maxAnswer = 256

func (k Kind) String() string {
	switch k {
	case Retry:
		return "retry"
	case Delivered:
		return "delivered"
	case Rejected:
		return "rejected"
	case Fault:
		return "fault"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Outcome is the result of one forward.
type Outcome struct {
	Kind       Kind
	Status     int           // the agent's status code, 0 when it never answered
	RetryAfter time.Duration // the agent's Retry-After on a 429 or 503 (0: absent, or "now")
	// RetryAfterGiven says the agent's 429 or 503 carried a readable
	// Retry-After: 0 or a date already past asks for a retry now, which
	// is advice too, unlike no header or an unreadable one.
	RetryAfterGiven bool
	Latency         time.Duration // from just before sending to the end of reading the answer
	Err             error         // nil only when Kind is Delivered
	Answer          []byte        // the first bytes of the agent's answer (at most 256)

	// With Request.KeepBody, for a 2xx answer: its whole body and Content-Type. When the body
	// could not be kept, Body is nil and BodyErr says why: ErrAnswerTooLarge, or the read error
	// of an answer cut off midway. The Kind stays Delivered either way: the agent said 2xx.
	Body        []byte
	ContentType string
	BodyErr     error
}

// Forwarder sends requests to agents. It is safe for concurrent use.
type Forwarder struct {
	client  *http.Client
	now     func() time.Time
	tracer  trace.Tracer // nil: no tracing (see WithTracer)
	signers *signers     // shared by the copies WithTracer makes
}

// New returns a Forwarder using client and now. A nil client gets NewClient(ClientOptions{}); a nil
// now gets time.Now. The Forwarder uses a shallow copy of client whose redirect policy refuses to
// follow, whatever client's own policy is, so the transport and its pool are shared but a redirect is
// never followed with the body.
func New(client *http.Client, now func() time.Time) *Forwarder {
	if client == nil {
		client = NewClient(ClientOptions{})
	}
	if now == nil {
		now = time.Now
	}
	c := *client
	c.CheckRedirect = noRedirect
	return &Forwarder{client: &c, now: now, signers: &signers{}}
}

// ValidateSigningSecret reports whether secret can sign forwarded requests, so configuration can
// reject a bad forward.signing_secret at start-up instead of on the first event.
func ValidateSigningSecret(secret string) error {
	if secret == "" {
		return fmt.Errorf("forward: signing secret is empty")
	}
	if _, err := newSigner(secret); err != nil {
		return fmt.Errorf("forward: signing secret is not whsec_ followed by base64: %w", err)
	}
	return nil
}

// Forward posts r to the agent and classifies the answer. It never returns without an Outcome; a
// failure to even build the request is a Retry, because acknowledging an event that never reached
// the agent would lose it.
func (f *Forwarder) Forward(ctx context.Context, r Request) Outcome {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errForwardTimeout)
	defer cancel()
	ctx, span := f.startSpan(ctx, &r)
	out := f.forward(ctx, r, timeout)
	endSpan(span, out)
	return out
}

func (f *Forwarder) forward(ctx context.Context, r Request, timeout time.Duration) Outcome {
	req, err := f.newRequest(ctx, r)
	if err != nil {
		return Outcome{Kind: Retry, Err: err}
	}
	f.inject(ctx, req.Header)

	start := f.now()
	resp, err := f.client.Do(req)
	if err != nil {
		return Outcome{Kind: Retry, Latency: f.now().Sub(start), Err: explainTransport(ctx, err, r.URL, timeout)}
	}
	out := classify(resp.StatusCode, r.Final)
	if r.KeepBody > 0 && out.Kind == Delivered {
		keepBody(&out, resp, r.KeepBody)
	} else {
		// Draining before Close is what lets the transport put the connection back in the pool.
		head := make([]byte, maxAnswer)
		n, _ := io.ReadFull(resp.Body, head)
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain-int64(n))
		out.Answer = head[:n]
	}
	_ = resp.Body.Close()
	out.Latency = f.now().Sub(start)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		out.RetryAfter, out.RetryAfterGiven = parseRetryAfter(resp.Header.Get("Retry-After"), f.now())
	}
	if out.Kind != Delivered {
		loc := resp.Header.Get("Location")
		var cause error
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			cause = fmt.Errorf("%w: %d to %q", ErrRedirect, resp.StatusCode, loc)
		} else {
			cause = fmt.Errorf("%w: %d %s", ErrAgentStatus, resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		out.Err = explainStatus(resp.StatusCode, loc, r.URL, cause)
	}
	return out
}

// keepBody reads a 2xx answer's body, up to limit bytes, into out.
func keepBody(out *Outcome, resp *http.Response, limit int64) {
	out.ContentType = resp.Header.Get("Content-Type")
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		out.BodyErr = fmt.Errorf("forward: reading the agent's answer: %w", err)
	case int64(len(body)) > limit:
		out.BodyErr = fmt.Errorf("%w: over %d bytes", ErrAnswerTooLarge, limit)
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	default:
		out.Body = body
	}
	out.Answer = body[:min(len(body), maxAnswer)]
}

func classify(status int, final []int) Outcome {
	o := Outcome{Status: status, Kind: Retry}
	switch {
	case status >= 200 && status < 300:
		o.Kind = Delivered
	case slices.Contains(finalStatuses, status), slices.Contains(final, status):
		o.Kind = Rejected
	case slices.Contains(faultStatuses, status):
		o.Kind = Fault
	}
	// Any other answer may succeed later: 408, 409, 425 and 429 say "not now", and a 4xx nobody
	// declared final is not trusted to mean "never" (the event would be lost on a guess).
	return o
}

func (f *Forwarder) newRequest(ctx context.Context, r Request) (*http.Request, error) {
	if r.URL == "" {
		return nil, fmt.Errorf("%w: no URL", ErrBadRequest)
	}
	key := r.IdempotencyKey
	if key == "" {
		key = r.RunID
	}
	var wh *signer
	if r.SigningSecret != "" {
		if key == "" {
			return nil, fmt.Errorf("%w: signing needs an idempotency key or a run id for webhook-id", ErrBadRequest)
		}
		var err error
		if wh, err = f.signers.get(r.SigningSecret); err != nil {
			return nil, fmt.Errorf("%w: signing secret: %v", ErrBadRequest, err)
		}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	oneShot(req, r.Body)

	h := req.Header
	for name, values := range r.Header {
		if len(values) == 0 || dropped(name) {
			continue
		}
		h[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
	}
	h.Set("User-Agent", "replyonce-gateway")
	for name, value := range r.StaticHeaders {
		if IsReservedHeader(name) {
			continue
		}
		h.Set(name, value)
	}

	setNonEmpty(h, "Content-Type", r.ContentType)
	setNonEmpty(h, HeaderSource, r.Source)
	setNonEmpty(h, HeaderEventID, r.EventID)
	setNonEmpty(h, HeaderScope, r.Scope)
	setNonEmpty(h, HeaderRunID, r.RunID)
	h[HeaderDelivery] = []string{strconv.Itoa(r.Delivery)}
	h[HeaderFencingToken] = []string{strconv.FormatUint(r.FencingToken, 10)}
	if !r.ContextAt.IsZero() {
		h[HeaderContextAt] = []string{r.ContextAt.UTC().Format(ContextAtFormat)}
	}
	setNonEmpty(h, HeaderIdempotencyKey, key)
	setNonEmpty(h, HeaderNotice, r.Notice)
	if r.CoverCount > 0 {
		h[HeaderCovers] = []string{FormatCovers(r.CoverCount, r.Covers)}
	}

	if wh != nil {
		ts := f.now()
		h[HeaderWebhookID] = []string{key}
		h[HeaderWebhookTimestamp] = []string{strconv.FormatInt(ts.Unix(), 10)}
		h[HeaderWebhookSignature] = []string{wh.sign(key, ts, r.Body)}
	}
	return req, nil
}

// oneShot gives req a body net/http cannot rewind. With a rewindable body (GetBody, or none at all)
// the transport treats a POST carrying Idempotency-Key as safe to replay, and sends it again on the
// next pooled connection whenever the agent closes one without answering: an agent that reads the
// request and crashes would receive the same delivery, token and all, once per idle connection. One
// forward must be one request on the wire; a lost answer is a failed attempt, which the caller
// retries as a new delivery. (A request that found no connection to go out on is still tried on
// another: the agent has not seen it.) An empty body goes out chunked (a
// zero-length chunk) rather than with Content-Length: 0, which net/http sends only for a body it may
// rewind.
func oneShot(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = nil
}

func setNonEmpty(h http.Header, name, value string) {
	if value != "" {
		h[name] = []string{value}
	}
}

// IsReservedHeader reports whether name (any case) is owned by Forward: Content-Type, Content-Length,
// Host, Idempotency-Key, and every Replyonce-*, Webhook-* and Svix-* header. Forward ignores such
// names in StaticHeaders and in the copied provider headers, so that an agent is never handed a run
// id or a signature the gateway did not produce; configuration should reject them up front.
func IsReservedHeader(name string) bool {
	return reserved(http.CanonicalHeaderKey(name))
}

func reserved(canonical string) bool {
	switch canonical {
	case "Content-Type", "Content-Length", "Host", HeaderIdempotencyKey:
		return true
	}
	return strings.HasPrefix(canonical, "Replyonce-") ||
		strings.HasPrefix(canonical, "Webhook-") ||
		strings.HasPrefix(canonical, "Svix-")
}

// dropped is the second fence behind the caller's allow-list: a provider's signature would be
// meaningless to the agent and, worse, tempt it to verify the wrong scheme; credentials and
// hop-by-hop headers belong to the hop they arrived on.
func dropped(name string) bool {
	c := http.CanonicalHeaderKey(name)
	if reserved(c) {
		return true
	}
	switch c {
	case "Authorization", "Cookie", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Proxy-Connection", "Expect",
		// A provider's trace context is not ours to hand on: with tracing
		// on, the agent gets the gateway's own traceparent instead.
		"Traceparent", "Tracestate", "Baggage":
		return true
	}
	lower := strings.ToLower(c)
	return strings.Contains(lower, "signature") || strings.Contains(lower, "hmac")
}

// parseRetryAfter reads delta-seconds or an HTTP-date. ok is false for
// anything else (no advice); 0 seconds or a moment already past is advice
// to retry now.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false // delay-seconds is digits only
		}
		if secs > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
