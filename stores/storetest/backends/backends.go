// Package backends opens every ledger store for tests outside stores/ that
// must hold on each of them (the gateway's replay refusal, the dispatcher
// with a corrupt control record): memory, bolt in a temporary directory,
// and PostgreSQL and Redis on the servers the test environment names
// (REPLYONCE_TEST_POSTGRES, REPLYONCE_TEST_REDIS), each on a table schema
// or key prefix of its own, removed when the test ends.
//
// A server that is not configured leaves its store out with a log line,
// except in CI (CI set), where that is a failure: there every store runs.
package backends

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/redis"
)

// Backend is one kind of store.
type Backend struct {
	Name string
	// Open returns a new, empty store, and a function that opens another
	// handle on the same data (another gateway process's Store, with its
	// own caches), or nil when the kind cannot be shared (memory and bolt
	// hand back the same store).
	Open func(t *testing.T) (s ledger.Store, another func() ledger.Store)
}

// Names of the environment variables that point the tests at servers.
const (
	PostgresVar = "REPLYONCE_TEST_POSTGRES"
	RedisVar    = "REPLYONCE_TEST_REDIS"
)

// All returns every backend the environment offers (see the package doc).
func All(t *testing.T) []Backend {
	t.Helper()
	out := []Backend{
		{Name: "memory", Open: func(t *testing.T) (ledger.Store, func() ledger.Store) {
			s := memory.New(nil)
			return s, func() ledger.Store { return s }
		}},
		{Name: "bolt", Open: func(t *testing.T) (ledger.Store, func() ledger.Store) {
			s, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s, func() ledger.Store { return s }
		}},
	}
	if dsn := configured(t, PostgresVar); dsn != "" {
		out = append(out, Backend{Name: "postgres", Open: func(t *testing.T) (ledger.Store, func() ledger.Store) { return openPostgres(t, dsn) }})
	}
	if url := configured(t, RedisVar); url != "" {
		out = append(out, Backend{Name: "redis", Open: func(t *testing.T) (ledger.Store, func() ledger.Store) { return openRedis(t, url) }})
	}
	return out
}

func configured(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: in CI every store runs", name)
		}
		t.Logf("%s is not set: that store is left out", name)
	}
	return v
}

func suffix() string { return fmt.Sprintf("%016x", rand.Uint64()) }

func openPostgres(t *testing.T, dsn string) (ledger.Store, func() ledger.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("%s: %v", PostgresVar, err)
	}
	t.Cleanup(pool.Close)
	schema := "replyonce_test_" + suffix()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("%s is set but PostgreSQL cannot be used: %v", PostgresVar, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	table := schema + "." + postgres.DefaultTable
	open := func() ledger.Store {
		s := postgres.New(pool, postgres.Options{Table: table})
		t.Cleanup(s.Close)
		return s
	}
	s := open()
	if err := s.(*postgres.Store).Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s, open
}

func openRedis(t *testing.T, url string) (ledger.Store, func() ledger.Store) {
	t.Helper()
	o, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s: %v", RedisVar, err)
	}
	o.ContextTimeoutEnabled = true
	c := goredis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s is set but Redis does not answer: %v", RedisVar, err)
	}
	prefix := "replyonce-test:" + suffix() + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Unlink(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleanup %s: %v", prefix, err)
		}
	})
	open := func() ledger.Store {
		s := redis.New(c, redis.Options{KeyPrefix: prefix})
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return open(), open
}
