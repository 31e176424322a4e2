package ledgerapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// Errors a Client returns for answers that are not ledger decisions. API
// refusals are *Error values, which also match the ledger's own sentinel
// errors (ledger.ErrUnknownRun, ledger.ErrAlreadySettled, ...), so code
// written against the in-process ledger handles them unchanged.
var (
	// ErrUnauthorized matches a 401: the token is missing or wrong.
	ErrUnauthorized = errors.New("ledgerapi: unauthorized")
	// ErrUnavailable matches a 503 and a failure to reach the API at all:
	// the ledger did not decide anything; retrying later is safe.
	ErrUnavailable = errors.New("ledgerapi: ledger unavailable")
)

// Error is a non-2xx answer from the API.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("ledgerapi: %d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap returns the sentinel error the code stands for, if any.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeInvalidRequest, CodeTooLarge, CodeMediaType:
		return ledger.ErrInvalid
	case CodeUnauthorized:
		return ErrUnauthorized
	case CodeUnknownRun:
		return ledger.ErrUnknownRun
	case CodeUnknownClaim:
		return ledger.ErrUnknownEntry
	case CodeAlreadySettled:
		return ledger.ErrAlreadySettled
	case CodeNotAmbiguous:
		return ledger.ErrNotAmbiguous
	case CodeUnknownEscalation:
		return ledger.ErrUnknownEscalation
	case CodeStoreUnavailable:
		return ErrUnavailable
	}
	return nil
}

// Client speaks the ledger API. Its methods have the shapes of
// *ledger.Ledger's, so code moves between the two with few changes; the
// Ledger interface captures what they share. A Client is safe for
// concurrent use. It never retries on its own: a claim whose answer was
// lost reads as in_flight on the next try, which the caller must judge.
type Client struct {
	base      string
	token     string
	hc        *http.Client
	now       func() time.Time
	classify  func(error) ledger.ErrorClass
	reconcile ledger.Reconciler
	poll      time.Duration
}

var _ ledger.Attempts = (*Client)(nil)

// ClientOption tunes a Client.
type ClientOption func(*Client)

// WithClock sets the clock that times an effect's deadline and a Wait
// (default time.Now).
func WithClock(now func() time.Time) ClientOption { return func(c *Client) { c.now = now } }

// WithClassifier decides whether an effect's error means "not applied"
// (safe to retry) or ambiguous. The default counts only errors wrapping
// ledger.ErrNotApplied as not applied, as the in-process ledger does.
func WithClassifier(f func(error) ledger.ErrorClass) ClientOption {
	return func(c *Client) { c.classify = f }
}

// WithReconciler sets the reconciler a Once asks about an ambiguous
// effect, here in the agent's process, as ledger.Options.Reconcile does in
// process; its answer is recorded on the ledger, fenced on the attempt.
func WithReconciler(r ledger.Reconciler) ClientOption { return func(c *Client) { c.reconcile = r } }

// WithWaitInterval sets how often a Once with Wait polls an in-flight
// effect (default 50 ms).
func WithWaitInterval(d time.Duration) ClientOption { return func(c *Client) { c.poll = d } }

// NewClient returns a client for the API at baseURL (for example
// "http://127.0.0.1:8081"), sending token as a bearer token when it is not
// empty. A nil httpClient uses one with a 30 s timeout.
func NewClient(baseURL, token string, httpClient *http.Client, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ledgerapi: base URL %q must be an http:// or https:// URL", baseURL)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: httpClient, now: time.Now,
		classify: defaultClassify, poll: 50 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func defaultClassify(err error) ledger.ErrorClass {
	if errors.Is(err, ledger.ErrNotApplied) {
		return ledger.ClassNotApplied
	}
	return ledger.ClassAmbiguous
}

// do sends one request and decodes a 200 into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("ledgerapi: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("ledgerapi: %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("ledgerapi: %s %s: %w", method, path, ctx.Err())
		}
		return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%w: %s %s: read answer: %w", ErrUnavailable, method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorJSON
		if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
			// Not our API's error shape: a proxy or a wrong URL.
			e.Error = ErrorDetail{Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(data))}
			if resp.StatusCode >= 500 {
				e.Error.Code = CodeStoreUnavailable
			}
		}
		return &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("ledgerapi: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// rawJSON renders a payload or a value the way the in-process ledger reads
// it: json.RawMessage and []byte are JSON already, anything else is
// marshalled.
func rawJSON(v any) (json.RawMessage, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return t, nil
	case []byte:
		return json.RawMessage(t), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON-encodable: %v", ledger.ErrInvalid, err)
	}
	return b, nil
}

// Run is a remote run: the same fields as *ledger.Run, and the same
// methods, each a call to the API.
type Run struct {
	c         *Client
	Scope     string
	ID        string
	Mode      ledger.Mode
	Token     uint64
	Delivery  int
	ContextAt time.Time
	CanWrite  bool
	Reason    ledger.Reason
}

// Begin starts a run on scope, or resumes it as a new delivery when
// opts.RunID names an existing one.
func (c *Client) Begin(ctx context.Context, scope string, opts ledger.RunOptions) (*Run, error) {
	var out RunJSON
	err := c.do(ctx, http.MethodPost, "/v1/runs", BeginRequest{Scope: scope, RunID: opts.RunID, Mode: string(opts.Mode),
		ContextAt: opts.ContextAt, LeaseTTLMs: ms(opts.LeaseTTL)}, &out)
	if err != nil {
		return nil, err
	}
	return &Run{c: c, Scope: out.Scope, ID: out.RunID, Mode: ledger.Mode(out.Mode), Token: out.Token, Delivery: out.Delivery,
		ContextAt: out.ContextAt, CanWrite: out.CanWrite, Reason: ledger.Reason(out.Reason)}, nil
}

// RunRef is a handle on a run that began elsewhere, typically the gateway
// delivery whose Replyonce-Scope, Replyonce-Run-Id and
// Replyonce-Fencing-Token headers name it. It makes no call.
func (c *Client) RunRef(scope, runID string, token uint64) *Run {
	return &Run{c: c, Scope: scope, ID: runID, Token: token, CanWrite: true}
}

// Claim asks for the right to perform an effect (first phase).
func (c *Client) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	payload, err := rawJSON(req.Key.Payload)
	if err != nil {
		return ledger.Claim{}, err
	}
	var out ClaimJSON
	err = c.do(ctx, http.MethodPost, "/v1/claims", ClaimRequest{Scope: req.Key.Scope, Intent: req.Key.Intent, Payload: payload,
		RunID: req.RunID, Token: req.Token, Summary: req.Summary, Conflict: string(req.Conflict), Ack: req.Ack,
		PendingTTLMs: ms(req.PendingTTL), Redeliverable: req.Redeliverable, MaxAttempts: req.MaxAttempts}, &out)
	if err != nil {
		return ledger.Claim{}, err
	}
	return claimFromJSON(out), nil
}

// Settle records the outcome of a claimed attempt (second phase).
func (c *Client) Settle(ctx context.Context, ref ledger.ClaimRef, outcome ledger.Outcome, value any, effectErr error) (ledger.Result, error) {
	req := SettleRequest{Scope: ref.Scope, EntryID: ref.EntryID, Attempt: ref.Attempt, Outcome: string(outcome), Error: textOf(effectErr)}
	if outcome == ledger.OutcomeCommitted {
		raw, err := rawJSON(value)
		if err != nil {
			return ledger.Result{}, err
		}
		req.Value = raw
	}
	var out ResultJSON
	if err := c.do(ctx, http.MethodPost, "/v1/claims/settle", req, &out); err != nil {
		return ledger.Result{}, err
	}
	res := resultFromJSON(out)
	if effectErr != nil {
		res.Err = effectErr
	}
	return res, nil
}

// Once performs effect at most once for key, with no run fencing. The
// effect runs here, between a remote claim and a remote settle.
func (c *Client) Once(ctx context.Context, key ledger.Key, effect ledger.Effect, opts ...ledger.OnceOptions) (ledger.Result, error) {
	var o ledger.OnceOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return c.once(ctx, claimRequest(key, "", 0, o), o.Wait, effect)
}

func claimRequest(key ledger.Key, runID string, token uint64, o ledger.OnceOptions) ledger.ClaimRequest {
	return ledger.ClaimRequest{Key: key, RunID: runID, Token: token, Summary: o.Summary, Conflict: o.Conflict, Ack: o.Ack,
		PendingTTL: o.PendingTTL, Redeliverable: o.Redeliverable}
}

func (c *Client) once(ctx context.Context, req ledger.ClaimRequest, wait time.Duration, effect ledger.Effect) (ledger.Result, error) {
	return ledger.RunEffect(ctx, c, req, effect, ledger.LoopOptions{Clock: c.now, Classify: c.classify,
		Reconcile: c.reconcile, Wait: wait, WaitInterval: c.poll})
}

// Reconciled records what a reconciler found about the ambiguous attempt
// ref names, fenced on that attempt as in process: an error matching
// ledger.ErrNotAmbiguous when the entry moved on meanwhile.
func (c *Client) Reconciled(ctx context.Context, ref ledger.ClaimRef, outcome ledger.Outcome) (ledger.Entry, error) {
	if ref.EntryID == "" || ref.Attempt < 1 {
		return ledger.Entry{}, fmt.Errorf("%w: a reconciled attempt needs its entry id and attempt", ledger.ErrInvalid)
	}
	return c.resolve(ctx, ResolveRequest{Scope: ref.Scope, EntryID: ref.EntryID, Attempt: ref.Attempt,
		By: ResolvedByReconciler, Outcome: string(outcome)})
}

// Check reports whether key's effect has already happened.
func (c *Client) Check(ctx context.Context, key ledger.Key) (ledger.CheckResult, error) {
	payload, err := rawJSON(key.Payload)
	if err != nil {
		return ledger.CheckResult{}, err
	}
	var out CheckJSON
	if err := c.do(ctx, http.MethodPost, "/v1/check", KeyRequest{Scope: key.Scope, Intent: key.Intent, Payload: payload}, &out); err != nil {
		return ledger.CheckResult{}, err
	}
	return ledger.CheckResult{Done: out.Done, Status: ledger.Status(out.Status), Entry: entryPtrFromJSON(out.Entry)}, nil
}

// History returns a scope's entries, oldest first.
func (c *Client) History(ctx context.Context, scope string) ([]ledger.Entry, error) {
	if scope == "" {
		return nil, fmt.Errorf("%w: scope is empty", ledger.ErrInvalid)
	}
	var out EntriesJSON
	if err := c.do(ctx, http.MethodGet, "/v1/scopes/"+url.PathEscape(scope)+"/history", nil, &out); err != nil {
		return nil, err
	}
	return entriesFromJSON(out.Entries), nil
}

// HistoryPage returns one page of a scope's history, newest first (see
// ledger.Views.HistoryPage).
func (c *Client) HistoryPage(ctx context.Context, q ledger.HistoryQuery) (ledger.HistoryPage, error) {
	if q.Scope == "" {
		return ledger.HistoryPage{}, fmt.Errorf("%w: scope is empty", ledger.ErrInvalid)
	}
	v := url.Values{}
	v.Set("limit", strconv.Itoa(cmp.Or(q.Limit, ledger.DefaultHistoryPage)))
	if q.Before != "" {
		v.Set("before", q.Before)
	}
	var out EntriesJSON
	if err := c.do(ctx, http.MethodGet, "/v1/scopes/"+url.PathEscape(q.Scope)+"/history?"+v.Encode(), nil, &out); err != nil {
		return ledger.HistoryPage{}, err
	}
	return ledger.HistoryPage{Entries: entriesFromJSON(out.Entries), Next: out.Next}, nil
}

// Heartbeat renews a run's lease by reference; false means stop.
func (c *Client) Heartbeat(ctx context.Context, scope, runID string, token uint64) (bool, error) {
	var out HeartbeatJSON
	if err := c.do(ctx, http.MethodPost, "/v1/runs/heartbeat", RunRequest{Scope: scope, RunID: runID, Token: token}, &out); err != nil {
		return false, err
	}
	return out.Alive, nil
}

// End finishes a run by reference.
func (c *Client) End(ctx context.Context, scope, runID, reason string) error {
	var out RunStateJSON
	return c.do(ctx, http.MethodPost, "/v1/runs/end", RunRequest{Scope: scope, RunID: runID, Reason: reason}, &out)
}

// Cancel stops a run: its later claims are refused run_cancelled.
func (c *Client) Cancel(ctx context.Context, scope, runID string) error {
	var out RunStateJSON
	return c.do(ctx, http.MethodPost, "/v1/runs/cancel", RunRequest{Scope: scope, RunID: runID}, &out)
}

// Ambiguous lists entries whose outcome is unknown, from up to limit
// scopes (0: the server's default of 100).
func (c *Client) Ambiguous(ctx context.Context, limit int) ([]ledger.Entry, error) {
	path := "/v1/ambiguous"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var out EntriesJSON
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return entriesFromJSON(out.Entries), nil
}

// Resolve records what an operator found about an ambiguous entry, named
// by its effect or by scope and entry id as Ambiguous lists them
// (ledger.Resolution says how); the server answers as Ledger.Resolve does.
func (c *Client) Resolve(ctx context.Context, r ledger.Resolution) (ledger.Entry, error) {
	payload, err := rawJSON(r.Payload)
	if err != nil {
		return ledger.Entry{}, err
	}
	return c.resolve(ctx, ResolveRequest{Scope: r.Scope, EntryID: r.EntryID, Intent: r.Intent, Payload: payload,
		Outcome: string(r.Outcome), Who: r.Who})
}

func (c *Client) resolve(ctx context.Context, req ResolveRequest) (ledger.Entry, error) {
	var out EntryOnlyJSON
	if err := c.do(ctx, http.MethodPost, "/v1/entries/resolve", req, &out); err != nil {
		return ledger.Entry{}, err
	}
	return entryFromJSON(out.Entry), nil
}

// Once performs a fenced effect at most once: refused when the run may no
// longer write or the scope changed under it.
func (r *Run) Once(ctx context.Context, intent string, payload any, effect ledger.Effect, opts ...ledger.OnceOptions) (ledger.Result, error) {
	var o ledger.OnceOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return r.c.once(ctx, r.claimRequest(intent, payload, o), o.Wait, effect)
}

// Claim is the first phase of Once for this run.
func (r *Run) Claim(ctx context.Context, intent string, payload any, o ledger.OnceOptions) (ledger.Claim, error) {
	return r.c.Claim(ctx, r.claimRequest(intent, payload, o))
}

func (r *Run) claimRequest(intent string, payload any, o ledger.OnceOptions) ledger.ClaimRequest {
	return claimRequest(ledger.Key{Scope: r.Scope, Intent: intent, Payload: payload}, r.ID, r.Token, o)
}

// Check reports whether this run's scope already has the effect done.
func (r *Run) Check(ctx context.Context, intent string, payload any) (ledger.CheckResult, error) {
	return r.c.Check(ctx, ledger.Key{Scope: r.Scope, Intent: intent, Payload: payload})
}

// Heartbeat renews the run's lease; false means the run may no longer
// write and should stop.
func (r *Run) Heartbeat(ctx context.Context) (bool, error) {
	return r.c.Heartbeat(ctx, r.Scope, r.ID, r.Token)
}

// End finishes the run; it can no longer claim. Like the in-process Run,
// it is fenced on this delivery's token: a stale delivery's End changes
// nothing.
func (r *Run) End(ctx context.Context, reason string) error {
	var out RunStateJSON
	return r.c.do(ctx, http.MethodPost, "/v1/runs/end", RunRequest{Scope: r.Scope, RunID: r.ID, Token: r.Token, Reason: reason}, &out)
}
