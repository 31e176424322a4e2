package ledgerapi

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// This file holds the JSON shapes of the API. Field names are snake_case,
// durations are integer milliseconds, times are RFC 3339 with nanoseconds
// in UTC, and fencing tokens are JSON numbers (they stay far below 2^53).

// BeginRequest is the body of POST /v1/runs.
type BeginRequest struct {
	Scope      string    `json:"scope"`
	RunID      string    `json:"run_id,omitempty"`
	Mode       string    `json:"mode,omitempty"`
	ContextAt  time.Time `json:"context_at,omitzero"`
	LeaseTTLMs int64     `json:"lease_ttl_ms,omitempty"`
}

// RunJSON is a run as the API returns it.
type RunJSON struct {
	Scope     string    `json:"scope"`
	RunID     string    `json:"run_id"`
	Mode      string    `json:"mode,omitempty"`
	Token     uint64    `json:"token"`
	Delivery  int       `json:"delivery,omitempty"`
	ContextAt time.Time `json:"context_at,omitzero"`
	CanWrite  bool      `json:"can_write"`
	Reason    string    `json:"reason,omitempty"`
}

// RunRequest names a run: the body of heartbeat, end and cancel.
type RunRequest struct {
	Scope  string `json:"scope"`
	RunID  string `json:"run_id"`
	Token  uint64 `json:"token,omitempty"`  // heartbeat; end (fences it on that delivery)
	Reason string `json:"reason,omitempty"` // end
}

// HeartbeatJSON answers a heartbeat.
type HeartbeatJSON struct {
	Alive bool `json:"alive"`
}

// RunStateJSON answers end and cancel.
type RunStateJSON struct {
	Scope string `json:"scope"`
	RunID string `json:"run_id"`
	State string `json:"state"` // ended | cancelled
}

// ClaimRequest is the body of POST /v1/claims.
type ClaimRequest struct {
	Scope         string          `json:"scope"`
	Intent        string          `json:"intent"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	RunID         string          `json:"run_id,omitempty"`
	Token         uint64          `json:"token,omitempty"`
	Summary       string          `json:"summary,omitempty"`
	Conflict      string          `json:"conflict,omitempty"`
	Ack           bool            `json:"ack,omitempty"`
	PendingTTLMs  int64           `json:"pending_ttl_ms,omitempty"`
	Redeliverable bool            `json:"redeliverable,omitempty"`
	MaxAttempts   int             `json:"max_attempts,omitempty"`
}

// ResultJSON is a ledger result: what a claim, a settle or a once came to.
type ResultJSON struct {
	Status     string          `json:"status"`
	Reason     string          `json:"reason,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	Error      string          `json:"error,omitempty"`
	LateSettle bool            `json:"late_settle,omitempty"`
	Entry      *EntryJSON      `json:"entry,omitempty"`
	Conflicts  []EntryJSON     `json:"conflicts,omitempty"`
}

// ClaimJSON answers POST /v1/claims. When Status is "claimed" the caller
// owns attempt Attempt of EntryID and must settle it before Deadline.
// Otherwise the other fields are those of ResultJSON.
type ClaimJSON struct {
	Status         string          `json:"status"`
	Reason         string          `json:"reason,omitempty"`
	Scope          string          `json:"scope"`
	EntryID        string          `json:"entry_id,omitempty"`
	Attempt        int             `json:"attempt,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	FencingToken   uint64          `json:"fencing_token,omitempty"`
	Deadline       time.Time       `json:"deadline,omitzero"`
	Value          json.RawMessage `json:"value,omitempty"`
	Error          string          `json:"error,omitempty"`
	Entry          *EntryJSON      `json:"entry,omitempty"`
	Conflicts      []EntryJSON     `json:"conflicts,omitempty"`
}

// SettleRequest is the body of POST /v1/claims/settle.
type SettleRequest struct {
	Scope   string          `json:"scope"`
	EntryID string          `json:"entry_id"`
	Attempt int             `json:"attempt"`
	Outcome string          `json:"outcome"`
	Value   json.RawMessage `json:"value,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// KeyRequest names an effect by its key: the body of POST /v1/check.
type KeyRequest struct {
	Scope   string          `json:"scope"`
	Intent  string          `json:"intent"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// CheckJSON answers POST /v1/check.
type CheckJSON struct {
	Done   bool       `json:"done"`
	Status string     `json:"status,omitempty"`
	Entry  *EntryJSON `json:"entry,omitempty"`
}

// EntriesJSON answers history and ambiguous.
type EntriesJSON struct {
	Scope   string      `json:"scope,omitempty"`
	Entries []EntryJSON `json:"entries"`
	// Next, on a page of history, continues with older entries (pass it
	// as before); empty on the last page.
	Next string `json:"next,omitempty"`
}

// ResolveRequest is the body of POST /v1/entries/resolve. Name the entry
// either by Scope and EntryID (as listed by /v1/ambiguous) or by its key
// (Scope, Intent, Payload).
type ResolveRequest struct {
	Scope   string          `json:"scope"`
	EntryID string          `json:"entry_id,omitempty"`
	Intent  string          `json:"intent,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Outcome string          `json:"outcome"`
	// By is "operator" (the default) or "reconciler". A reconciler names
	// the entry by EntryID and the Attempt it found ambiguous, and is
	// refused not_ambiguous when the entry has moved on.
	By      string `json:"by,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Who names the operator resolving by EntryID; the entry records
	// "operator:<who>" as resolved_by.
	Who string `json:"who,omitempty"`
}

// Who resolved an entry, as ResolveRequest.By names it.
const (
	ResolvedByOperator   = "operator"
	ResolvedByReconciler = "reconciler"
)

// EntryOnlyJSON answers a resolve.
type EntryOnlyJSON struct {
	Entry EntryJSON `json:"entry"`
}

// EntryJSON is one effect entry.
type EntryJSON struct {
	ID             string          `json:"id"`
	Scope          string          `json:"scope"`
	Intent         string          `json:"intent"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Summary        string          `json:"summary,omitempty"`
	State          string          `json:"state"`
	Attempt        int             `json:"attempt"`
	Failures       int             `json:"failures,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	RunID          string          `json:"run_id,omitempty"`
	Token          uint64          `json:"token,omitempty"`
	Delivery       int             `json:"delivery,omitempty"`
	ClaimedAt      time.Time       `json:"claimed_at,omitzero"`
	PendingTTLMs   int64           `json:"pending_ttl_ms,omitempty"`
	Deadline       time.Time       `json:"deadline,omitzero"`
	Redeliverable  bool            `json:"redeliverable,omitempty"`
	SettledAt      time.Time       `json:"settled_at,omitzero"`
	LandedSeq      uint64          `json:"landed_seq,omitempty"`
	Value          json.RawMessage `json:"value,omitempty"`
	Error          string          `json:"error,omitempty"`
	Abandoned      bool            `json:"abandoned,omitempty"`
	LateSettle     bool            `json:"late_settle,omitempty"`
	ResolvedBy     string          `json:"resolved_by,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// ErrorJSON is the body of every non-2xx answer.
type ErrorJSON struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a stable machine code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func ms(d time.Duration) int64     { return d.Milliseconds() }
func fromMs(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// utc keeps zero times zero and puts the others in UTC.
func utc(t time.Time) time.Time { return t.UTC() }

func textOf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func errFromText(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// EntryToJSON is e in the API's JSON shape, for tools that print entries
// they got from a Client or a *ledger.Ledger.
func EntryToJSON(e ledger.Entry) EntryJSON { return entryToJSON(e) }

func entryToJSON(e ledger.Entry) EntryJSON {
	return EntryJSON{
		ID: e.ID, Scope: e.Scope, Intent: e.Intent, Payload: e.Payload, Summary: e.Summary,
		State: string(e.State), Attempt: e.Attempt, Failures: e.Failures, MaxAttempts: e.MaxAttempts,
		RunID: e.RunID, Token: e.Token, Delivery: e.Delivery, ClaimedAt: utc(e.ClaimedAt),
		PendingTTLMs: ms(e.PendingTTL), Deadline: utc(e.Deadline()), Redeliverable: e.Redeliverable,
		SettledAt: utc(e.SettledAt), LandedSeq: e.LandedSeq, Value: e.Value, Error: e.Error,
		Abandoned: e.Abandoned, LateSettle: e.LateSettle, ResolvedBy: e.ResolvedBy, IdempotencyKey: e.IdempotencyKey(),
	}
}

func entryFromJSON(j EntryJSON) ledger.Entry {
	return ledger.Entry{
		ID: j.ID, Scope: j.Scope, Intent: j.Intent, Payload: j.Payload, Summary: j.Summary,
		State: ledger.State(j.State), Attempt: j.Attempt, Failures: j.Failures, MaxAttempts: j.MaxAttempts,
		RunID: j.RunID, Token: j.Token, Delivery: j.Delivery, ClaimedAt: j.ClaimedAt,
		PendingTTL: fromMs(j.PendingTTLMs), Redeliverable: j.Redeliverable, SettledAt: j.SettledAt,
		LandedSeq: j.LandedSeq, Value: j.Value, Error: j.Error, Abandoned: j.Abandoned,
		LateSettle: j.LateSettle, ResolvedBy: j.ResolvedBy,
	}
}

func entriesToJSON(es []ledger.Entry) []EntryJSON {
	out := make([]EntryJSON, 0, len(es))
	for _, e := range es {
		out = append(out, entryToJSON(e))
	}
	return out
}

func entriesFromJSON(js []EntryJSON) []ledger.Entry {
	out := make([]ledger.Entry, 0, len(js))
	for _, j := range js {
		out = append(out, entryFromJSON(j))
	}
	return out
}

func entryPtrToJSON(e *ledger.Entry) *EntryJSON {
	if e == nil {
		return nil
	}
	j := entryToJSON(*e)
	return &j
}

func entryPtrFromJSON(j *EntryJSON) *ledger.Entry {
	if j == nil {
		return nil
	}
	e := entryFromJSON(*j)
	return &e
}

func resultToJSON(r ledger.Result) ResultJSON {
	out := ResultJSON{Status: string(r.Status), Reason: string(r.Reason), Value: r.Value, Error: textOf(r.Err),
		LateSettle: r.LateSettle, Entry: entryPtrToJSON(r.Entry)}
	if out.Error == "" && r.Entry != nil && (r.Status == ledger.StatusFailed || r.Status == ledger.StatusAmbiguous) {
		out.Error = r.Entry.Error
	}
	for _, c := range r.Conflicts {
		out.Conflicts = append(out.Conflicts, entryToJSON(c))
	}
	return out
}

func resultFromJSON(j ResultJSON) ledger.Result {
	r := ledger.Result{Status: ledger.Status(j.Status), Reason: ledger.Reason(j.Reason), Value: j.Value,
		Err: errFromText(j.Error), LateSettle: j.LateSettle, Entry: entryPtrFromJSON(j.Entry)}
	for _, c := range j.Conflicts {
		r.Conflicts = append(r.Conflicts, entryFromJSON(c))
	}
	return r
}

func claimToJSON(c ledger.Claim) ClaimJSON {
	r := resultToJSON(c.Result)
	return ClaimJSON{Status: r.Status, Reason: r.Reason, Scope: c.Scope, EntryID: c.EntryID, Attempt: c.Attempt,
		IdempotencyKey: c.IdempotencyKey, FencingToken: c.FencingToken, Deadline: utc(c.Deadline),
		Value: r.Value, Error: r.Error, Entry: r.Entry, Conflicts: r.Conflicts}
}

func claimFromJSON(j ClaimJSON) ledger.Claim {
	r := resultFromJSON(ResultJSON{Status: j.Status, Reason: j.Reason, Value: j.Value, Error: j.Error, Entry: j.Entry, Conflicts: j.Conflicts})
	return ledger.Claim{Result: r, Scope: j.Scope, EntryID: j.EntryID, Attempt: j.Attempt,
		IdempotencyKey: j.IdempotencyKey, FencingToken: j.FencingToken, Deadline: j.Deadline}
}

func runToJSON(r *ledger.Run) RunJSON {
	return RunJSON{Scope: r.Scope, RunID: r.ID, Mode: string(r.Mode), Token: r.Token, Delivery: r.Delivery,
		ContextAt: utc(r.ContextAt), CanWrite: r.CanWrite, Reason: string(r.Reason)}
}
