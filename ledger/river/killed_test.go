package riverledger_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	riverledger "github.com/replyonce/gateway/ledger/river"
	"github.com/replyonce/gateway/stores/postgres"
)

// The killed-worker case runs the first attempt in a child process (this
// test binary again) and SIGKILLs it inside the refund, after the refund
// reached the "provider" (a table) and before the ledger heard how it
// went. These name the child's settings.
const (
	killHelperVar = "REPLYONCE_RIVER_KILL_HELPER"
	killSchemaVar = "REPLYONCE_RIVER_KILL_SCHEMA"
	// killPendingTTL is the child's pending TTL: past it the killed
	// attempt's claim reads as abandoned.
	killPendingTTL = 2 * time.Second
)

// killedWork refunds the job's order (one row in the provider's table),
// then replies. hang, when set, runs between the refund reaching the
// provider and its effect returning: the child uses it to report and wait
// to be killed.
func killedWork(pool *pgxpool.Pool, schema string, replies *atomic.Int32, hang func()) riverledger.Work[refundArgs] {
	refunds := pgx.Identifier{schema, "provider_refunds"}.Sanitize()
	return func(ctx context.Context, run ledgerapi.RunHandle, job *river.Job[refundArgs]) error {
		res, err := run.Once(ctx, "refund", map[string]string{"order": job.Args.Order}, func(ctx context.Context, c ledger.Call) (any, error) {
			if _, err := pool.Exec(ctx, "INSERT INTO "+refunds+" (order_id, idempotency_key) VALUES ($1, $2)", job.Args.Order, c.IdempotencyKey); err != nil {
				return nil, err
			}
			if hang != nil {
				hang()
			}
			return map[string]string{"refund_id": "re_" + job.Args.Order}, nil
		})
		if err := riverledger.Result("refund", res, err); err != nil {
			return err
		}
		res, err = run.Once(ctx, "reply", map[string]string{"order": job.Args.Order}, func(context.Context, ledger.Call) (any, error) {
			replies.Add(1)
			return map[string]string{"message_id": "m_" + job.Args.Order}, nil
		}, ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})
		return riverledger.Result("reply", res, err)
	}
}

// TestHelperKilledWorker is the child: it inserts the job, works it until
// the refund has reached the provider, says so on stdout, and hangs there
// until it is killed. It does nothing unless the parent started it.
func TestHelperKilledWorker(t *testing.T) {
	if os.Getenv(killHelperVar) != "1" {
		t.Skip("the child process of TestKilledWorkerIsRescuedAndResumed")
	}
	ctx := context.Background()
	schema := os.Getenv(killSchemaVar)
	pool, err := pgxpool.New(ctx, os.Getenv(dsnVar))
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.New(postgres.New(pool, postgres.Options{Table: schema + ".ledger"}), ledger.Options{PendingTTL: killPendingTTL})
	var replies atomic.Int32
	worker, err := riverledger.New(riverledger.Config[refundArgs]{
		Ledger: ledgerapi.InProcess(l),
		Scope:  func(job *river.Job[refundArgs]) string { return "order-" + job.Args.Order },
	}, killedWork(pool, schema, &replies, func() {
		fmt.Println("refund-applied")
		select {} // killed here
	}))
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker[refundArgs](workers, worker)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: schema, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers: workers, FetchPollInterval: 100 * time.Millisecond, TestOnly: true, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := client.Insert(ctx, refundArgs{Order: "K-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("job", ins.Job.ID)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {} // the parent kills this process
}

// A worker process is SIGKILLed in the middle of its refund: the refund
// reached the provider, the ledger never heard. River rescues the stuck
// job and the next attempt resumes the job's run as a new delivery. The
// ledger does not let it refund again: the abandoned claim reads as
// ambiguous, the reconciler (which asks the provider) finds it happened,
// and the refund is replayed; the reply then goes out once. Jobs, ledger
// and provider are all on real Postgres.
func TestKilledWorkerIsRescuedAndResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process and waits for River's rescuer (up to a minute)")
	}
	pool, schema := riverSchema(t)
	ctx := context.Background()
	refunds := pgx.Identifier{schema, "provider_refunds"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+refunds+" (order_id text NOT NULL, idempotency_key text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	store := postgres.New(pool, postgres.Options{Table: schema + ".ledger"})
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)

	// The first attempt, in a process of its own.
	child := exec.Command(os.Args[0], "-test.run=^TestHelperKilledWorker$", "-test.count=1")
	child.Env = append(os.Environ(), killHelperVar+"=1", killSchemaVar+"="+schema)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var jobID int64
	for applied := false; !applied; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the worker process exited before its refund reached the provider")
			}
			if id, found := strings.CutPrefix(line, "job "); found {
				jobID, _ = strconv.ParseInt(id, 10, 64)
			}
			applied = line == "refund-applied"
		case <-time.After(60 * time.Second):
			t.Fatal("the worker process never reached its refund")
		}
	}
	if jobID == 0 {
		t.Fatal("the worker process did not say which job it inserted")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	go func() {
		for range lines { // drain until the pipe closes
		}
	}()

	// The survivor: River rescues the dead process's job to it. Its
	// reconciler asks the provider whether the refund happened.
	var reconciled atomic.Int32
	l := ledger.New(store, ledger.Options{Reconcile: func(ctx context.Context, e ledger.Entry) (ledger.Outcome, error) {
		reconciled.Add(1)
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+refunds+" WHERE idempotency_key = $1", e.IdempotencyKey()).Scan(&n); err != nil {
			return ledger.OutcomeUnknown, err
		}
		if n > 0 {
			return ledger.OutcomeCommitted, nil
		}
		return ledger.OutcomeNotApplied, nil
	}})
	var replies, escalated atomic.Int32
	attempts := make(chan attempt, 16)
	worker, err := riverledger.New(riverledger.Config[refundArgs]{
		Ledger:   ledgerapi.InProcess(l),
		Scope:    func(job *river.Job[refundArgs]) string { return "order-" + job.Args.Order },
		Snooze:   time.Second,
		Escalate: func(context.Context, *river.Job[refundArgs], *riverledger.Refusal) { escalated.Add(1) },
	}, killedWork(pool, schema, &replies, nil))
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker[refundArgs](workers, recording{worker, attempts})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: schema, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers: workers, JobTimeout: 500 * time.Millisecond, RescueStuckJobsAfter: time.Second,
		RetryPolicy: retryNow{}, FetchPollInterval: 100 * time.Millisecond, TestOnly: true, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			t.Errorf("stop River: %v", err)
		}
	}()
	var last attempt
	for done := false; !done; {
		select {
		case last = <-attempts:
			// A rescue that comes before the killed claim's TTL snoozes;
			// the attempt after it finds the claim abandoned.
			var snooze *river.JobSnoozeError
			done = !errors.As(last.err, &snooze)
		case <-time.After(90 * time.Second): // River's rescuer looks every 30 s
			t.Fatal("the killed job was never rescued")
		}
	}
	if last.err != nil || last.n < 2 {
		t.Fatalf("rescued attempt %d returned %v, want attempt 2 or later to complete the job", last.n, last.err)
	}
	waitState(t, client, jobID, rivertype.JobStateCompleted)
	var provided int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+refunds).Scan(&provided); err != nil {
		t.Fatal(err)
	}
	if provided != 1 || replies.Load() != 1 || reconciled.Load() != 1 || escalated.Load() != 0 {
		t.Fatalf("provider refunds %d, replies %d, reconciled %d, escalated %d: want 1, 1, 1, 0", provided, replies.Load(), reconciled.Load(), escalated.Load())
	}
	hist, err := l.Views().History(ctx, "order-K-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		if e.State != ledger.StateCommitted || e.RunID != riverledger.RunID(river.QueueDefault, jobID) {
			t.Errorf("entry %s: %s on run %s", e.Intent, e.State, e.RunID)
		}
		if e.Intent == "refund" && e.ResolvedBy != "reconciler" {
			t.Errorf("refund resolved by %q, want the reconciler", e.ResolvedBy)
		}
	}
}
