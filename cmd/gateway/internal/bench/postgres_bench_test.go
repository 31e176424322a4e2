package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkPostgresCommitShapes measures what group commit could buy the
// Postgres store, on the real server with synchronous_commit on: 64
// goroutines writing one-row documents the way the store writes them
// today (one autocommitted compare-and-set statement per write, so one WAL
// flush each), against the same rows written 32 to a statement (one flush
// for 32). The metric to read is rows/s; the gateway needs two writes per
// event (claim, settle).
func BenchmarkPostgresCommitShapes(b *testing.B) {
	dsn := os.Getenv("REPLYONCE_TEST_POSTGRES")
	if dsn == "" {
		b.Skip("REPLYONCE_TEST_POSTGRES is not set")
	}
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pc.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	table := pgx.Identifier{"replyonce_bench_commit_" + runID()}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (scope text PRIMARY KEY, doc json NOT NULL, version bigint NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	defer func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+table) }()
	doc := `{"v":1,"seq":1,"runs":{},"entries":{}}`
	var seq atomic.Int64

	for _, batch := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("rows-per-commit=%d", batch), func(b *testing.B) {
			insert := "INSERT INTO " + table + " (scope, doc, version) SELECT s, $2::json, 1 FROM unnest($1::text[]) AS s ON CONFLICT (scope) DO NOTHING"
			if batch == 1 {
				insert = "INSERT INTO " + table + " (scope, doc, version) VALUES ($1, $2, 1) ON CONFLICT (scope) DO NOTHING"
			}
			b.SetParallelism(32) // 64 writers on 2 CPUs, as the gateway at 64 senders
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				scopes := make([]string, batch)
				for pb.Next() {
					for i := range scopes {
						scopes[i] = "s" + strconv.FormatInt(seq.Add(1), 10)
					}
					var err error
					if batch == 1 {
						_, err = pool.Exec(ctx, insert, scopes[0], doc)
					} else {
						_, err = pool.Exec(ctx, insert, scopes, doc)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
