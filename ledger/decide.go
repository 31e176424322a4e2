package ledger

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// This file holds the decision code: pure functions of (document, request,
// now, options). They mutate the decoded document they are given, which the
// caller then writes back if the decision says so. No I/O, no clock reads.

type claimInput struct {
	key           resolvedKey
	runID         string // empty for a plain Once with no run
	token         uint64
	summary       string
	conflict      ConflictMode
	ack           bool
	pendingTTL    time.Duration
	redeliverable bool
	maxAttempts   int
}

type decision struct {
	result         Result
	changed        bool // the document must be written back
	needsReconcile bool
	claimed        *Entry
	// escalation is the loop breaker's record when the cap refused the
	// claim; escalated says this refusal opened it.
	escalation *Escalation
	escalated  bool
}

// settledState answers step 1 of a claim: is the effect already done,
// happening, or of unknown outcome? It returns nil when a new attempt may be
// considered. An abandoned pending attempt turns ambiguous here, unless the
// claim that made it said abandonment is safe to redeliver.
func settledState(d *document, in claimInput, now time.Time, o Options) *decision {
	e := d.Entries[in.key.id]
	if e == nil {
		return nil
	}
	switch e.State {
	case StateCommitted:
		return &decision{result: Result{Status: StatusReplayed, Value: e.Value, Entry: e}}
	case StatePending:
		if now.Before(e.Deadline()) {
			return &decision{result: Result{Status: StatusInFlight, Entry: e}}
		}
		if e.Redeliverable {
			return nil
		}
		e.State = StateAmbiguous
		e.Abandoned = true
		e.SettledAt = now
		e.Error = "abandoned: never settled within its pending TTL"
		d.land(e, now)
		return &decision{result: Result{Status: StatusAmbiguous, Entry: e}, changed: true, needsReconcile: true}
	case StateAmbiguous:
		return &decision{result: Result{Status: StatusAmbiguous, Entry: e}, needsReconcile: true}
	case StateFailed:
		if e.Failures >= maxAttemptsFor(e, in, o) {
			return &decision{result: Result{Status: StatusRefused, Reason: ReasonExhausted, Entry: e}}
		}
	}
	return nil
}

func maxAttemptsFor(e *Entry, in claimInput, o Options) int {
	if in.maxAttempts > 0 {
		return in.maxAttempts
	}
	if e != nil && e.MaxAttempts > 0 {
		return e.MaxAttempts
	}
	return o.MaxAttempts
}

// writable answers step 2: may this delivery of this run write now? It
// renews an exclusive lease (or takes over an expired one) as a side effect,
// which is why it reports whether it changed the document.
func writable(d *document, r *runState, token uint64, now time.Time, o Options) (Reason, bool) {
	switch {
	case r.Cancelled:
		return ReasonRunCancelled, false
	case r.Ended:
		return ReasonRunEnded, false
	case token != r.Token:
		return ReasonSuperseded, false
	}
	switch r.Mode {
	case ModeSupersede:
		if newerRun(d, r) != nil {
			return ReasonSuperseded, false
		}
	case ModeExclusive:
		if r.LostLease {
			return ReasonSuperseded, false
		}
		if d.Holder != r.ID {
			if h := d.Runs[d.Holder]; h != nil && !h.Ended && !h.Cancelled && now.Before(h.LeaseUntil) {
				return ReasonBusy, false
			}
			if h := d.Runs[d.Holder]; h != nil {
				h.LostLease = true
			}
			d.Holder = r.ID
		}
		r.LeaseUntil = now.Add(leaseTTL(r, o))
		return "", true
	}
	return "", false
}

// leaseTTL is the run's own lease TTL, given when it began, or the ledger's.
func leaseTTL(r *runState, o Options) time.Duration {
	if r.LeaseTTL > 0 {
		return r.LeaseTTL
	}
	return o.LeaseTTL
}

// newerRun finds a supersede-mode run whose context is newer than r's by at
// least a millisecond and that still counts: it is live, or it wrote before
// it finished. Of several, the newest (then the least id) is named, so
// that the answer does not depend on the order a map is walked in.
func newerRun(d *document, r *runState) *runState {
	mine := r.ContextAt.UnixMilli()
	var best *runState
	for _, n := range d.Runs {
		if n.ID == r.ID || n.Mode != ModeSupersede {
			continue
		}
		if n.ContextAt.UnixMilli() <= mine {
			continue
		}
		if (n.Ended || n.Cancelled) && !n.Wrote {
			continue
		}
		if best == nil || n.ContextAt.UnixMilli() > best.ContextAt.UnixMilli() ||
			(n.ContextAt.UnixMilli() == best.ContextAt.UnixMilli() && n.ID < best.ID) {
			best = n
		}
	}
	return best
}

func ackID(e *Entry) string { return e.ID + "#" + strconv.Itoa(e.Attempt) }

func (r *runState) acked(e *Entry) bool {
	id := ackID(e)
	for _, a := range r.Acks {
		if a == id {
			return true
		}
	}
	return false
}

// conflicts answers step 3: which writes on the scope did this run not see?
// Another delivery's or run's pending write, or one that landed (committed
// or ambiguous) after the run's context, unless the run acknowledged it.
// The claiming delivery's own writes never conflict.
// A redeliverable pending claim past its deadline is no longer "pending":
// its worker is gone and its work will be redelivered, so it must not block
// the scope.
func conflicts(d *document, r *runState, in claimInput, now time.Time) []*Entry {
	if in.conflict == ConflictNone {
		return nil
	}
	var out []*Entry
	for _, e := range d.Entries {
		if e.ID == in.key.id {
			continue
		}
		if e.RunID == r.ID && e.Token == r.Token {
			continue
		}
		if in.conflict == ConflictSameIntent && e.Intent != in.key.intent {
			continue
		}
		pending := e.State == StatePending && (!e.Redeliverable || now.Before(e.Deadline()))
		unseen := pending ||
			((e.State == StateCommitted || e.State == StateAmbiguous) && e.LandedSeq > r.SeenSeq)
		if !unseen || r.acked(e) {
			continue
		}
		out = append(out, e)
	}
	// In history order, not the order a map is walked in.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ClaimedAt.Equal(out[j].ClaimedAt) {
			return out[i].ClaimedAt.Before(out[j].ClaimedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// decideClaim runs the whole claim order: already done, may this run
// write, is the intent's cap reached, has the scope changed, claim.
func decideClaim(d *document, in claimInput, now time.Time, o Options) (decision, error) {
	if dec := settledState(d, in, now, o); dec != nil {
		return *dec, nil
	}
	var r *runState
	changed := false
	if in.runID != "" {
		r = d.Runs[in.runID]
		if r == nil {
			return decision{}, fmt.Errorf("%w: run %q on scope %q", ErrUnknownRun, in.runID, d.Scope)
		}
		reason, leaseChanged := writable(d, r, in.token, now, o)
		changed = leaseChanged
		if reason != "" {
			return decision{result: Result{Status: StatusRefused, Reason: reason, Entry: d.Entries[in.key.id]}, changed: changed}, nil
		}
		// The loop breaker comes after the fence, so that a stale run
		// hears that it is stale rather than raising an escalation, and
		// before the conflict check, whose advice (re-read, try again)
		// would only lead to the same refusal.
		if dec := capped(d, in, r, now, o); dec != nil {
			dec.changed = dec.changed || changed
			return *dec, nil
		}
		found := conflicts(d, r, in, now)
		if len(found) > 0 {
			// The refusal itself is the acknowledgement: the caller is told
			// what changed, and the next attempt after it re-read goes on.
			res := Result{Status: StatusRefused, Reason: ReasonConversationChanged, Entry: d.Entries[in.key.id]}
			for _, e := range found {
				r.Acks = append(r.Acks, ackID(e))
				res.Conflicts = append(res.Conflicts, *e)
			}
			r.LastActive = now
			if !in.ack {
				return decision{result: res, changed: true}, nil
			}
		}
	}
	if r == nil {
		if dec := capped(d, in, nil, now, o); dec != nil {
			return *dec, nil
		}
	}
	e := claimEntry(d, in, r, now, o)
	return decision{result: Result{Status: StatusClaimed, Entry: e}, changed: true, claimed: e}, nil
}

// claimEntry is step 4: write a pending attempt.
func claimEntry(d *document, in claimInput, r *runState, now time.Time, o Options) *Entry {
	e := d.Entries[in.key.id]
	if e == nil {
		e = &Entry{ID: in.key.id, Scope: d.Scope, Intent: in.key.intent, Payload: in.key.payload}
		d.Entries[e.ID] = e
	}
	e.State = StatePending
	e.Attempt++
	e.ClaimedAt = now
	e.PendingTTL = in.pendingTTL
	if e.PendingTTL <= 0 {
		e.PendingTTL = o.PendingTTL
	}
	e.Redeliverable = in.redeliverable
	if in.maxAttempts > 0 {
		e.MaxAttempts = in.maxAttempts
	}
	if in.summary != "" {
		e.Summary = in.summary
	}
	e.SettledAt, e.LandedSeq, e.Value, e.Error = time.Time{}, 0, nil, ""
	e.Abandoned, e.LateSettle, e.ResolvedBy = false, false, ""
	e.RunID, e.Token, e.Delivery = "", 0, 0
	if r != nil {
		e.RunID, e.Token, e.Delivery = r.ID, r.Token, r.Delivery
		r.Wrote = true
		r.LastActive = now
	}
	return e
}

type beginInput struct {
	runID     string
	fresh     bool // the ledger made runID up: no run has it
	mode      Mode
	contextAt time.Time // zero: now
	leaseTTL  time.Duration
	// lands are the landing records the decision read (spillView.lands):
	// a context older than the document's landings needs one.
	lands *landLoads
}

// decideBegin starts a run, or resumes it as a new delivery that takes the
// run over from every earlier delivery. It reports whether the new delivery
// may write, and why not.
func decideBegin(d *document, in beginInput, now time.Time, o Options) (*runState, Reason) {
	ctxAt := in.contextAt
	if ctxAt.IsZero() {
		ctxAt = now
	}
	r := d.Runs[in.runID]
	if r != nil && (r.Ended || r.Cancelled) {
		if r.Cancelled {
			return r, ReasonRunCancelled
		}
		return r, ReasonRunEnded
	}
	d.Token++
	if r == nil {
		r = &runState{ID: in.runID, Mode: in.mode}
		d.Runs[r.ID] = r
	}
	r.Token = d.Token
	// A fresh delivery has lost no lease yet: whatever an earlier delivery
	// lost, this one may take the lease when it is free.
	r.LostLease = false
	r.Delivery++
	if r.Delivery == 1 {
		// A redelivery keeps the first delivery's context: its input is the
		// same, and a later receipt time must not make it look newer than
		// runs that began in between.
		r.ContextAt = ctxAt
	}
	r.SeenSeq = d.seqAt(r.ContextAt, in.lands)
	r.Acks = nil
	r.LastActive = now
	if in.leaseTTL > 0 {
		r.LeaseTTL = in.leaseTTL
	}
	lease := leaseTTL(r, o)
	if r.Mode == ModeExclusive {
		if h := d.Runs[d.Holder]; h != nil && h.ID != r.ID && !h.Ended && !h.Cancelled && now.Before(h.LeaseUntil) {
			return r, ReasonBusy
		}
		if h := d.Runs[d.Holder]; h != nil && h.ID != r.ID {
			h.LostLease = true
		}
		d.Holder = r.ID
		r.LostLease = false
		r.LeaseUntil = now.Add(lease)
		return r, ""
	}
	reason, _ := writable(d, r, r.Token, now, o)
	return r, reason
}

// decideSettle records an attempt's outcome. A settle for an attempt that
// is no longer the latest is flagged and changes nothing; a settle that
// arrives after its claim turned ambiguous by abandonment still records
// what actually happened, flagged as late.
func decideSettle(d *document, entryID string, attempt int, outcome Outcome, value []byte, errText string, now time.Time) (Result, bool, error) {
	e := d.Entries[entryID]
	if e == nil {
		return Result{}, false, fmt.Errorf("%w: %q on scope %q", ErrUnknownEntry, entryID, d.Scope)
	}
	if attempt != e.Attempt {
		if attempt > e.Attempt || attempt < 1 {
			return Result{}, false, fmt.Errorf("%w: attempt %d of %q was never claimed", ErrUnknownEntry, attempt, entryID)
		}
		return Result{Status: statusOf(e), Entry: e, Value: e.Value, LateSettle: true}, false, nil
	}
	late := false
	switch {
	case e.State == StatePending:
		late = !now.Before(e.Deadline())
	case e.State == StateAmbiguous && e.Abandoned && e.ResolvedBy == "":
		late = true
	case e.State == StateFailed && e.ResolvedBy != "":
		return settleAfterResolution(d, e, outcome, value, now), true, nil
	default:
		return Result{}, false, fmt.Errorf("%w: %q attempt %d is already %s", ErrAlreadySettled, entryID, attempt, e.State)
	}
	wasLanded := e.LandedSeq != 0
	e.SettledAt = now
	e.LateSettle = late
	e.Abandoned = false
	switch outcome {
	case OutcomeCommitted:
		e.State, e.Value, e.Error = StateCommitted, value, ""
		if !wasLanded {
			d.land(e, now)
		}
	case OutcomeNotApplied:
		e.State, e.Error = StateFailed, errText
		e.Failures++
	default:
		e.State, e.Error = StateAmbiguous, errText
		if !wasLanded {
			d.land(e, now)
		}
	}
	return Result{Status: statusOf(e), Entry: e, Value: e.Value, LateSettle: late}, true, nil
}

// settleAfterResolution handles the worker's own settle arriving after an
// operator or reconciler resolved its abandoned attempt as not applied. The
// worker knows best: if it says the effect applied, the entry becomes
// committed with its value (so nothing redoes it) and is flagged late; any
// other outcome agrees with the resolution and only adds the flag.
func settleAfterResolution(d *document, e *Entry, outcome Outcome, value []byte, now time.Time) Result {
	e.LateSettle = true
	if outcome == OutcomeCommitted {
		e.State, e.Value, e.Error, e.SettledAt = StateCommitted, value, "", now
		if e.Failures > 0 {
			e.Failures-- // the resolution counted a failure that was not one
		}
		if e.LandedSeq == 0 {
			d.land(e, now)
		}
	}
	return Result{Status: statusOf(e), Entry: e, Value: e.Value, LateSettle: true}
}

// decideResolve applies what an operator or reconciler found about an
// ambiguous (or abandoned pending) entry. attempt 0 means any attempt.
func decideResolve(d *document, entryID string, attempt int, outcome Outcome, by string, now time.Time) (*Entry, error) {
	e := d.Entries[entryID]
	if e == nil {
		return nil, fmt.Errorf("%w: %q on scope %q", ErrUnknownEntry, entryID, d.Scope)
	}
	if attempt != 0 && attempt != e.Attempt {
		return nil, fmt.Errorf("%w: %q moved on to attempt %d", ErrNotAmbiguous, entryID, e.Attempt)
	}
	abandoned := e.State == StatePending && !now.Before(e.Deadline()) && !e.Redeliverable
	if e.State != StateAmbiguous && !abandoned {
		return nil, fmt.Errorf("%w: %q is %s", ErrNotAmbiguous, entryID, e.State)
	}
	switch outcome {
	case OutcomeCommitted:
		e.State = StateCommitted
		if e.LandedSeq == 0 {
			d.land(e, now)
		}
	case OutcomeNotApplied:
		e.State = StateFailed
		e.Failures++
	default:
		return nil, fmt.Errorf("%w: outcome must be %q or %q, got %q", ErrInvalid, OutcomeCommitted, OutcomeNotApplied, outcome)
	}
	e.SettledAt = now
	e.ResolvedBy = by
	return e, nil
}

func statusOf(e *Entry) Status {
	switch e.State {
	case StateCommitted:
		return StatusExecuted
	case StateFailed:
		return StatusFailed
	case StateAmbiguous:
		return StatusAmbiguous
	default:
		return StatusInFlight
	}
}
