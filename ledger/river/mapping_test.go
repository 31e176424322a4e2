package riverledger_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	riverledger "github.com/replyonce/gateway/ledger/river"
	"github.com/replyonce/gateway/stores/memory"
)

// What each ledger result makes of the job, worked directly (no queue).
func TestAnswers(t *testing.T) {
	refused := func(r ledger.Reason) ledger.Result { return ledger.Result{Status: ledger.StatusRefused, Reason: r} }
	cases := []struct {
		name     string
		res      ledger.Result
		want     string // complete, snooze, cancel, retry
		escalate bool
	}{
		{"executed", ledger.Result{Status: ledger.StatusExecuted}, "complete", false},
		{"in flight", ledger.Result{Status: ledger.StatusInFlight}, "snooze", false},
		{"busy", refused(ledger.ReasonBusy), "snooze", false},
		{"superseded", refused(ledger.ReasonSuperseded), "cancel", false},
		{"run cancelled", refused(ledger.ReasonRunCancelled), "cancel", false},
		{"run ended", refused(ledger.ReasonRunEnded), "cancel", false},
		{"ambiguous", ledger.Result{Status: ledger.StatusAmbiguous}, "cancel", true},
		{"exhausted", refused(ledger.ReasonExhausted), "cancel", true},
		{"rate limited", refused(ledger.ReasonRateLimited), "cancel", true},
		{"not applied", ledger.Result{Status: ledger.StatusFailed, Err: errors.New("400")}, "retry", false},
		{"conversation changed", refused(ledger.ReasonConversationChanged), "retry", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := ledger.New(memory.New(nil), ledger.Options{})
			escalated := 0
			w, err := riverledger.New(riverledger.Config[refundArgs]{
				Ledger:   ledgerapi.InProcess(l),
				Scope:    func(j *river.Job[refundArgs]) string { return "order-" + j.Args.Order },
				Escalate: func(context.Context, *river.Job[refundArgs], *riverledger.Refusal) { escalated++ },
			}, func(ctx context.Context, run ledgerapi.RunHandle, job *river.Job[refundArgs]) error {
				return riverledger.Result("refund", c.res, nil)
			})
			if err != nil {
				t.Fatal(err)
			}
			job := &river.Job[refundArgs]{JobRow: &rivertype.JobRow{ID: 7, Queue: "billing", Attempt: 1, CreatedAt: time.Now()}, Args: refundArgs{Order: "A-1"}}
			err = w.Work(context.Background(), job)
			var snooze *river.JobSnoozeError
			var cancel *river.JobCancelError
			got := "retry"
			switch {
			case err == nil:
				got = "complete"
			case errors.As(err, &snooze):
				got = "snooze"
			case errors.As(err, &cancel):
				got = "cancel"
				if !strings.Contains(err.Error(), "refund") {
					t.Errorf("cancel reason %q does not say what was refused", err)
				}
			}
			if got != c.want || (escalated == 1) != c.escalate {
				t.Fatalf("got %s (escalated %d): %v; want %s, escalate %v", got, escalated, err, c.want, c.escalate)
			}
			if got == "complete" {
				// The job's run ended with it.
				run := l.RunRef("order-A-1", riverledger.RunID("billing", 7), 0)
				res, err := run.Once(context.Background(), "x", 1, func(context.Context, ledger.Call) (any, error) { return nil, nil })
				if err != nil || res.Reason != ledger.ReasonRunEnded {
					t.Fatalf("after completion the run answers %+v, %v; want run_ended", res, err)
				}
			}
		})
	}
}

// The loop breaker's real refusal: four jobs replying on one thread under
// a cap of three; the fourth job's reply is refused rate_limited by the
// ledger, so the job is cancelled and escalated, and its effect never runs.
func TestCappedJobIsCancelledAndEscalated(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{Caps: map[string]ledger.Cap{"reply": {Max: 3, Window: 5 * time.Minute}}})
	var escalated []*riverledger.Refusal
	sent := 0
	w, err := riverledger.New(riverledger.Config[refundArgs]{
		Ledger: ledgerapi.InProcess(l),
		Scope:  func(*river.Job[refundArgs]) string { return "thread-1" },
		Escalate: func(_ context.Context, _ *river.Job[refundArgs], r *riverledger.Refusal) {
			escalated = append(escalated, r)
		},
	}, func(ctx context.Context, run ledgerapi.RunHandle, job *river.Job[refundArgs]) error {
		res, err := run.Once(ctx, "reply", job.Args.Order, func(context.Context, ledger.Call) (any, error) { sent++; return nil, nil })
		return riverledger.Result("reply", res, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	var answers []error
	for i := int64(1); i <= 4; i++ {
		job := &river.Job[refundArgs]{JobRow: &rivertype.JobRow{ID: i, Queue: "replies", Attempt: 1, CreatedAt: time.Now()},
			Args: refundArgs{Order: "m" + string(rune('0'+i))}}
		answers = append(answers, w.Work(context.Background(), job))
	}
	for i, err := range answers[:3] {
		if err != nil {
			t.Fatalf("job %d: %v, want completed", i+1, err)
		}
	}
	var cancel *river.JobCancelError
	if !errors.As(answers[3], &cancel) || !strings.Contains(answers[3].Error(), "rate_limited") {
		t.Fatalf("job 4: %v, want cancelled with the reason rate_limited", answers[3])
	}
	if sent != 3 || len(escalated) != 1 || escalated[0].Result.Reason != ledger.ReasonRateLimited {
		t.Fatalf("%d sent, escalated %v; want 3 sent and job 4 escalated as rate_limited", sent, escalated)
	}
}

func TestRescueWarning(t *testing.T) {
	if w := riverledger.RescueWarning(0, 0); w != "" {
		t.Fatalf("defaults (1 h rescue, 15 min TTL) warned: %s", w)
	}
	if w := riverledger.RescueWarning(5*time.Minute, 15*time.Minute); !strings.Contains(w, "5m0s") || !strings.Contains(w, "15m0s") {
		t.Fatalf("warning %q does not name both settings", w)
	}
	var buf bytes.Buffer
	_, err := riverledger.New(riverledger.Config[refundArgs]{
		Ledger: ledgerapi.InProcess(ledger.New(memory.New(nil), ledger.Options{})),
		Scope:  func(*river.Job[refundArgs]) string { return "s" }, RescueStuckJobsAfter: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
	}, func(context.Context, ledgerapi.RunHandle, *river.Job[refundArgs]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "pending TTL") {
		t.Fatalf("New logged %q, want a warning", buf.String())
	}
}
