package ledger

import (
	"context"
	"fmt"
	"time"
)

// RunOptions start or resume a run.
type RunOptions struct {
	// RunID names the unit of work (an inbound message, a job). The same id
	// on a redelivery resumes the run as a new delivery, which takes it
	// over. Empty: a fresh random id.
	RunID string
	Mode  Mode // default supersede
	// ContextAt is when the run's view of the scope was captured. Zero:
	// now. A resumed run keeps the context of its first delivery.
	ContextAt time.Time
	LeaseTTL  time.Duration // exclusive mode; default the ledger's
}

// Run is one delivery of a unit of work on a scope. Its fencing token is
// what makes its writes refusable once a newer run or delivery exists.
type Run struct {
	l         *Ledger
	Scope     string
	ID        string
	Mode      Mode
	Token     uint64
	Delivery  int
	ContextAt time.Time
	// CanWrite says whether the run could claim at the moment it began;
	// Reason says why not.
	CanWrite bool
	Reason   Reason
}

func (l *Ledger) beginInput(opts RunOptions) (beginInput, error) {
	mode := opts.Mode
	switch mode {
	case "":
		mode = ModeSupersede
	case ModeSupersede, ModeExclusive, ModeIndependent:
	default:
		return beginInput{}, fmt.Errorf("%w: run mode %q (want supersede, exclusive or independent)", ErrInvalid, mode)
	}
	if opts.LeaseTTL < 0 {
		return beginInput{}, fmt.Errorf("%w: lease TTL must not be negative", ErrInvalid)
	}
	if !opts.ContextAt.IsZero() && (opts.ContextAt.Year() < 1 || opts.ContextAt.Year() > 9999) {
		return beginInput{}, fmt.Errorf("%w: contextAt %s is outside years 1 to 9999", ErrInvalid, opts.ContextAt.Format(time.RFC3339Nano))
	}
	id := opts.RunID
	if id == "" {
		id = newRunID()
	}
	return beginInput{runID: id, fresh: opts.RunID == "", mode: mode, contextAt: opts.ContextAt, leaseTTL: opts.LeaseTTL}, nil
}

// named is the run to look up among the spilled ones: none when the
// ledger made its id up just now.
func (in beginInput) named() []string {
	if in.fresh {
		return nil
	}
	return []string{in.runID}
}

// checkContextAt refuses a contextAt more than MaxContextAhead past now.
func checkContextAt(in beginInput, now time.Time) error {
	if in.contextAt.After(now.Add(MaxContextAhead)) {
		return fmt.Errorf("%w: contextAt %s is more than %s ahead of the ledger's clock", ErrInvalid, in.contextAt.Format(time.RFC3339Nano), MaxContextAhead)
	}
	return nil
}

func (l *Ledger) runFrom(scope string, r *runState, reason Reason) *Run {
	return &Run{l: l, Scope: scope, ID: r.ID, Mode: r.Mode, Token: r.Token, Delivery: r.Delivery,
		ContextAt: r.ContextAt, CanWrite: reason == "", Reason: reason}
}

// Begin starts a run on scope, or resumes it when RunID names an existing
// one.
func (l *Ledger) Begin(ctx context.Context, scope string, opts RunOptions) (*Run, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	in, err := l.beginInput(opts)
	if err != nil {
		return nil, err
	}
	var run *Run
	// A run id is nearly always new: read its record with the document.
	err = l.transactFind(ctx, scope, lookup{runs: in.named(), waits: true}, func(d *document, now time.Time, _ *blobSet, v *spillView) (bool, error) {
		if d.parkedRun(in.runID) {
			return false, errNeedAllWaits
		}
		if err := checkContextAt(in, now); err != nil {
			return false, err
		}
		in := in
		in.lands = v.lands
		r, reason := decideBegin(d, in, now, l.opts)
		run = l.runFrom(scope, r, reason)
		return reason != ReasonRunEnded && reason != ReasonRunCancelled, nil
	})
	if err != nil {
		return nil, err
	}
	l.observe(Event{Type: "begin", Scope: scope, RunID: run.ID, Reason: run.Reason})
	return run, nil
}

// BeginClaim is the gateway's one transaction per delivery: it claims
// req.Key with no run fencing, and only when the claim is granted does it
// begin or resume the run, so that a duplicate that is answered "in flight"
// or "done" never takes the run over from the delivery doing the work.
// The run is nil unless the claim was acquired. A run that has ended or
// been cancelled gets no claim: the result is refused run_ended or
// run_cancelled and nothing is written.
func (l *Ledger) BeginClaim(ctx context.Context, opts RunOptions, req ClaimRequest) (*Run, Claim, error) {
	in, err := l.claimInput(req)
	if err != nil {
		return nil, Claim{}, err
	}
	if in.runID != "" {
		return nil, Claim{}, fmt.Errorf("%w: BeginClaim takes the run from RunOptions, not the claim", ErrInvalid)
	}
	bin, err := l.beginInput(opts)
	if err != nil {
		return nil, Claim{}, err
	}
	if c, ok := l.replayed(in); ok {
		// What the store would say too: a committed entry is answered
		// before the run is looked at, and nothing is written.
		l.observe(Event{Type: eventType(c.Result), Scope: c.Scope, EntryID: c.EntryID, Intent: in.key.intent, RunID: bin.runID})
		return nil, c, nil
	}
	var dec decision
	var run *Run
	var rerun bool
	lk := lookupFor(in.key)
	lk.runs, lk.waits = bin.named(), true
	replayed := replayedFrom(l.opts.Retention, &dec, &rerun)
	lk.replayed = func(r *spillRecord, now time.Time) bool {
		// The document's decision refuses a context too far ahead
		// before it looks at the entry.
		return checkContextAt(bin, now) == nil && replayed(r, now)
	}
	err = l.transactFind(ctx, in.key.scope, lk, func(d *document, now time.Time, _ *blobSet, v *spillView) (bool, error) {
		run = nil
		if d.parkedEntry(lk.ids...) || d.parkedRun(bin.runID) {
			return false, errNeedAllWaits
		}
		if err := checkContextAt(bin, now); err != nil {
			return false, err
		}
		in := in
		in.key.id = in.key.idIn(d)
		rerun = d.rerunnable(in.key.id)
		if done := settledState(d, in, now, l.opts); done != nil {
			dec = *done
			return dec.changed, nil
		}
		bin := bin
		bin.lands = v.lands
		r, reason := decideBegin(d, bin, now, l.opts)
		if reason == ReasonRunEnded || reason == ReasonRunCancelled {
			// A finished run takes no more deliveries: no claim, so
			// nothing is forwarded, and nothing is written.
			dec = decision{result: Result{Status: StatusRefused, Reason: reason, Entry: d.Entries[in.key.id]}}
			return false, nil
		}
		run = l.runFrom(in.key.scope, r, reason)
		e := claimEntry(d, in, nil, now, l.opts)
		e.RunID, e.Token, e.Delivery = r.ID, r.Token, r.Delivery
		dec = decision{result: Result{Status: StatusClaimed, Entry: e}, changed: true, claimed: e}
		return true, nil
	})
	if err != nil {
		return nil, Claim{}, err
	}
	l.rememberReplay(in.key, dec, rerun)
	c := claimFrom(in.key.scope, dec)
	l.observe(Event{Type: eventType(c.Result), Scope: c.Scope, EntryID: c.EntryID, Intent: in.key.intent, RunID: bin.runID, Reason: c.Reason})
	return run, c, nil
}

// RunRef rebuilds a handle on a run that began elsewhere (another process,
// or the gateway that forwarded the event), from its scope, id and the
// delivery's fencing token.
func (l *Ledger) RunRef(scope, runID string, token uint64) *Run {
	return &Run{l: l, Scope: scope, ID: runID, Token: token, CanWrite: true}
}

// Once performs a fenced, scope-aware effect at most once: refused when the
// run may no longer write or the scope changed under it.
func (r *Run) Once(ctx context.Context, intent string, payload any, effect Effect, opts ...OnceOptions) (Result, error) {
	var o OnceOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return r.l.once(ctx, r.claimRequest(intent, payload, o), o.Wait, effect)
}

// Claim is the first phase of Once for this run.
func (r *Run) Claim(ctx context.Context, intent string, payload any, o OnceOptions) (Claim, error) {
	return r.l.Claim(ctx, r.claimRequest(intent, payload, o))
}

func (r *Run) claimRequest(intent string, payload any, o OnceOptions) ClaimRequest {
	return ClaimRequest{Key: Key{Scope: r.Scope, Intent: intent, Payload: payload}, RunID: r.ID, Token: r.Token,
		Summary: o.Summary, Conflict: o.Conflict, Ack: o.Ack, PendingTTL: o.PendingTTL, Redeliverable: o.Redeliverable}
}

// Check reports whether this run's scope already has the effect done.
func (r *Run) Check(ctx context.Context, intent string, payload any) (CheckResult, error) {
	return r.l.Check(ctx, Key{Scope: r.Scope, Intent: intent, Payload: payload})
}

// Heartbeat renews the run's lease. false means the run may no longer
// write and should stop.
func (r *Run) Heartbeat(ctx context.Context) (bool, error) {
	return r.l.Heartbeat(ctx, r.Scope, r.ID, r.Token)
}

// End finishes the run; it can no longer claim. It is fenced like a claim:
// a delivery that was taken over cannot end the run under its successor,
// and its End changes nothing.
func (r *Run) End(ctx context.Context, reason string) error {
	return r.l.EndDelivery(ctx, r.Scope, r.ID, r.Token, reason)
}

// Heartbeat renews a run's lease by reference.
func (l *Ledger) Heartbeat(ctx context.Context, scope, runID string, token uint64) (bool, error) {
	alive := false
	// A live run is nearly always in the document: its record is read
	// only when it is not (lazy).
	err := l.transactFind(ctx, scope, lookup{runs: []string{runID}, lazy: true, waits: true}, func(d *document, now time.Time, _ *blobSet, _ *spillView) (bool, error) {
		if d.parkedRun(runID) {
			return false, errNeedAllWaits
		}
		r := d.Runs[runID]
		if r == nil {
			return false, fmt.Errorf("%w: run %q on scope %q", ErrUnknownRun, runID, scope)
		}
		reason, _ := writable(d, r, token, now, l.opts)
		alive = reason == ""
		if !alive {
			return r.Mode == ModeExclusive, nil
		}
		r.LastActive = now
		return true, nil
	})
	return alive, err
}

// End finishes a run by reference, whichever delivery holds it (an
// operator's action). Ending an ended run changes nothing.
func (l *Ledger) End(ctx context.Context, scope, runID, reason string) error {
	return l.finishRun(ctx, scope, runID, 0, reason, false)
}

// EndDelivery finishes a run on behalf of one delivery: when token is not
// the run's current token (a later delivery took it over), nothing changes.
func (l *Ledger) EndDelivery(ctx context.Context, scope, runID string, token uint64, reason string) error {
	if token == 0 {
		return fmt.Errorf("%w: a delivery's fencing token is required", ErrInvalid)
	}
	return l.finishRun(ctx, scope, runID, token, reason, false)
}

// Cancel stops a run: its later claims are refused run_cancelled.
func (l *Ledger) Cancel(ctx context.Context, scope, runID string) error {
	return l.finishRun(ctx, scope, runID, 0, "cancelled", true)
}

func (l *Ledger) finishRun(ctx context.Context, scope, runID string, token uint64, reason string, cancel bool) error {
	if scope == "" || runID == "" {
		return fmt.Errorf("%w: scope and run id are required", ErrInvalid)
	}
	return l.transactFind(ctx, scope, lookup{runs: []string{runID}, lazy: true, waits: true}, func(d *document, now time.Time, _ *blobSet, _ *spillView) (bool, error) {
		if d.parkedRun(runID) {
			return false, errNeedAllWaits
		}
		r := d.Runs[runID]
		if r == nil {
			return false, fmt.Errorf("%w: run %q on scope %q", ErrUnknownRun, runID, scope)
		}
		if r.Ended || r.Cancelled || (token != 0 && token != r.Token) {
			return false, nil
		}
		if cancel {
			r.Cancelled = true
		} else {
			r.Ended = true
		}
		r.EndedAt, r.EndReason, r.LastActive = now, reason, now
		if d.Holder == runID {
			d.Holder = ""
		}
		return true, nil
	})
}
