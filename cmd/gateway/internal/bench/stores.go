package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// openedStore is a store made for one run, and how to clean up after it:
// close removes whatever the run created (the bolt file, the Postgres table,
// the Redis keys), so runs never see each other's events.
type openedStore struct {
	store ledger.Store
	notes string
	close func()
	// serverCPU, for a store with a server of its own, reads that server's
	// CPU so far; nil when the store lives in this process or the server's
	// CPU cannot be read from here.
	serverCPU serverCPU
	// size, when set, is what the store holds for this run, in bytes, and
	// how that was measured (the backlog pass reports bytes per event).
	size    func(ctx context.Context) (int64, error)
	sizeHow string
}

func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func openStore(ctx context.Context, cfg Config) (*openedStore, error) {
	switch cfg.Store {
	case "memory":
		return &openedStore{store: memory.New(nil), close: func() {}, size: heapInUse, sizeHow: "Go heap in use after a GC (the whole process: a rough figure)"}, nil
	case "bolt":
		return openBolt(cfg)
	case "postgres":
		return openPostgres(ctx, cfg)
	case "redis":
		return openRedis(ctx, cfg)
	}
	return nil, fmt.Errorf("bench: store %q is not supported", cfg.Store)
}

func openBolt(cfg Config) (*openedStore, error) {
	dir, err := os.MkdirTemp(cfg.Dir, "replyonce-bench-*")
	if err != nil {
		return nil, fmt.Errorf("bench: bolt directory: %w", err)
	}
	// bolt.Options{} is what `serve` uses: fsync on every (batched) commit.
	s, err := bolt.Open(filepath.Join(dir, "ledger.db"), bolt.Options{})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	path := filepath.Join(dir, "ledger.db")
	size := func(context.Context) (int64, error) {
		fi, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	return &openedStore{store: s, notes: "fsync on every commit (concurrent writes share one), file in " + dir,
		close: func() { _ = s.Close(); _ = os.RemoveAll(dir) }, size: size, sizeHow: "bolt file size"}, nil
}

func openPostgres(ctx context.Context, cfg Config) (*openedStore, error) {
	pc, err := pgxpool.ParseConfig(cfg.PostgresDSN)
	if err != nil {
		return nil, fmt.Errorf("bench: postgres DSN: %w", err)
	}
	// Durable whatever the server's default: every commit waits for the
	// WAL flush, as a ledger that answers 200 must.
	pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	switch {
	case cfg.PostgresPool > 0:
		pc.MaxConns = int32(cfg.PostgresPool)
	case !strings.Contains(cfg.PostgresDSN, "pool_max_conns"):
		pc.MaxConns = 32 // what serve uses when the DSN does not say
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("bench: postgres: %w", err)
	}
	table := "replyonce_bench_" + runID()
	s := postgres.New(pool, postgres.Options{Table: table})
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		pool.Close()
		return nil, err
	}
	var syncCommit, fsync string
	if err := pool.QueryRow(ctx, "SELECT current_setting('synchronous_commit'), current_setting('fsync')").Scan(&syncCommit, &fsync); err != nil {
		s.Close()
		dropTable(pool, table)
		pool.Close()
		return nil, fmt.Errorf("bench: postgres settings: %w", err)
	}
	if syncCommit != "on" || fsync != "on" {
		s.Close()
		dropTable(pool, table)
		pool.Close()
		return nil, fmt.Errorf("bench: postgres must run with fsync and synchronous_commit on (have fsync=%s, synchronous_commit=%s)", fsync, syncCommit)
	}
	cpu, cpuNote := localPostgresCPU(ctx, pool, "/proc")
	notes := fmt.Sprintf("table %s, synchronous_commit=%s, fsync=%s, pool max %d conns, %s", table, syncCommit, fsync, pc.MaxConns, cpuNote)
	size := func(ctx context.Context) (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass) + pg_total_relation_size($2::regclass)",
			pgx.Identifier{table}.Sanitize(), pgx.Identifier{table + "_blobs"}.Sanitize()).Scan(&n)
		return n, err
	}
	return &openedStore{store: s, notes: notes, serverCPU: cpu, close: func() { s.Close(); dropTable(pool, table); pool.Close() },
		size: size, sizeHow: "pg_total_relation_size of the table and its blobs table (indexes and TOAST included)"}, nil
}

// dropTable removes the run's table; its version sequence is owned by the
// table and goes with it. It has its own deadline because it runs on the
// way out, possibly after the run's context was cancelled.
func dropTable(pool *pgxpool.Pool, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()+" CASCADE")
}

func openRedis(ctx context.Context, cfg Config) (*openedStore, error) {
	opts, err := goredis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("bench: redis URL: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	if !strings.Contains(cfg.RedisURL, "pool_size") {
		// What redis.Open gives a URL without pool_size: one connection
		// per concurrent request.
		opts.PoolSize = max(64, 10*runtime.GOMAXPROCS(0))
	}
	client := goredis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("bench: redis ping %s: %w", opts.Addr, err)
	}
	prefix := "replyonce-bench-" + runID() + ":"
	s := redis.New(client, redis.Options{KeyPrefix: prefix})
	notes := fmt.Sprintf("key prefix %s, pool %d conns", prefix, opts.PoolSize)
	if v, err := client.ConfigGet(ctx, "appendonly").Result(); err == nil {
		notes += ", appendonly=" + v["appendonly"]
		if w, err := client.ConfigGet(ctx, "appendfsync").Result(); err == nil && v["appendonly"] == "yes" {
			notes += " appendfsync=" + w["appendfsync"]
		}
	}
	notes += ", server CPU from INFO cpu"
	return &openedStore{store: s, notes: notes, serverCPU: redisServerCPU(client),
		close:   func() { _ = s.Close(); deleteKeys(client, prefix); _ = client.Close() },
		size:    func(ctx context.Context) (int64, error) { return memoryUsage(ctx, client, prefix) },
		sizeHow: "sum of MEMORY USAGE (SAMPLES 0) over the run's keys"}, nil
}

// deleteKeys removes every key under prefix. The scan is bounded: a run
// writes a few keys per event, and a Redis that keeps answering with more
// is not one this cleanup should chase forever.
func deleteKeys(client *goredis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for range 100000 {
		keys, next, err := client.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return
		}
		if len(keys) > 0 {
			if err := client.Unlink(ctx, keys...).Err(); err != nil && !errors.Is(err, goredis.Nil) {
				return
			}
		}
		if next == 0 {
			return
		}
		cursor = next
	}
}

// memoryUsage sums MEMORY USAGE over every key under prefix: what this
// run's keys cost the Redis server, without looking at anyone else's.
func memoryUsage(ctx context.Context, client *goredis.Client, prefix string) (int64, error) {
	var total int64
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return 0, err
		}
		pipe := client.Pipeline()
		cmds := make([]*goredis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		if len(keys) > 0 {
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return 0, err
			}
		}
		for _, c := range cmds {
			total += c.Val()
		}
		if next == 0 {
			return total, nil
		}
		cursor = next
	}
}

func heapInUse(context.Context) (int64, error) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc), nil
}
