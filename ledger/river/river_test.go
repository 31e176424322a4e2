package riverledger_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	riverledger "github.com/replyonce/gateway/ledger/river"
	"github.com/replyonce/gateway/stores/postgres"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const dsnVar = "REPLYONCE_TEST_POSTGRES"

// riverSchema connects to the test database and migrates River into a
// schema of the test's own, dropped at the end.
func riverSchema(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := os.Getenv(dsnVar)
	if dsn == "" && os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set: in CI the River tests must run", dsnVar)
	}
	if dsn == "" {
		t.Skipf("%s is not set; set it to a PostgreSQL URL (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the River tests", dsnVar)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("%s: %v", dsnVar, err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("%s is set but PostgreSQL cannot be reached: %v", dsnVar, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "replyonce_river_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("migrate River: %v", err)
	}
	return pool, schema
}

// postgresLedger is a ledger on the Postgres store, in a table of the
// test's River schema: the jobs and the ledger on one database, as a
// deployment would have them.
func postgresLedger(t *testing.T, pool *pgxpool.Pool, schema string) *ledger.Ledger {
	t.Helper()
	s := postgres.New(pool, postgres.Options{Table: schema + ".ledger"})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate the ledger table: %v", err)
	}
	t.Cleanup(s.Close)
	return ledger.New(s, ledger.Options{})
}

type refundArgs struct {
	Order string `json:"order"`
}

func (refundArgs) Kind() string { return "refund" }

// retryNow retries a failed or rescued job at once, so the test does not
// wait out River's backoff.
type retryNow struct{}

func (retryNow) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

// recording tells the test what each attempt answered River.
type recording struct {
	*riverledger.Worker[refundArgs]
	attempts chan<- attempt
}

func (r recording) Work(ctx context.Context, job *river.Job[refundArgs]) error {
	err := r.Worker.Work(ctx, job)
	r.attempts <- attempt{job.Attempt, err}
	return err
}

type attempt struct {
	n   int
	err error
}

// A worker hangs inside its refund. River gives up on it and rescues the
// job; the rescued attempt resumes the job's run as a new delivery, finds
// the refund still pending and snoozes. When the hung worker wakes, its
// refund is recorded, but its next write (the reply) is refused: it has
// been fenced. The rescued attempt then replays the refund and sends the
// reply. The refund and the reply each happen once.
func TestRescuedJobResumesItsRun(t *testing.T) {
	pool, schema := riverSchema(t)
	l := postgresLedger(t, pool, schema)

	var refunds, replies atomic.Int32
	hung, wake := make(chan struct{}), make(chan struct{})
	var wakeOnce sync.Once
	release := func() { wakeOnce.Do(func() { close(wake) }) }
	defer release()
	attempts := make(chan attempt, 16)
	var escalated atomic.Int32

	worker, err := riverledger.New(riverledger.Config[refundArgs]{
		Ledger:               ledgerapi.InProcess(l),
		Scope:                func(job *river.Job[refundArgs]) string { return "order-" + job.Args.Order },
		Snooze:               3 * time.Second,
		RescueStuckJobsAfter: time.Second,
		Escalate: func(context.Context, *river.Job[refundArgs], *riverledger.Refusal) {
			escalated.Add(1)
		},
	}, func(ctx context.Context, run ledgerapi.RunHandle, job *river.Job[refundArgs]) error {
		// The dangerous worker: deaf to River's timeout, so that a hung
		// attempt still writes when it wakes. Only the ledger stops it.
		ctx = context.WithoutCancel(ctx)
		{
			res, err := run.Once(ctx, "refund", map[string]string{"order": job.Args.Order}, func(ctx context.Context, c ledger.Call) (any, error) {
				if refunds.Add(1) == 1 {
					close(hung)
					<-wake // a hung worker: deaf to its context
				}
				return map[string]string{"refund_id": "re_1"}, nil
			})
			if err := riverledger.Result("refund", res, err); err != nil {
				return err
			}
			res, err = run.Once(ctx, "reply", map[string]string{"order": job.Args.Order}, func(context.Context, ledger.Call) (any, error) {
				replies.Add(1)
				return map[string]string{"message_id": "m_1"}, nil
			}, ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})
			return riverledger.Result("reply", res, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker[refundArgs](workers, recording{worker, attempts})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:               schema,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers:              workers,
		JobTimeout:           500 * time.Millisecond, // River rescues only jobs that can time out
		RescueStuckJobsAfter: time.Second,
		RetryPolicy:          retryNow{},
		FetchPollInterval:    100 * time.Millisecond,
		TestOnly:             true,
		Logger:               slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		release()
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			t.Errorf("stop River: %v", err)
		}
	}()
	ins, err := client.Insert(ctx, refundArgs{Order: "A-1001"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) attempt {
		t.Helper()
		select {
		case a := <-attempts:
			return a
		case <-time.After(90 * time.Second): // River's rescuer looks every 30 s
			job, err := client.JobGet(ctx, ins.Job.ID)
			if err == nil {
				t.Fatalf("%s: no attempt finished; job is %s, attempt %d, scheduled %s, errors %+v, metadata %s", what, job.State, job.Attempt, job.ScheduledAt, job.Errors, job.Metadata)
			}
			t.Fatalf("%s: no attempt finished (%v)", what, err)
		}
		return attempt{}
	}
	<-hung

	// River rescues the hung job; the rescued attempt finds the refund
	// pending and snoozes.
	a := next("the rescued attempt")
	if a.n != 2 || !isSnooze(a.err) {
		t.Fatalf("rescued attempt %d returned %v, want attempt 2 snoozed", a.n, a.err)
	}
	// River records the snooze on its own time. Until it has, the row
	// still reads running, and River does not fence a job's completion by
	// attempt: the hung copy's answer would land on the live attempt.
	waitState(t, client, ins.Job.ID, rivertype.JobStateScheduled, rivertype.JobStateAvailable)
	// The hung worker wakes: its refund is recorded, its reply refused.
	release()
	a = next("the hung attempt")
	var ref *riverledger.Refusal
	var cancel *river.JobCancelError
	if a.n != 1 || !errors.As(a.err, &cancel) || !errors.As(a.err, &ref) || ref.Intent != "reply" || ref.Result.Reason != ledger.ReasonSuperseded {
		t.Fatalf("hung attempt %d returned %v, want the job cancelled: its reply refused superseded", a.n, a.err)
	}
	// After its snooze, the rescued attempt replays the refund and replies.
	a = next("the rescued attempt after its snooze")
	if a.err != nil {
		t.Fatalf("rescued attempt after snooze: %v", a.err)
	}
	if a.n != 2 {
		t.Fatalf("the snoozed attempt came back as attempt %d: a snooze must not use an attempt", a.n)
	}
	if refunds.Load() != 1 || replies.Load() != 1 {
		t.Fatalf("refunds %d, replies %d: want each once", refunds.Load(), replies.Load())
	}
	if escalated.Load() != 0 {
		t.Fatal("nothing here needs a person")
	}
	waitState(t, client, ins.Job.ID, rivertype.JobStateCompleted)
	hist, err := l.Views().History(ctx, "order-A-1001")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		if e.State != ledger.StateCommitted || e.RunID != riverledger.RunID(river.QueueDefault, ins.Job.ID) {
			t.Errorf("entry %s: %s on run %s", e.Intent, e.State, e.RunID)
		}
	}
}

func isSnooze(err error) bool {
	var s *river.JobSnoozeError
	return errors.As(err, &s)
}

func waitState(t *testing.T, c *river.Client[pgx.Tx], id int64, want ...rivertype.JobState) *rivertype.JobRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		job, err := c.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if job.State == w {
				return job
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s, want one of %v", id, job.State, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
