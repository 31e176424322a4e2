package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/stores/postgres"
)

// dsnVar names the environment variable holding the test database's URL.
const dsnVar = "REPLYONCE_TEST_POSTGRES"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testDSN returns the test database URL, skipping the test when it is not
// configured. A configured but unreachable server is a failure, reported
// by whoever connects first.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dsnVar)
	if dsn == "" {
		t.Skipf("%s is not set; set it to a PostgreSQL URL (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the PostgreSQL store tests", dsnVar)
	}
	return dsn
}

// newPool connects to dsn and closes the pool when the test ends.
func newPool(t testing.TB, dsn string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", dsnVar, err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("%s is set but PostgreSQL cannot be reached: %v", dsnVar, err)
	}
	return pool
}

// newTable creates a schema of its own for the calling test, so that tests
// and test packages running at the same time never share rows, and returns
// a migrated table name inside it. The schema is dropped at the end.
func newTable(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "replyonce_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	table := schema + "." + postgres.DefaultTable
	if err := postgres.New(pool, postgres.Options{Table: table}).Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return table
}

// setup is the usual start of a test: a pool, a fresh table and a store.
func setup(t testing.TB, opts postgres.Options) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t, testDSN(t), 0)
	opts.Table = newTable(t, pool)
	s := postgres.New(pool, opts)
	t.Cleanup(s.Close) // before the pool closes: cleanups run last first
	return s, pool
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
