package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// Documents the size of a scope holding one run and one effect entry.
var (
	benchClaim  = []byte(`{"v":1,"seq":1,"tokens":1,"runs":{"stripe:evt_1NfQ2vLkdIwHu7ix":{"token":1,"delivery":1,"mode":"independent","context_at":"2026-03-01T12:00:00.000Z","seen":0}},"entries":{"a3f9c2e1b4d5":{"intent":"deliver","run":"stripe:evt_1NfQ2vLkdIwHu7ix","state":"pending","attempt":1,"claimed_at":"2026-03-01T12:00:00.000Z","pending_ttl":10500000000,"redeliverable":true}}}`)
	benchSettle = []byte(`{"v":1,"seq":2,"tokens":1,"runs":{"stripe:evt_1NfQ2vLkdIwHu7ix":{"token":1,"delivery":1,"mode":"independent","context_at":"2026-03-01T12:00:00.000Z","seen":0}},"entries":{"a3f9c2e1b4d5":{"intent":"deliver","run":"stripe:evt_1NfQ2vLkdIwHu7ix","state":"committed","attempt":1,"claimed_at":"2026-03-01T12:00:00.000Z","settled_at":"2026-03-01T12:00:00.250Z","value":{"status":200}}}}`)
)

var benchGoroutines = []int{1, 16, 64}

// benchOp is one claim plus one settle on the scope it is given.
type benchOp struct {
	name string
	run  func(ctx context.Context, scope string, i int64) error
}

// benchOps sets up a table and returns the ways of doing one claim and one
// settle that the benchmarks compare:
//
//   - raw: two plain upserts of the same documents, no store logic at all;
//   - store: two Transacts, the store's share of a Once;
//   - ledger: a whole ledger.Once over the store;
//   - store-nocache: the store reading before every write;
//   - raw-forupdate: the other design, a transaction locking the row
//     before each write (four round trips where the store needs one).
func benchOps(b *testing.B) []benchOp {
	pool := newPool(b, testDSN(b), 64+4)
	table := newTable(b, pool)
	s := postgres.New(pool, postgres.Options{Table: table})
	uncached := postgres.New(pool, postgres.Options{Table: table, CacheSize: -1})
	l := ledger.New(s, ledger.Options{})

	schema, name, _ := strings.Cut(table, ".")
	t := pgx.Identifier{schema, name}.Sanitize()
	seq := strings.ReplaceAll(pgx.Identifier{schema, name + "_version_seq"}.Sanitize(), "'", "''")
	upsert := `INSERT INTO ` + t + ` (scope, doc, version, expires_at, review_at, updated_at)
VALUES ($1, $2, nextval('` + seq + `'), now() + $3::bigint * interval '1 microsecond', $4, now())
ON CONFLICT (scope) DO UPDATE SET doc = excluded.doc, version = excluded.version,
    expires_at = excluded.expires_at, review_at = excluded.review_at, updated_at = excluded.updated_at`
	const ttl = 7 * 24 * time.Hour

	lockedUpsert := func(ctx context.Context, scope string, doc []byte, review any) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var v int64
		if err := tx.QueryRow(ctx, "SELECT version FROM "+t+" WHERE scope = $1 FOR UPDATE", scope).Scan(&v); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, upsert, scope, doc, ttl.Microseconds(), review); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	transacts := func(s *postgres.Store) func(ctx context.Context, scope string, i int64) error {
		return func(ctx context.Context, scope string, i int64) error {
			review := time.Now().Add(15 * time.Minute)
			if err := s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
				if cur != nil {
					return nil, fmt.Errorf("claim on %s found %s", scope, cur)
				}
				return &ledger.Write{Doc: benchClaim, TTL: ttl, ReviewAt: review}, nil
			}); err != nil {
				return err
			}
			return s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
				if cur == nil {
					return nil, fmt.Errorf("settle on %s found nothing", scope)
				}
				return &ledger.Write{Doc: benchSettle, TTL: ttl}, nil
			})
		}
	}
	ops := []benchOp{
		{"raw", func(ctx context.Context, scope string, i int64) error {
			if _, err := pool.Exec(ctx, upsert, scope, benchClaim, ttl.Microseconds(), time.Now().Add(15*time.Minute)); err != nil {
				return err
			}
			_, err := pool.Exec(ctx, upsert, scope, benchSettle, ttl.Microseconds(), nil)
			return err
		}},
		{"store", transacts(s)},
		{"ledger", func(ctx context.Context, scope string, i int64) error {
			key := ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]any{"event": i}}
			res, err := l.Once(ctx, key, func(context.Context, ledger.Call) (any, error) {
				return map[string]any{"status": 200}, nil
			})
			if err == nil && res.Status != ledger.StatusExecuted {
				err = fmt.Errorf("once: %s %s", res.Status, res.Reason)
			}
			return err
		}},
		{"store-nocache", transacts(uncached)},
		{"raw-forupdate", func(ctx context.Context, scope string, i int64) error {
			if err := lockedUpsert(ctx, scope, benchClaim, time.Now().Add(15*time.Minute)); err != nil {
				return err
			}
			return lockedUpsert(ctx, scope, benchSettle, nil)
		}},
	}
	warm(b, pool)
	return ops
}

// BenchmarkClaimSettle times each way of doing a claim and a settle on a
// new scope at 1, 16 and 64 goroutines. Compare ops/s against raw at the
// same goroutine count; on a shared machine BenchmarkClaimSettleRatio's
// interleaved figures are steadier.
func BenchmarkClaimSettle(b *testing.B) {
	ops := benchOps(b)
	var run atomic.Int64 // fresh scopes for every timed loop
	for _, g := range benchGoroutines {
		for _, op := range ops {
			b.Run(fmt.Sprintf("%s/goroutines=%d", op.name, g), func(b *testing.B) {
				prefix := fmt.Sprintf("%s-%d-", op.name, run.Add(1))
				parallel(b, g, func(ctx context.Context, i int64) error {
					return op.run(ctx, prefix+fmt.Sprint(i), i)
				})
			})
		}
	}
}

// BenchmarkClaimSettleRatio measures the same operations in short windows
// taken in turn, many times over, so a change in the machine's load (fsync
// latency above all) weighs on every contender alike. It reports each
// one's throughput relative to raw, e.g. "store/raw" 0.95 means 95% of the
// plain statements' throughput. One iteration takes about 40 s; run it
// with -benchtime=1x.
func BenchmarkClaimSettleRatio(b *testing.B) {
	ops := benchOps(b)
	const (
		cycles = 12
		window = 200 * time.Millisecond
	)
	var run atomic.Int64
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			done := make([]int64, len(ops))
			spent := make([]time.Duration, len(ops))
			for range b.N * cycles {
				for k, op := range ops {
					prefix := fmt.Sprintf("%s-%d-", op.name, run.Add(1))
					n, d, err := during(g, window, func(ctx context.Context, i int64) error {
						return op.run(ctx, prefix+fmt.Sprint(i), i)
					})
					if err != nil {
						b.Fatalf("%s: %v", op.name, err)
					}
					done[k] += n
					spent[k] += d
				}
			}
			rate := func(k int) float64 { return float64(done[k]) / spent[k].Seconds() }
			b.ReportMetric(rate(0), "raw-ops/s")
			for k := 1; k < len(ops); k++ {
				b.ReportMetric(rate(k)/rate(0), ops[k].name+"/raw")
			}
		})
	}
}

// during runs op from exactly goroutines goroutines until window has
// passed, and returns how many operations finished and how long it took
// until the last one did.
func during(goroutines int, window time.Duration, op func(ctx context.Context, i int64) error) (int64, time.Duration, error) {
	ctx := context.Background()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		once sync.Once
		fail error
	)
	start := time.Now()
	end := start.Add(window)
	for range goroutines {
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := op(ctx, next.Add(1)); err != nil {
					once.Do(func() { fail = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return next.Load(), time.Since(start), fail
}

// warm opens every connection the pool may use before anything is timed:
// PostgreSQL starts a process per connection, and the first benchmark to
// need 64 of them would otherwise pay for all those starts.
func warm(b *testing.B, pool *pgxpool.Pool) {
	ctx := context.Background()
	conns := make([]*pgxpool.Conn, 0, pool.Config().MaxConns)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
}

// parallel runs b.N operations spread over exactly goroutines goroutines
// (RunParallel ties the count to GOMAXPROCS) and reports throughput.
func parallel(b *testing.B, goroutines int, op func(ctx context.Context, i int64) error) {
	ctx := context.Background()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		once sync.Once
		fail error
	)
	b.ResetTimer()
	for range goroutines {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := op(ctx, i); err != nil {
					once.Do(func() { fail = err })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if fail != nil {
		b.Fatal(fail)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
