package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Status is what a claim or a Once call came to. Ledger outcomes are always
// values; only store failures and invalid input are errors.
type Status string

// Statuses.
const (
	StatusClaimed   Status = "claimed"   // two-phase API: the caller now owns the attempt and must settle it
	StatusExecuted  Status = "executed"  // the effect ran in this call
	StatusReplayed  Status = "replayed"  // it had already run; Value holds what it returned then
	StatusInFlight  Status = "in_flight" // another attempt is pending right now
	StatusAmbiguous Status = "ambiguous" // it may or may not have happened; reconcile or resolve
	StatusFailed    Status = "failed"    // known not to have happened
	StatusRefused   Status = "refused"   // this caller may not write; see Reason
)

// Reason says why a claim was refused.
type Reason string

// Refusal reasons.
const (
	ReasonSuperseded          Reason = "superseded"
	ReasonRunCancelled        Reason = "run_cancelled"
	ReasonRunEnded            Reason = "run_ended"
	ReasonBusy                Reason = "busy"
	ReasonConversationChanged Reason = "conversation_changed"
	ReasonExhausted           Reason = "exhausted"
)

// State is where an effect entry stands.
type State string

// Entry states.
const (
	StatePending   State = "pending"
	StateCommitted State = "committed"
	StateFailed    State = "failed"
	StateAmbiguous State = "ambiguous"
)

// Mode says how runs on one scope fence each other.
type Mode string

// Run modes.
const (
	// ModeSupersede: the run with the newest contextAt owns the scope; runs
	// whose contextAt falls in the same millisecond are peers.
	ModeSupersede Mode = "supersede"
	// ModeExclusive: one lease holder at a time; another run takes over
	// only after the lease expires.
	ModeExclusive Mode = "exclusive"
	// ModeIndependent: runs are fenced only by their own later deliveries.
	ModeIndependent Mode = "independent"
)

// ConflictMode says which other writes on the scope make a run's view stale.
type ConflictMode string

// Conflict modes.
const (
	ConflictAny        ConflictMode = "any"
	ConflictSameIntent ConflictMode = "same-intent"
	ConflictNone       ConflictMode = "none"
)

// Outcome is what an operator or reconciler found about an effect.
type Outcome string

// Outcomes.
const (
	OutcomeCommitted  Outcome = "committed"
	OutcomeNotApplied Outcome = "not_applied"
	OutcomeUnknown    Outcome = "unknown"
)

// Entry is one effect in a scope's ledger.
type Entry struct {
	ID            string          `json:"id"`
	Scope         string          `json:"scope"`
	Intent        string          `json:"intent"`
	Payload       json.RawMessage `json:"payload"`
	Summary       string          `json:"summary,omitempty"`
	State         State           `json:"state"`
	Attempt       int             `json:"attempt"`
	Failures      int             `json:"failures,omitempty"`
	MaxAttempts   int             `json:"maxAttempts,omitempty"`
	RunID         string          `json:"runId,omitempty"`
	Token         uint64          `json:"token,omitempty"`
	Delivery      int             `json:"delivery,omitempty"`
	ClaimedAt     time.Time       `json:"claimedAt"`
	PendingTTL    time.Duration   `json:"pendingTtl"`
	Redeliverable bool            `json:"redeliverable,omitempty"`
	SettledAt     time.Time       `json:"settledAt,omitzero"`
	LandedSeq     uint64          `json:"landedSeq,omitempty"`
	Value         json.RawMessage `json:"value,omitempty"`
	Error         string          `json:"error,omitempty"`
	Abandoned     bool            `json:"abandoned,omitempty"`
	LateSettle    bool            `json:"lateSettle,omitempty"`
	ResolvedBy    string          `json:"resolvedBy,omitempty"`
}

// Deadline is when a pending attempt reads as abandoned.
func (e *Entry) Deadline() time.Time { return e.ClaimedAt.Add(e.PendingTTL) }

// ShownState is the state an operator is shown, the same on every console
// page and in the CLI: see ShownState.
func (e *Entry) ShownState(now time.Time) (state State, abandoned bool) {
	return ShownState(e.State, e.Abandoned, e.Redeliverable, e.Deadline(), now)
}

// ShownState is the state an entry is shown with: a pending attempt past
// its deadline that will not be redelivered reads as ambiguous, as the
// ledger treats it, and abandoned says an ambiguous entry was never
// settled within its pending TTL (rather than settled as unknown).
func ShownState(state State, abandoned, redeliverable bool, deadline, now time.Time) (State, bool) {
	if state == StatePending && !redeliverable && !deadline.IsZero() && !now.Before(deadline) {
		return StateAmbiguous, true
	}
	return state, abandoned && state == StateAmbiguous
}

// IdempotencyKey is the entry's key for providers that accept one.
func (e *Entry) IdempotencyKey() string { return idempotencyKeyFor(e.ID) }

// Result is the outcome of Once, Claim or a settle.
type Result struct {
	Status Status
	Reason Reason // set when Status is refused
	// Value is the effect's stored result (executed, replayed).
	Value json.RawMessage
	// Err is the effect's own error (failed, ambiguous after running).
	Err error
	// Entry is the ledger entry the result is about, when there is one.
	Entry *Entry
	// Conflicts lists the other writes that made the scope change under the
	// run (conversation_changed).
	Conflicts []Entry
	// LateSettle is set when a settle arrived after its claim was treated as
	// abandoned.
	LateSettle bool
}

// OK reports whether the effect is known to have happened (executed or replayed).
func (r Result) OK() bool { return r.Status == StatusExecuted || r.Status == StatusReplayed }

// Call is what an effect learns about its attempt.
type Call struct {
	Key            Key
	EntryID        string
	Attempt        int
	IdempotencyKey string
	FencingToken   uint64
	Deadline       time.Time
}

// Effect performs a side effect once. Its value is stored as JSON and
// replayed to later callers. Return an error wrapped with NotApplied when
// the effect certainly did not happen; any other error is ambiguous.
type Effect func(ctx context.Context, call Call) (any, error)

// ErrorClass is how an effect's error is recorded.
type ErrorClass int

// Error classes.
const (
	ClassAmbiguous ErrorClass = iota
	ClassNotApplied
)

// ErrNotApplied marks an effect error as "definitely did not happen".
var ErrNotApplied = errors.New("not applied")

// NotApplied wraps err so the default classifier records the attempt as
// failed (safe to retry) instead of ambiguous.
func NotApplied(err error) error {
	if err == nil {
		return ErrNotApplied
	}
	return &notAppliedError{err: err}
}

type notAppliedError struct{ err error }

func (e *notAppliedError) Error() string   { return "not applied: " + e.err.Error() }
func (e *notAppliedError) Unwrap() []error { return []error{e.err, ErrNotApplied} }
func defaultClassify(err error) ErrorClass {
	if errors.Is(err, ErrNotApplied) {
		return ClassNotApplied
	}
	return ClassAmbiguous
}

// Reconciler looks up whether an ambiguous effect happened. It runs outside
// any store transaction or lock.
type Reconciler func(ctx context.Context, e Entry) (Outcome, error)

// Event is what the ledger tells its observer after each decision.
type Event struct {
	Type       string // claimed, executed, replayed, in_flight, refused, failed, ambiguous, committed, late_settle, resolved, reconciled, escalation, escalation_dismissed
	Scope      string
	EntryID    string
	Intent     string
	RunID      string
	Reason     Reason
	LateSettle bool
	// EscalationID names the escalation an "escalation" event opened (or
	// an "escalation_dismissed" event closed).
	EscalationID string
}

// ReservedPrefix starts the scopes kept for the ledger's and the gateway's
// own records; compared without regard to case.
const ReservedPrefix = "replyonce:"

// ReservedScope reports whether scope is one of the reserved ones, which
// no run, claim or queued event may name: whatever a webhook's scope
// template or an agent resolves to, it must never land on a record the
// gateway keeps for itself.
func ReservedScope(scope string) bool {
	return len(scope) >= len(ReservedPrefix) && strings.EqualFold(scope[:len(ReservedPrefix)], ReservedPrefix)
}

// checkScope refuses an empty or reserved scope for a new run, claim or
// event. Reads and the handling of what is already stored do not check,
// so data an earlier release let into a reserved scope can still be seen
// and finished.
func checkScope(scope string) error {
	if scope == "" {
		return fmt.Errorf("%w: scope is empty", ErrInvalid)
	}
	if ReservedScope(scope) {
		return fmt.Errorf("%w: scope %q: scopes starting with %q are reserved for the gateway", ErrInvalid, clipScope(scope), ReservedPrefix)
	}
	return nil
}

// clipScope shortens a scope for an error message.
func clipScope(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "..."
}

// Errors for invalid input. They change nothing in the ledger.
var (
	ErrInvalid        = errors.New("ledger: invalid request")
	ErrUnknownRun     = errors.New("ledger: unknown run")
	ErrUnknownEntry   = errors.New("ledger: unknown entry")
	ErrAlreadySettled = errors.New("ledger: attempt already settled")
	ErrNotAmbiguous   = errors.New("ledger: entry is not ambiguous")
)

// ErrCorrupt wraps every error about a stored document the ledger cannot
// read (bad JSON, an unknown format, a null entry or run). It is a store
// fault, not bad input: the document is left as it is for an operator.
var ErrCorrupt = errors.New("ledger: stored document is corrupt")

// MaxContextAhead is how far past the ledger's clock a run's contextAt may
// lie. A later one (a microsecond timestamp read as milliseconds, say) is
// refused ErrInvalid: taken as given it would outrank every run on the
// scope for years, or not encode at all.
const MaxContextAhead = 24 * time.Hour

// Options configure a Ledger. Zero values take the defaults. The YAML tags
// are the keys of the gateway's ledger section; the functions are a
// program's to set.
type Options struct {
	PendingTTL  time.Duration          `yaml:"pending_ttl"`  // default 15 min
	MaxAttempts int                    `yaml:"max_attempts"` // default 3
	LeaseTTL    time.Duration          `yaml:"lease_ttl"`    // default 60 s
	Retention   time.Duration          `yaml:"retention"`    // default 7 days
	Classify    func(error) ErrorClass `yaml:"-"`
	Reconcile   Reconciler             `yaml:"-"`
	Observe     func(Event)            `yaml:"-"`
	Clock       func() time.Time       `yaml:"-"`
	// Caps are the loop breaker: per intent, how many effects a scope may
	// start within a window (see Cap). A claim past its cap is refused
	// rate_limited and opens an escalation. No intent is capped by
	// default.
	Caps map[string]Cap `yaml:"caps"`
	// WaitInterval is how often a claim made with Wait polls (default 50 ms).
	WaitInterval time.Duration `yaml:"-"`
	// ReplayCache is how many committed entries the Ledger remembers, so
	// that a claim for one of them (a redelivered event, a retried write)
	// is answered "replayed" without a store round trip. Zero means
	// DefaultReplayCache; a negative value turns it off. However many
	// entries that is, it holds at most 64 MiB of their values and
	// payloads (large values turn it over sooner). It assumes every
	// process sharing the store uses the same Retention.
	ReplayCache int `yaml:"replay_cache"`
}

// Defaults.
const (
	DefaultPendingTTL  = 15 * time.Minute
	DefaultMaxAttempts = 3
	DefaultLeaseTTL    = 60 * time.Second
	DefaultRetention   = 7 * 24 * time.Hour
)

func (o Options) withDefaults() Options {
	if o.PendingTTL <= 0 {
		o.PendingTTL = DefaultPendingTTL
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Classify == nil {
		o.Classify = defaultClassify
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.WaitInterval <= 0 {
		o.WaitInterval = 50 * time.Millisecond
	}
	if o.Caps != nil {
		// The ledger reads its caps from many goroutines: a copy keeps a
		// caller's later change to its map from racing them.
		caps := make(map[string]Cap, len(o.Caps))
		for intent, c := range o.Caps {
			caps[intent] = c
		}
		o.Caps = caps
	}
	return o
}
