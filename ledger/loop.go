package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Attempts is the two-phase API as RunEffect drives it. *Ledger provides it
// in process, and the ledger API's Go client over HTTP, so that both run
// one claim → effect → settle loop.
type Attempts interface {
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	Settle(ctx context.Context, ref ClaimRef, outcome Outcome, value any, effectErr error) (Result, error)
	// Reconciled records what a reconciler found about an ambiguous
	// attempt (OutcomeCommitted or OutcomeNotApplied). It fails with
	// ErrNotAmbiguous when the entry was settled or moved on meanwhile.
	Reconciled(ctx context.Context, ref ClaimRef, outcome Outcome) (Entry, error)
}

var _ Attempts = (*Ledger)(nil)

// LoopOptions tune RunEffect. Zero values take the ledger's defaults.
type LoopOptions struct {
	// Clock times the effect's deadline and Wait (default time.Now).
	Clock func() time.Time
	// Classify decides whether an effect's error means not applied
	// (default: errors wrapping ErrNotApplied) or ambiguous.
	Classify func(error) ErrorClass
	// Reconcile, when set, is asked once per call about an ambiguous
	// entry; its answer is recorded, and a not_applied answer lets the
	// effect be claimed again.
	Reconcile Reconciler
	// Wait makes an in-flight answer wait up to this long, by Clock, for
	// the other attempt to settle; WaitInterval is how often it looks
	// (default 50 ms).
	Wait         time.Duration
	WaitInterval time.Duration
}

// RunEffect performs effect at most once for req.Key through a: claim; if
// acquired, run the effect until the claim's deadline and settle what it
// came to; if ambiguous, ask the reconciler; if in flight, wait when asked
// to. A settle that fails after the effect ran is an error that says so.
func RunEffect(ctx context.Context, a Attempts, req ClaimRequest, effect Effect, o LoopOptions) (Result, error) {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Classify == nil {
		o.Classify = defaultClassify
	}
	if o.WaitInterval <= 0 {
		o.WaitInterval = 50 * time.Millisecond
	}
	waitUntil := o.Clock().Add(o.Wait)
	reconciled := false
	for {
		c, err := a.Claim(ctx, req)
		if err != nil {
			return Result{}, err
		}
		switch {
		case c.Acquired():
			return perform(ctx, a, req.Key, c, effect, o)
		case c.Status == StatusAmbiguous && c.Entry != nil && o.Reconcile != nil && !reconciled:
			reconciled = true
			again, res, err := reconcile(ctx, a, c, o.Reconcile)
			if err != nil || !again {
				return res, err
			}
		case c.Status == StatusInFlight && o.Wait > 0 && o.Clock().Before(waitUntil):
			t := time.NewTimer(o.WaitInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return Result{}, ctx.Err()
			case <-t.C:
			}
		default:
			return c.Result, nil
		}
	}
}

// perform runs an acquired claim's effect and settles it. The effect's
// context ends when its claim would read as abandoned, so a slow effect
// stops instead of racing the next attempt.
func perform(ctx context.Context, a Attempts, key Key, c Claim, effect Effect, o LoopOptions) (Result, error) {
	call := Call{Key: key, EntryID: c.EntryID, Attempt: c.Attempt, IdempotencyKey: c.IdempotencyKey,
		FencingToken: c.FencingToken, Deadline: c.Deadline}
	ectx, cancel := context.WithTimeout(ctx, c.Deadline.Sub(o.Clock()))
	value, effErr := effect(ectx, call)
	cancel()
	outcome := OutcomeCommitted
	if effErr != nil {
		outcome = OutcomeUnknown
		if o.Classify(effErr) == ClassNotApplied {
			outcome = OutcomeNotApplied
		}
	}
	res, err := a.Settle(context.WithoutCancel(ctx), c.Ref(), outcome, value, effErr)
	if err != nil {
		return Result{}, fmt.Errorf("ledger: effect ran but its outcome could not be recorded: %w", err)
	}
	return res, nil
}

// reconcile asks the reconciler about an ambiguous entry, outside any
// transaction, and records the answer. again says claim once more: the
// effect did not happen, or someone else settled the entry meanwhile.
func reconcile(ctx context.Context, a Attempts, c Claim, rec Reconciler) (again bool, res Result, err error) {
	outcome, rerr := rec(ctx, *c.Entry)
	if rerr != nil || (outcome != OutcomeCommitted && outcome != OutcomeNotApplied) {
		return false, c.Result, nil
	}
	e, err := a.Reconciled(ctx, c.Ref(), outcome)
	if errors.Is(err, ErrNotAmbiguous) {
		return true, Result{}, nil
	}
	if err != nil {
		return false, Result{}, err
	}
	if outcome == OutcomeCommitted {
		return false, Result{Status: StatusReplayed, Value: e.Value, Entry: &e}, nil
	}
	return true, Result{}, nil
}
