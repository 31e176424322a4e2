package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// IntentDeliver is the ledger intent under which the gateway records that
// an event was handed to its agent.
const IntentDeliver = "deliver"

// deliverAttempts is effectively unlimited: providers retry for days, and a
// failed forward is known not to have been acted on by a fenced agent.
const deliverAttempts = 1 << 30

// Options wire a Gateway. Ledger, Forwarder and Sources are required.
type Options struct {
	Sources   []*Source
	Ledger    *ledger.Ledger
	Forwarder *forward.Forwarder
	Logger    *zap.Logger
	Metrics   *Metrics
	Clock     func() time.Time
	// StoreTimeout bounds each ledger call on the request path, so a
	// stalled store is a prompt 503 rather than silence until the
	// provider's own timeout (default DefaultStoreTimeout).
	StoreTimeout time.Duration
	// Handoff is the process's dispatcher, for queued sources. Without one
	// queued events wait in the store for a dispatcher elsewhere.
	Handoff Handoff
	// TracerProvider, when set, traces every webhook (see trace.go). Nil:
	// no tracing, at no cost. Give the Forwarder the same provider
	// (forward.Forwarder.WithTracer) so the agent joins the trace.
	TracerProvider trace.TracerProvider
	// Alerts is told of each request refused for its signature, and raises
	// the verification alert when they jump (alerts.verification_failures
	// in a minute). Nil: no alerts.
	Alerts *alerts.Notifier
}

// DefaultStoreTimeout is Options.StoreTimeout's default: well inside the
// 10 s or so that most providers wait for an answer.
const DefaultStoreTimeout = 2 * time.Second

// Gateway is the public webhook handler.
type Gateway struct {
	sources map[string]*Source
	ledger  *ledger.Ledger
	fwd     *forward.Forwarder
	log     *zap.Logger
	// refusals rate-limits the log lines of 401s and 413s per source.
	refusals *logLimiter
	// rejected keeps the last requests refused before the ledger, per
	// source, in memory only (rejected.go).
	rejected *rejectedLog
	metrics  *Metrics
	now      func() time.Time
	handoff  Handoff
	alerts   *alerts.Notifier
	tracer   trace.Tracer // nil: tracing off
	echo     *echo.Echo
	// storeTimeout bounds each ledger call; settleMargin is what a claim
	// must keep after its forward for the settle to land before it
	// expires.
	storeTimeout, settleMargin time.Duration
	// active counts handlers still running, so shutdown can wait for
	// forwards whose connections were already cut.
	active sync.WaitGroup
	// stop is cancelled by CancelForwards; settleBy (Unix ns, 0: none)
	// then bounds every settle still to come.
	stop     context.Context
	stopNow  context.CancelFunc
	settleBy atomic.Int64
}

// Wait blocks until every request handler has returned.
func (g *Gateway) Wait() { g.active.Wait() }

// CancelForwards ends the gateway's work for shutdown: forwards still
// running are cancelled and claims not yet forwarded are not, each
// settled as not applied (so the provider's next retry, to any instance,
// redelivers the event) by settleBy at the latest, and answered 503.
// Requests that arrive later are answered the same way.
func (g *Gateway) CancelForwards(settleBy time.Time) {
	g.settleBy.Store(settleBy.UnixNano())
	g.stopNow()
}

// New builds the gateway's handler.
func New(o Options) (*Gateway, error) {
	if o.Ledger == nil || o.Forwarder == nil {
		return nil, errors.New("ingress: a ledger and a forwarder are required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.StoreTimeout == 0 {
		o.StoreTimeout = DefaultStoreTimeout
	}
	if o.StoreTimeout < 0 {
		return nil, errors.New("ingress: the store timeout must be positive")
	}
	g := &Gateway{sources: map[string]*Source{}, ledger: o.Ledger, fwd: o.Forwarder, log: o.Logger, refusals: newLogLimiter(), rejected: newRejectedLog(), metrics: o.Metrics, now: o.Clock, handoff: o.Handoff, alerts: o.Alerts,
		storeTimeout: o.StoreTimeout, settleMargin: o.StoreTimeout + clockSlack, tracer: tracerOf(o.TracerProvider)}
	g.stop, g.stopNow = context.WithCancel(context.Background())
	for _, s := range o.Sources {
		if _, dup := g.sources[s.Name]; dup {
			return nil, fmt.Errorf("ingress: source %q configured twice", s.Name)
		}
		g.sources[s.Name] = s
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = g.errorHandler
	e.Any("/hooks/:source", g.handle)
	g.echo = e
	return g, nil
}

// ServeHTTP makes the gateway an http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.echo.ServeHTTP(w, r) }

// answer is the 2xx body.
type answer struct {
	Status  string `json:"status"`
	EventID string `json:"event_id,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// AgentAnswer says why the agent's answer was not passed on, when the
	// source lets the agent answer (too_large, unread).
	AgentAnswer string `json:"agent_answer,omitempty"`
}

// delivery is what one request turned into, for the log line.
type delivery struct {
	source         *Source
	eventID, scope string
	runID          string
	deliveryN      int
	status         int
	decision       decision
	reason         string
	start          time.Time
	// collect, when set, receives the 2xx answer instead of the response (batch elements).
	collect *answer
	note    string // a handshake's note for the operator
	warn    bool   // something the operator must see, though the answer is a 2xx
	// digest and recordBy: the content this event holds (replay.go), and
	// when it must have been recorded; zero when the source does not
	// refuse replays or the event was recorded before.
	digest   string
	recordBy time.Time
	// body is the request's body once read, for the rejected list.
	body []byte
}

func (g *Gateway) handle(c echo.Context) error {
	g.active.Add(1)
	defer g.active.Done()
	d := &delivery{start: time.Now()}
	span := g.startWebhook(c)
	err := g.serve(c, d)
	if err != nil {
		g.errorHandler(err, c)
	}
	status := d.status
	var ie *Error
	if err != nil {
		status = http.StatusServiceUnavailable
		if errors.As(err, &ie) {
			status = ie.Status
			if d.reason == "" {
				d.reason = ie.Reason
			}
		}
	}
	var reason string
	if ie != nil {
		reason = ie.Reason
	}
	endWebhook(span, c, d, status, reason)
	if err != nil {
		why := d.reason
		if why == "" {
			why = reason
		}
		g.keepRejected(c.Request(), d, status, why)
	}
	name := c.Param("source")
	if d.source != nil {
		g.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
	}
	fields := []zap.Field{
		// An unknown source's name is the caller's text: clipped.
		zap.String("source", clip(name)), zap.Int("status", status), zap.String("decision", d.decision.String()),
		zap.Duration("latency", time.Since(d.start)),
	}
	if d.eventID != "" {
		fields = append(fields, zap.String("event_id", d.eventID), zap.String("scope", d.scope),
			zap.String("run_id", d.runID), zap.Int("delivery", d.deliveryN))
	}
	if d.reason != "" {
		fields = append(fields, zap.String("reason", d.reason))
	}
	if d.note != "" {
		fields = append(fields, zap.String("note", d.note))
	}
	if err != nil && (ie == nil || ie.Cause != nil) {
		fields = append(fields, zap.Error(err))
	}
	if !answerSent(c) {
		// The log says what the provider heard: nothing.
		fields[1] = zap.Int("status", 0)
		fields = append(fields, zap.Int("unsent_status", status))
	}
	level := logLevel(d.decision, status, d.reason, d.warn)
	if level == zapcore.InfoLevel && (status == http.StatusUnauthorized || status == http.StatusRequestEntityTooLarge || decisions[d.decision].throttled) {
		// Lines anyone can cause without a secret are throttled.
		key := name + " " + strconv.Itoa(status)
		switch {
		case d.source == nil:
			// Unknown sources share one budget: a key per made-up name
			// would be no bound at all.
			key = "unknown source"
		case d.decision == decIgnored:
			// A bot talking to itself can send many: throttled per rule.
			key = ignoreLogKey(name, d.reason)
		case d.decision == decHandshake:
			key = name + " handshake"
		}
		ok, suppressed := g.refusals.allow(key, g.now())
		if !ok {
			return nil
		}
		if suppressed > 0 {
			fields = append(fields, zap.Int("suppressed", suppressed))
		}
	}
	g.log.Log(level, "webhook", fields...)
	return nil
}

// answerSent reports whether the answer left for the provider: its
// connection was still open and the answer could be flushed to it.
func answerSent(c echo.Context) bool {
	if c.Request().Context().Err() != nil {
		return false
	}
	return http.NewResponseController(c.Response().Writer).Flush() == nil
}

func (g *Gateway) serve(c echo.Context, d *delivery) error {
	req := c.Request()
	src := g.sources[c.Param("source")]
	if src == nil {
		d.decision = decUnknownSource
		return &Error{Status: http.StatusNotFound, Message: "unknown source", Reason: "unknown_source"}
	}
	d.source = src
	// HEAD too: Trello and Mandrill check a new callback URL with one.
	getHandshake := (req.Method == http.MethodGet || req.Method == http.MethodHead) && src.info.HandshakeByGET
	if req.Method != http.MethodPost && !getHandshake {
		return methodNotAllowed(c, src, d)
	}
	body, err := readBody(c, int64(src.cfg.MaxBody))
	if err != nil {
		d.decision = decBody
		return err
	}
	d.body = body
	now := g.now()
	sreq := &signatures.Request{Method: req.Method, URL: publicURL(src, req), Header: req.Header, Body: body}
	if resp, handled, err := signatures.Handshake(src.Provider, src.cfg.Signature, sreq, now); handled || err != nil {
		d.decision = decHandshake
		if err != nil {
			return g.unauthorized(src, d, err)
		}
		return writeHandshake(c, d, resp)
	}
	if req.Method != http.MethodPost {
		return methodNotAllowed(c, src, d)
	}
	_, vspan := g.startStep(req.Context(), SpanVerify, d)
	err = src.scheme.Verify(sreq, now)
	endStep(vspan, err, "signature verification failed", "")
	if err != nil {
		d.decision = decUnauthorized
		return g.unauthorized(src, d, err)
	}
	if src.split != "" {
		return g.serveBatch(c, d, src, body, now)
	}
	in := &extract.Input{Header: req.Header, Query: req.URL.Query(), Body: body, ContentType: req.Header.Get("Content-Type")}
	// Ignore rules come after verification (an unsigned request is still a
	// 401) and before anything is written.
	if label, ok := src.ignoredBy(req, body, in.ContentType); ok {
		if id, ok := src.eventID.Resolve(in); ok && checkID("event id", src.eventIDText, id) == nil {
			d.eventID = id
		}
		return g.ignored(c, d, src, label)
	}
	eventID, ok := src.eventID.Resolve(in)
	if !ok {
		d.decision = decNoEventID
		return &Error{Status: http.StatusBadRequest, Reason: "missing_event_id",
			Message: fmt.Sprintf("event id rule %s did not resolve for this request", src.eventIDText)}
	}
	if err := checkID("event id", src.eventIDText, eventID); err != nil {
		d.decision = decBadEventID
		return err
	}
	d.eventID = eventID
	d.runID = src.Name + ":" + eventID
	d.scope = d.runID
	if src.scope != nil {
		if s, ok := src.scope.Resolve(in); ok {
			if err := checkID("scope", src.scope.String(), s); err != nil {
				d.decision = decBadScope
				return err
			}
			d.scope = s
		}
	}
	contextAt, err := g.contextAt(src, in, now, d)
	if err != nil {
		d.decision = decBadContextAt
		return err
	}
	if echo, err := g.echoOf(req.Context(), src, in, d.scope); err != nil {
		d.decision = decStoreError
		return err
	} else if echo {
		d.runID = ""
		return g.ignored(c, d, src, ruleEcho)
	}
	if src.replays {
		if done, err := g.holdContent(c, d, src, sreq); done {
			return err
		}
	}
	if src.cfg.Forward.Queue.Mode == dispatch.ModeQueued {
		return g.enqueue(c, d, src, body, contextAt, now)
	}
	return g.claimAndForward(c, d, src, body, contextAt)
}

func methodNotAllowed(c echo.Context, src *Source, d *delivery) error {
	allow := "POST"
	if src.info.HandshakeByGET {
		allow = "GET, POST"
	}
	c.Response().Header().Set("Allow", allow)
	d.decision = decMethod
	return &Error{Status: http.StatusMethodNotAllowed, Message: "method not allowed", Reason: "method"}
}

func (g *Gateway) unauthorized(src *Source, d *delivery, err error) error {
	if errors.Is(err, signatures.ErrUnavailable) {
		// The provider's certificate or key could not be fetched: the request may be authentic,
		// so the provider must retry rather than be told it is forged.
		d.reason = "signature_key_unavailable"
		return &Error{Status: http.StatusServiceUnavailable, Message: "signature cannot be checked now", Reason: "key_unavailable",
			RetryAfter: src.cfg.RetryAfter, Cause: err}
	}
	if errors.Is(err, signatures.ErrUnsupportedAlgorithm) {
		// The request names an algorithm this gateway does not implement: not a forgery to
		// hide, but a gateway to upgrade, so the answer says so too.
		g.metrics.verifyFailures.WithLabelValues(src.Name, "unsupported_algorithm").Inc()
		g.alerts.VerificationFailed(src.Name, "unsupported_algorithm")
		d.reason = "signature_unsupported_algorithm"
		return &Error{Status: http.StatusUnauthorized, Message: "signature algorithm not supported", Reason: "unsupported_algorithm", Cause: err}
	}
	reason := "invalid"
	switch {
	case errors.Is(err, signatures.ErrMissingHeader):
		reason = "missing"
	case errors.Is(err, signatures.ErrMalformed):
		reason = "malformed"
	case errors.Is(err, signatures.ErrStale):
		reason = "stale"
	case errors.Is(err, signatures.ErrNoMatch):
		reason = "no_match"
	}
	g.metrics.verifyFailures.WithLabelValues(src.Name, reason).Inc()
	g.alerts.VerificationFailed(src.Name, reason)
	d.reason = "signature_" + reason
	// The reason goes to the log only: a prober learns nothing from the body.
	return &Error{Status: http.StatusUnauthorized, Message: "signature verification failed", Reason: "unauthorized", Cause: err}
}

func writeHandshake(c echo.Context, d *delivery, resp *signatures.HandshakeResponse) error {
	for k, vs := range resp.Header {
		for _, v := range vs {
			c.Response().Header().Add(k, v)
		}
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	d.status, d.note = status, resp.Note
	ctype := resp.ContentType
	if ctype == "" {
		ctype = "text/plain; charset=utf-8"
	}
	return c.Blob(status, ctype, resp.Body)
}

// readBody reads at most limit bytes; a body past it, whatever its
// Content-Length said, is a 413.
func readBody(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	r := http.MaxBytesReader(c.Response().Writer, req.Body, limit)
	size := req.ContentLength
	if size < 0 || size > limit {
		size = 512
	}
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, tooLarge(limit)
			}
			return nil, &Error{Status: http.StatusBadRequest, Message: "could not read the request body", Reason: "body_read", Cause: err}
		}
	}
}

func tooLarge(limit int64) error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Reason: "too_large",
		Message: fmt.Sprintf("body exceeds this source's limit of %d bytes", limit)}
}

// publicURL is the URL the provider called, as URL-signing schemes and
// query-string handshakes need it: the configured public URL (the gateway
// may sit behind TLS termination) with the request's query appended.
func publicURL(src *Source, req *http.Request) string {
	base := src.cfg.Signature.URL
	if base == "" {
		base = "http://" + req.Host + req.URL.Path
	}
	// The query the provider actually sent is what it signed, including
	// any parameters already in the registered URL.
	base, _, _ = strings.Cut(base, "?")
	if req.URL.RawQuery != "" {
		return base + "?" + req.URL.RawQuery
	}
	return base
}

func (g *Gateway) contextAt(src *Source, in *extract.Input, now time.Time, d *delivery) (time.Time, error) {
	if src.contextAt == nil {
		return now, nil
	}
	raw, ok := src.contextAt.Resolve(in)
	if ok {
		if t, ok := parseTimestamp(raw); ok {
			return t, checkContextAt(src, raw, t, now)
		}
	}
	g.log.Warn("context_at did not resolve to a timestamp; using receipt time",
		zap.String("source", src.Name), zap.String("event_id", d.eventID), zap.String("value", raw))
	return now, nil
}

// MaxContextAhead is how far past its receipt an event's context_at may
// lie. A later one is a misread timestamp (microseconds taken for
// milliseconds, say): in supersede mode it would own its scope for years.
const MaxContextAhead = time.Hour

// checkContextAt refuses a context_at before 1970 or more than
// MaxContextAhead after receipt, with a 400 that names the rule.
func checkContextAt(src *Source, raw string, t, now time.Time) error {
	bad := func(why string) error {
		return &Error{Status: http.StatusBadRequest, Reason: "invalid_context_at",
			Message: fmt.Sprintf("context_at rule %s gave %q, %s", src.contextAt.String(), clip(raw), why)}
	}
	switch {
	case t.Before(time.Unix(0, 0)):
		return bad("which is before 1970")
	case t.Sub(now) > MaxContextAhead:
		return bad(fmt.Sprintf("which is more than %s after the event was received", MaxContextAhead))
	}
	return nil
}

// farFuture stands for a numeric timestamp too large for any calendar:
// checkContextAt refuses it as too far ahead.
var farFuture = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// parseTimestamp reads Unix seconds, Unix milliseconds or RFC 3339.
func parseTimestamp(s string) (time.Time, bool) {
	if n, err := strconv.ParseFloat(s, 64); err == nil && n > 0 && !math.IsInf(n, 0) {
		if n < 1e11 {
			return time.UnixMilli(int64(n * 1000)).UTC(), true
		}
		if n >= float64(farFuture.UnixMilli()) {
			return farFuture, true
		}
		return time.UnixMilli(int64(n)).UTC(), true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), true
	}
	return time.Time{}, false
}

// MaxIDBytes bounds an extracted event id or scope. Ids that long are
// already far past any provider's; longer ones fail in stores' indexes
// (Postgres refuses index rows of about 8 KB) and would answer 503
// forever.
const MaxIDBytes = 1024

// checkID refuses an extracted event id or scope that no store can hold
// faithfully, with a 400 naming the rule: invalid UTF-8 (ids differing
// only in such bytes would collapse into one), control characters
// (NUL included; they also cannot travel in a forwarded header), more
// than MaxIDBytes, or a scope the ledger reserves (ledger.ReservedScope).
func checkID(what, rule, v string) error {
	bad := func(why string) error {
		return &Error{Status: http.StatusBadRequest, Reason: "invalid_" + strings.ReplaceAll(what, " ", "_"),
			Message: fmt.Sprintf("%s from rule %s %s", what, rule, why)}
	}
	if len(v) > MaxIDBytes {
		return bad(fmt.Sprintf("is %d bytes, over the limit of %d", len(v), MaxIDBytes))
	}
	if !utf8.ValidString(v) {
		return bad("is not valid UTF-8")
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return bad(fmt.Sprintf("contains the control character %U at byte %d", []rune(v[i:])[0], i))
	}
	if what == "scope" && ledger.ReservedScope(v) {
		// The gateway's own records live there: a webhook naming one is
		// refused before anything is written.
		return bad(fmt.Sprintf("starts with %q, which is reserved for the gateway", ledger.ReservedPrefix))
	}
	return nil
}

// clip shortens a provider's value for an error message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// clockSlack is added to the settle margin for clocks that differ a
// little between gateway instances.
const clockSlack = time.Second

// pendingTTL is the deliver claim's TTL: the forward, the settle's
// margin, and one store timeout for the claim's own answer to arrive
// (the TTL counts from when the claim was made, not from when the gateway
// heard of it). With the default store timeout it is the forward timeout
// plus 5 s.
func (g *Gateway) pendingTTL(src *Source) time.Duration {
	return src.cfg.Forward.Timeout + g.settleMargin + g.storeTimeout
}

// storeCtx bounds one ledger call: detached from the provider's
// connection (a provider that hangs up mid-claim must not leave the claim
// made and unanswered), limited to the store timeout, and during shutdown
// to the settle deadline.
func (g *Gateway) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.storeTimeout)
	if by := g.settleBy.Load(); by != 0 {
		ctx, cancel2 := context.WithDeadline(ctx, time.Unix(0, by))
		return ctx, func() { cancel2(); cancel() }
	}
	return ctx, cancel
}

func (g *Gateway) claimAndForward(c echo.Context, d *delivery, src *Source, body []byte, contextAt time.Time) error {
	ctx := c.Request().Context()
	receivedAt := g.now()
	key := ledger.Key{Scope: d.scope, Intent: IntentDeliver, Payload: map[string]string{"source": src.Name, "eventId": d.eventID}}
	cctx, cancel := g.storeCtx(ctx)
	rctx, rcancel, err := g.recordCtx(cctx, d, src)
	if err != nil {
		cancel()
		return err
	}
	rctx, span := g.startStep(rctx, SpanClaim, d)
	run, claim, err := g.ledger.BeginClaim(rctx,
		ledger.RunOptions{RunID: d.runID, Mode: src.cfg.Runs, ContextAt: contextAt},
		ledger.ClaimRequest{Key: key, Conflict: ledger.ConflictNone, PendingTTL: g.pendingTTL(src),
			Redeliverable: true, MaxAttempts: deliverAttempts})
	endStep(span, err, "store error", string(claim.Status))
	rcancel()
	cancel()
	if err == nil {
		g.confirmContent(ctx, d, src)
	}
	if err != nil {
		g.metrics.storeErrors.WithLabelValues(src.Name).Inc()
		d.decision = decStoreError
		return &Error{Status: http.StatusServiceUnavailable, Message: "ledger unavailable", Reason: "store", RetryAfter: src.cfg.RetryAfter, Cause: err}
	}
	switch claim.Status {
	case ledger.StatusClaimed:
	case ledger.StatusReplayed:
		g.metrics.duplicates.WithLabelValues(src.Name).Inc()
		d.decision = decDuplicate
		var v forward.Record
		_ = json.Unmarshal(claim.Value, &v)
		// The log line names the delivery that reached the agent.
		d.deliveryN = v.Delivery
		if d.deliveryN == 0 && claim.Entry != nil {
			d.deliveryN = claim.Entry.Delivery
		}
		if answerFromAgent(c, d, src, v.Answer) {
			return nil
		}
		return g.ok(c, d, answer{Status: "duplicate", EventID: d.eventID, RunID: d.runID, Outcome: v.Outcome, AgentAnswer: notKept(v.Answer)})
	case ledger.StatusInFlight:
		g.metrics.inFlight.WithLabelValues(src.Name).Inc()
		d.decision = decInFlight
		wait := min(claim.Deadline.Sub(g.now()), src.cfg.RetryAfter)
		return &Error{Status: http.StatusServiceUnavailable, Message: "this event is being delivered by another request", Reason: "in_flight", RetryAfter: wait}
	case ledger.StatusRefused:
		if claim.Reason == ledger.ReasonRunEnded || claim.Reason == ledger.ReasonRunCancelled {
			// The agent (or an operator) finished this event's run: it is
			// done with the event, and nothing may be delivered under it
			// again. Retrying could never help, so the provider hears 200.
			g.metrics.duplicates.WithLabelValues(src.Name).Inc()
			d.decision = decDuplicate
			return g.ok(c, d, answer{Status: "duplicate", EventID: d.eventID, RunID: d.runID, Outcome: string(claim.Reason)})
		}
		d.decision = claimDecision(claim.Status)
		return &Error{Status: http.StatusServiceUnavailable, Message: "event cannot be delivered now", Reason: string(claim.Status) + " " + string(claim.Reason), RetryAfter: src.cfg.RetryAfter}
	default:
		// Not reachable with a redeliverable, unlimited claim; never a 2xx.
		d.decision = claimDecision(claim.Status)
		return &Error{Status: http.StatusServiceUnavailable, Message: "event cannot be delivered now", Reason: string(claim.Status) + " " + string(claim.Reason), RetryAfter: src.cfg.RetryAfter}
	}
	d.deliveryN = run.Delivery
	// The forward must end, and its settle land, before the claim expires:
	// otherwise another delivery of the event may claim and forward it
	// meanwhile. A claim that came back from a slow store with less left
	// than that is given up unforwarded.
	if left := claim.Deadline.Sub(g.now()); left <= src.cfg.Forward.Timeout+g.settleMargin {
		d.decision = decClaimExpiring
		err := fmt.Errorf("the claim came back with %s left, not more than the forward timeout %s plus %s to settle", left, src.cfg.Forward.Timeout, g.settleMargin)
		return g.giveUp(ctx, d, src, claim, err, "the ledger answered too slowly to deliver the event safely")
	}
	if g.stop.Err() != nil {
		d.decision = decShuttingDown
		return g.giveUp(ctx, d, src, claim, errors.New("the gateway is shutting down"), "the gateway is shutting down")
	}
	// The forward outlives the provider's connection (the ledger must learn
	// how it ended even if nobody waits), but not the gateway's shutdown.
	fctx, cancelForward := context.WithCancel(context.WithoutCancel(ctx))
	stopForward := context.AfterFunc(g.stop, cancelForward)
	out := g.fwd.Forward(fctx, forward.Request{
		URL: src.cfg.Forward.URL, Timeout: src.cfg.Forward.Timeout, Body: body, ContentType: c.Request().Header.Get("Content-Type"),
		Header: pickHeaders(c.Request().Header, src.passHeaders), StaticHeaders: src.cfg.Forward.Headers,
		Source: src.Name, EventID: d.eventID, Scope: d.scope, RunID: d.runID, Delivery: run.Delivery,
		FencingToken: run.Token, ContextAt: run.ContextAt, IdempotencyKey: claim.IdempotencyKey, SigningSecret: src.cfg.Forward.SigningSecret,
		KeepBody: src.respondLimit(),
	})
	stopForward()
	cancelForward()
	d.decision = forwardDecision(out.Kind)
	g.metrics.forwards.WithLabelValues(src.Name, d.decision.String()).Inc()
	g.metrics.forwardLatency.WithLabelValues(src.Name).Observe(out.Latency.Seconds())
	if out.Err != nil {
		d.reason = out.Err.Error()
	}
	sctx, cancel := g.storeCtx(ctx)
	sctx, span = g.startStep(sctx, SpanSettle, d)
	var settleErr error
	kept := keptAnswer(src, out)
	rec := g.inlineRecord(c, d, src, body, run, receivedAt, out)
	switch out.Kind {
	case forward.Delivered, forward.Rejected:
		_, settleErr = g.ledger.SettleInline(sctx, claim.Ref(), ledger.OutcomeCommitted, forward.Record{Outcome: out.Kind.String(), AgentStatus: out.Status, Delivery: run.Delivery, Answer: kept}, nil, rec)
	default:
		_, settleErr = g.ledger.SettleInline(sctx, claim.Ref(), ledger.OutcomeNotApplied, nil, out.Err, rec)
	}
	endStep(span, settleErr, "store error", "")
	cancel()
	if settleErr != nil {
		// The agent may have the event, but the ledger does not know: the
		// provider's retry will redeliver once the claim's TTL passes.
		g.metrics.storeErrors.WithLabelValues(src.Name).Inc()
		return &Error{Status: http.StatusServiceUnavailable, Message: "ledger unavailable", Reason: "store", RetryAfter: src.cfg.RetryAfter, Cause: settleErr}
	}
	switch out.Kind {
	case forward.Delivered:
		if answerFromAgent(c, d, src, kept) {
			return nil
		}
		return g.ok(c, d, answer{Status: "delivered", EventID: d.eventID, RunID: d.runID, AgentAnswer: notKept(kept)})
	case forward.Rejected:
		return g.ok(c, d, answer{Status: "rejected", EventID: d.eventID, RunID: d.runID})
	}
	if g.stop.Err() != nil {
		d.decision = decShuttingDown
	}
	// The agent's own Retry-After is honoured up to the source's bound: a
	// provider told to wait a day (or until 2099) may give up on the event.
	wait := src.cfg.RetryAfter
	if out.RetryAfterGiven {
		wait = min(out.RetryAfter, src.cfg.RetryAfter)
	}
	return &Error{Status: http.StatusServiceUnavailable, Message: "the agent could not take the event now", Reason: "agent_unavailable", RetryAfter: wait, Cause: out.Err}
}

// giveUp settles a claim that will not be forwarded as not applied, so
// the provider's next retry redelivers at once, and answers 503.
func (g *Gateway) giveUp(ctx context.Context, d *delivery, src *Source, claim ledger.Claim, why error, msg string) error {
	sctx, cancel := g.storeCtx(ctx)
	sctx, span := g.startStep(sctx, SpanSettle, d)
	_, err := g.ledger.Settle(sctx, claim.Ref(), ledger.OutcomeNotApplied, nil, why)
	endStep(span, err, "store error", "")
	cancel()
	if err != nil {
		g.metrics.storeErrors.WithLabelValues(src.Name).Inc()
		why = fmt.Errorf("%w; settling it as not applied failed: %w", why, err)
	}
	return &Error{Status: http.StatusServiceUnavailable, Message: msg, Reason: d.decision.String(), RetryAfter: src.cfg.RetryAfter, Cause: why}
}

func (g *Gateway) ok(c echo.Context, d *delivery, a answer) error {
	d.status = http.StatusOK
	if d.collect != nil {
		*d.collect = a
		return nil
	}
	return writeJSON(c, http.StatusOK, a)
}

// pickHeaders copies the allow-listed informative headers.
func pickHeaders(h http.Header, names []string) http.Header {
	out := make(http.Header, len(names))
	for _, n := range names {
		if v, ok := h[n]; ok {
			out[n] = v
		}
	}
	return out
}
