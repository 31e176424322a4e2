// Command example is a River worker whose refund jobs are ledger runs.
// It migrates River into its own schema of the database at DATABASE_URL,
// enqueues one refund, works it and prints what happened:
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable go run .
//
// The ledger here is in process, over the memory store; behind the gateway
// use ledgerapi.Remote(client) so that the worker shares the gateway's
// ledger.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	riverledger "github.com/replyonce/gateway/ledger/river"
	"github.com/replyonce/gateway/stores/memory"
)

const schema = "replyonce_river_example"

// RefundArgs is a refund job: the order is the scope its run is fenced on.
type RefundArgs struct {
	Order string `json:"order"`
	Cents int    `json:"cents"`
}

// Kind names the job for River.
func (RefundArgs) Kind() string { return "refund" }

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return errors.New("DATABASE_URL is not set")
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	done := make(chan string, 1)
	worker, err := riverledger.New(riverledger.Config[RefundArgs]{
		Ledger: ledgerapi.InProcess(ledger.New(memory.New(nil), ledger.Options{})),
		Scope:  func(job *river.Job[RefundArgs]) string { return "order:" + job.Args.Order },
		Escalate: func(ctx context.Context, job *river.Job[RefundArgs], r *riverledger.Refusal) {
			log.Error("a person must look at this job", "job_id", job.ID, "refusal", r)
		},
		Logger: log,
	}, func(ctx context.Context, run ledgerapi.RunHandle, job *river.Job[RefundArgs]) error {
		res, err := run.Once(ctx, "refund", map[string]any{"order": job.Args.Order, "cents": job.Args.Cents},
			func(ctx context.Context, c ledger.Call) (any, error) {
				// The provider call; pass c.IdempotencyKey if it takes one.
				return map[string]string{"refund_id": "re_" + job.Args.Order, "key": c.IdempotencyKey}, nil
			})
		if err := riverledger.Result("refund", res, err); err != nil {
			return err
		}
		done <- fmt.Sprintf("job %d: refund %s %s", job.ID, res.Status, res.Value)
		return nil
	})
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, worker)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: schema, Logger: log, Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Stop(stop)
	}()
	if _, err := client.Insert(ctx, RefundArgs{Order: "A-1001", Cents: 2500}, nil); err != nil {
		return err
	}
	select {
	case msg := <-done:
		fmt.Println(msg)
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("the job was not worked within 30 s")
	}
}
