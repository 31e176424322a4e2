package riverledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// Config is how jobs become runs.
type Config[T river.JobArgs] struct {
	// Ledger begins the runs: ledgerapi.InProcess or ledgerapi.Remote.
	Ledger ledgerapi.Ledger
	// Scope picks the scope a job's run is fenced on. Required.
	Scope func(job *river.Job[T]) string
	// Mode of the runs (default independent: a job is fenced only by its
	// own later attempts). Supersede makes a newer job on the scope fence
	// older ones.
	Mode ledger.Mode
	// Snooze is how long a job waits when another attempt's effect is in
	// flight (default 5 s).
	Snooze time.Duration
	// Escalate is told of a job cancelled because a person must decide
	// (ambiguous, exhausted, rate limited).
	Escalate func(ctx context.Context, job *river.Job[T], refusal *Refusal)
	// RescueStuckJobsAfter and PendingTTL are River's and the ledger's
	// settings, compared once by New (zero: their defaults, 1 h and 15 min).
	RescueStuckJobsAfter time.Duration
	PendingTTL           time.Duration
	Logger               *slog.Logger
}

// Work does a job under its run. It sends every effect through run.Once
// and passes each result to Result, returning its error when not nil.
type Work[T river.JobArgs] func(ctx context.Context, run ledgerapi.RunHandle, job *river.Job[T]) error

// Refusal is a ledger result that stops a job's work: the Result of a
// Once that was not done.
type Refusal struct {
	Intent string
	Result ledger.Result
}

func (r *Refusal) Error() string {
	what := string(r.Result.Status)
	if r.Result.Reason != "" {
		what += " (" + string(r.Result.Reason) + ")"
	}
	if r.Result.Err != nil {
		what += ": " + r.Result.Err.Error()
	}
	return "replyonce: " + r.Intent + " " + what
}

// Result is nil when res is done (executed or replayed), the store's err
// when there is one, and otherwise a *Refusal that the worker turns into
// River's answer.
func Result(intent string, res ledger.Result, err error) error {
	if err != nil {
		return err
	}
	if res.OK() {
		return nil
	}
	return &Refusal{Intent: intent, Result: res}
}

// RunID is the run of a job.
func RunID(queue string, jobID int64) string {
	return "river:" + queue + ":" + strconv.FormatInt(jobID, 10)
}

// RescueWarning says what goes wrong when River gives up on a running job
// before the ledger gives up on its pending effect, or "" when it does
// not.
func RescueWarning(rescueStuckJobsAfter, pendingTTL time.Duration) string {
	if rescueStuckJobsAfter <= 0 {
		rescueStuckJobsAfter = time.Hour
	}
	if pendingTTL <= 0 {
		pendingTTL = ledger.DefaultPendingTTL
	}
	if rescueStuckJobsAfter >= pendingTTL {
		return ""
	}
	return fmt.Sprintf("River rescues stuck jobs after %s, before the ledger's pending TTL of %s: a rescued job snoozes while the stuck attempt's effect is pending, and the effect turns ambiguous if that attempt never settles", rescueStuckJobsAfter, pendingTTL)
}

// Worker is a River worker whose jobs are ledger runs.
type Worker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	cfg  Config[T]
	work Work[T]
}

// New returns the worker doing work under each job's run.
func New[T river.JobArgs](cfg Config[T], work Work[T]) (*Worker[T], error) {
	if cfg.Ledger == nil || cfg.Scope == nil || work == nil {
		return nil, errors.New("riverledger: Ledger, Scope and work are required")
	}
	if cfg.Mode == "" {
		cfg.Mode = ledger.ModeIndependent
	}
	if cfg.Snooze <= 0 {
		cfg.Snooze = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if w := RescueWarning(cfg.RescueStuckJobsAfter, cfg.PendingTTL); w != "" {
		cfg.Logger.Warn("riverledger: " + w)
	}
	return &Worker[T]{cfg: cfg, work: work}, nil
}

// Work begins (or resumes, as a new delivery) the job's run, does the
// work under it and answers River from what the ledger said.
func (w *Worker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	scope := w.cfg.Scope(job)
	if scope == "" {
		return river.JobCancel(errors.New("riverledger: the job's scope is empty"))
	}
	runID := RunID(job.Queue, job.ID)
	run, err := w.cfg.Ledger.Begin(ctx, scope, ledger.RunOptions{RunID: runID, Mode: w.cfg.Mode, ContextAt: job.CreatedAt})
	if err != nil {
		return fmt.Errorf("riverledger: begin run %s: %w", runID, err)
	}
	log := w.cfg.Logger.With("job_id", job.ID, "queue", job.Queue, "run_id", runID, "attempt", job.Attempt)
	err = w.work(ctx, run, job)
	var ref *Refusal
	if !errors.As(err, &ref) {
		if err != nil {
			return err // the work's own failure or a store outage: River retries
		}
		if endErr := run.End(ctx, "job done"); endErr != nil {
			// The work is done and recorded; a run left open only ages out.
			log.Warn("riverledger: end run", "error", endErr)
		}
		return nil
	}
	res := ref.Result
	switch {
	case res.Status == ledger.StatusInFlight || res.Reason == ledger.ReasonBusy:
		log.Info("riverledger: snoozed", "intent", ref.Intent, "status", res.Status)
		return river.JobSnooze(w.cfg.Snooze)
	case res.Status == ledger.StatusFailed || res.Reason == ledger.ReasonConversationChanged:
		return ref
	case res.Reason == ledger.ReasonSuperseded || res.Reason == ledger.ReasonRunCancelled || res.Reason == ledger.ReasonRunEnded:
		log.Info("riverledger: cancelled", "intent", ref.Intent, "reason", res.Reason)
		return river.JobCancel(ref)
	default: // ambiguous, exhausted, rate_limited, and any reason not known here
		log.Warn("riverledger: cancelled, escalated", "intent", ref.Intent, "status", res.Status, "reason", res.Reason)
		if w.cfg.Escalate != nil {
			w.cfg.Escalate(ctx, job, ref)
		}
		return river.JobCancel(ref)
	}
}
