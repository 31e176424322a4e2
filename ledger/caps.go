package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// ReasonRateLimited refuses a claim that would exceed its intent's cap on
// the scope (Options.Caps): the loop breaker.
const ReasonRateLimited Reason = "rate_limited"

// Cap limits how many effects of one intent a scope may start within a
// sliding window. It is a circuit breaker for an agent that answers its own
// messages: three replies on one conversation in five minutes means
// something is wrong, and a person should look before a fourth goes out.
type Cap struct {
	// Max is how many effects of the intent the window may hold (at least 1).
	Max int `json:"max" yaml:"max"`
	// Window is how far back, on the ledger's clock, effects are counted.
	// It must not exceed the retention, which forgets settled effects.
	Window time.Duration `json:"window" yaml:"window"`
}

// Valid reports whether the cap limits anything: Max at least 1 and a
// positive Window. The ledger ignores a cap that is not valid; the
// gateway's configuration refuses one.
func (c Cap) Valid() bool { return c.Max >= 1 && c.Window > 0 }

// Escalation is the record a tripped cap leaves in the scope's document,
// for an operator: the intent, what the cap was, and the claims it refused.
// One escalation covers every refusal of its intent on the scope within one
// window of its opening, so a loop that keeps knocking raises one
// escalation, not one per knock.
type Escalation struct {
	// ID is unique within the scope.
	ID     string `json:"id"`
	Scope  string `json:"scope"`
	Intent string `json:"intent"`
	Reason Reason `json:"reason"`
	// Max and Window are the cap in force when it tripped; Count is how
	// many effects of the intent the window held then.
	Max    int           `json:"max"`
	Window time.Duration `json:"window"`
	Count  int           `json:"count"`
	// OpenedAt is the first refusal, LastAt the latest; Refused counts them.
	OpenedAt time.Time `json:"openedAt"`
	LastAt   time.Time `json:"lastAt"`
	Refused  int       `json:"refused"`
	// RunID and EntryID are the first refused claim's run (if any) and the
	// id of the effect it asked for; Summary is what it said it would do.
	RunID   string `json:"runId,omitempty"`
	EntryID string `json:"entryId"`
	Summary string `json:"summary,omitempty"`
	// DismissedAt and DismissedBy are set when an operator has dealt with it.
	DismissedAt time.Time `json:"dismissedAt,omitzero"`
	DismissedBy string    `json:"dismissedBy,omitempty"`
}

// Open reports whether no operator has dismissed the escalation yet.
func (e *Escalation) Open() bool { return e.DismissedAt.IsZero() }

// ErrUnknownEscalation is dismissing an escalation the scope does not have.
var ErrUnknownEscalation = errors.New("ledger: unknown escalation")

// capFor is the valid cap on intent, if any.
func capFor(o Options, intent string) (Cap, bool) {
	c, ok := o.Caps[intent]
	if !ok || !c.Valid() {
		return Cap{}, false
	}
	return c, true
}

// countInWindow counts the scope's effects of intent, other than except,
// that a cap weighs at now: every entry whose latest attempt was claimed
// within the window, except one known not to have happened (failed).
// Committed and pending attempts count, and so do ambiguous ones, which may
// have reached the customer. A replay is not a new effect and is never
// counted twice: an entry counts once, however often it is replayed.
func countInWindow(d *document, intent, except string, window time.Duration, now time.Time) int {
	since := now.Add(-window)
	n := 0
	for _, e := range d.Entries {
		if e.Intent != intent || e.ID == except || e.State == StateFailed {
			continue
		}
		if e.ClaimedAt.After(since) {
			n++
		}
	}
	return n
}

// capped is the loop breaker, decided in the claim's own transaction just
// before a new attempt would be written: nil when the claim may go on,
// otherwise a rate_limited refusal that records (or extends) the scope's
// escalation for the intent. A claim for an effect already counted (a new
// attempt of the same entry) is weighed against the others only.
func capped(d *document, in claimInput, r *runState, now time.Time, o Options) *decision {
	c, ok := capFor(o, in.key.intent)
	if !ok {
		return nil
	}
	n := countInWindow(d, in.key.intent, in.key.id, c.Window, now)
	if n < c.Max {
		return nil
	}
	esc, opened := d.escalate(in, r, c, n, now)
	if r != nil {
		r.LastActive = now
	}
	res := Result{Status: StatusRefused, Reason: ReasonRateLimited, Entry: d.Entries[in.key.id]}
	cp := *esc
	return &decision{result: res, changed: true, escalation: &cp, escalated: opened}
}

// escalate extends the intent's open escalation from within the last
// window, or opens a new one. opened says it is new.
func (d *document) escalate(in claimInput, r *runState, c Cap, count int, now time.Time) (*Escalation, bool) {
	since := now.Add(-c.Window)
	for i := len(d.Escalations) - 1; i >= 0; i-- {
		e := d.Escalations[i]
		if e.Intent == in.key.intent && e.Open() && e.OpenedAt.After(since) {
			e.Refused++
			e.LastAt = now
			e.Count = count
			return e, false
		}
	}
	e := &Escalation{
		ID:    in.key.intent + "@" + strconv.FormatInt(now.UnixNano(), 10),
		Scope: d.Scope, Intent: in.key.intent, Reason: ReasonRateLimited,
		Max: c.Max, Window: c.Window, Count: count,
		OpenedAt: now, LastAt: now, Refused: 1,
		EntryID: in.key.id, Summary: in.summary,
	}
	if r != nil {
		e.RunID = r.ID
	}
	d.Escalations = append(d.Escalations, e)
	return e, true
}

// pruneEscalations forgets escalations whose last refusal is older than
// the retention, dismissed or not: by then the loop is long over.
func (d *document) pruneEscalations(cutoff time.Time) {
	kept := d.Escalations[:0]
	for _, e := range d.Escalations {
		if !e.LastAt.Before(cutoff) {
			kept = append(kept, e)
		}
	}
	d.Escalations = kept
}

// Escalations lists the open escalations of up to limit scopes (default
// 100) that ask for review, oldest first. Escalations share the review
// index with ambiguous entries, so dismissing one clears the way.
func (vw Views) Escalations(ctx context.Context, limit int) ([]Escalation, error) {
	l := vw.l
	if limit <= 0 {
		limit = 100
	}
	scopes, err := l.store.ScopesToReview(ctx, l.now(), limit)
	if err != nil {
		return nil, err
	}
	var out []Escalation
	for _, s := range scopes {
		d, err := l.read(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, e := range d.Escalations {
			if e.Open() {
				out = append(out, *e)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].OpenedAt.Before(out[j].OpenedAt) })
	return out, nil
}

// ScopeEscalations lists every escalation the scope remembers, dismissed
// ones included, oldest first.
func (vw Views) ScopeEscalations(ctx context.Context, scope string) ([]Escalation, error) {
	l := vw.l
	d, err := l.read(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := make([]Escalation, 0, len(d.Escalations))
	for _, e := range d.Escalations {
		out = append(out, *e)
	}
	return out, nil
}

// DismissEscalation records that an operator (by) has dealt with the
// escalation: it leaves the open list, and the next refusal of its intent
// opens a new one. Dismissing does not lift the cap; only the window
// sliding past the counted effects does.
func (l *Ledger) DismissEscalation(ctx context.Context, scope, id, by string) (Escalation, error) {
	if scope == "" || id == "" {
		return Escalation{}, fmt.Errorf("%w: scope and escalation id are required", ErrInvalid)
	}
	if by == "" {
		by = "operator"
	}
	var out Escalation
	err := l.transact(ctx, scope, func(d *document, now time.Time) (bool, error) {
		for _, e := range d.Escalations {
			if e.ID != id {
				continue
			}
			if !e.Open() {
				out = *e
				return false, nil
			}
			e.DismissedAt, e.DismissedBy = now, by
			out = *e
			return true, nil
		}
		return false, fmt.Errorf("%w: no escalation %q on scope %q", ErrUnknownEscalation, id, scope)
	})
	if err != nil {
		return Escalation{}, err
	}
	l.observe(Event{Type: "escalation_dismissed", Scope: scope, Intent: out.Intent, EscalationID: out.ID})
	return out, nil
}
