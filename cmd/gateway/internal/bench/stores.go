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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores"
	"github.com/replyonce/gateway/stores/postgres"
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

// openStore opens the run's store with stores.Open, as serve does, in a
// place of its own (a fresh bolt directory, Postgres table or Redis key
// prefix), then adds what the bench measures of it.
func openStore(ctx context.Context, cfg Config) (*openedStore, error) {
	id := runID()
	sc := stores.Config{Kind: cfg.Store, Table: "replyonce_bench_" + id, Prefix: "replyonce-bench-" + id + ":"}
	dir := ""
	switch cfg.Store {
	case "postgres":
		sc.URL = cfg.PostgresDSN
	case "redis":
		sc.URL = cfg.RedisURL
	case "bolt":
		var err error
		if dir, err = os.MkdirTemp(cfg.Dir, "replyonce-bench-*"); err != nil {
			return nil, fmt.Errorf("bench: bolt directory: %w", err)
		}
		sc.Path = filepath.Join(dir, "ledger.db")
	}
	op, err := stores.Open(ctx, sc, stores.Options{Postgres: func(pc *pgxpool.Config) {
		// Durable whatever the server's default: every commit waits for
		// the WAL flush, as a ledger that answers 200 must.
		pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
		if cfg.PostgresPool > 0 {
			pc.MaxConns = int32(cfg.PostgresPool)
		}
	}})
	if err != nil {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("bench: %w", err)
	}
	switch {
	case op.Pool != nil:
		return measurePostgres(ctx, op, sc.Table)
	case op.Redis != nil:
		return measureRedis(ctx, op, sc.Prefix), nil
	case dir != "":
		// bolt.Options{} is what `serve` uses: fsync on every (batched) commit.
		size := func(context.Context) (int64, error) {
			fi, err := os.Stat(sc.Path)
			if err != nil {
				return 0, err
			}
			return fi.Size(), nil
		}
		return &openedStore{store: op.Store, notes: "fsync on every commit (concurrent writes share one), file in " + dir,
			close: func() { op.Close(); _ = os.RemoveAll(dir) }, size: size, sizeHow: "bolt file size"}, nil
	}
	return &openedStore{store: op.Store, close: op.Close, size: heapInUse, sizeHow: "Go heap in use after a GC (the whole process: a rough figure)"}, nil
}

// measurePostgres checks that the server keeps every commit, and reads
// its CPU when it runs on this host.
func measurePostgres(ctx context.Context, op *stores.Opened, table string) (*openedStore, error) {
	pool := op.Pool
	// The table goes before the pool closes with the store: the run is
	// over by then, so the store has nothing left to write.
	closeAll := func() { dropTable(pool, table); op.Close() }
	var syncCommit, fsync string
	if err := pool.QueryRow(ctx, "SELECT current_setting('synchronous_commit'), current_setting('fsync')").Scan(&syncCommit, &fsync); err != nil {
		closeAll()
		return nil, fmt.Errorf("bench: postgres settings: %w", err)
	}
	if syncCommit != "on" || fsync != "on" {
		closeAll()
		return nil, fmt.Errorf("bench: postgres must run with fsync and synchronous_commit on (have fsync=%s, synchronous_commit=%s)", fsync, syncCommit)
	}
	cpu, cpuNote := localPostgresCPU(ctx, pool, "/proc")
	notes := fmt.Sprintf("table %s, synchronous_commit=%s, fsync=%s, pool max %d conns, %s", table, syncCommit, fsync, pool.Config().MaxConns, cpuNote)
	size := func(ctx context.Context) (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass) + pg_total_relation_size($2::regclass)",
			pgx.Identifier{table}.Sanitize(), pgx.Identifier{table + "_blobs"}.Sanitize()).Scan(&n)
		return n, err
	}
	return &openedStore{store: op.Store, notes: notes, serverCPU: cpu, close: closeAll,
		size: size, sizeHow: "pg_total_relation_size of the table and its blobs table (indexes and TOAST included)"}, nil
}

// dropTable removes the run's tables (the scopes, their records and the
// control records; the version sequence goes with the table that owns
// it). It has its own deadline because it runs on the way out, possibly
// after the run's context was cancelled.
func dropTable(pool *pgxpool.Pool, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = pool.Exec(ctx, postgres.DropSQL(table))
}

// measureRedis notes the server's persistence and reads its CPU and the
// run's keys' memory.
func measureRedis(ctx context.Context, op *stores.Opened, prefix string) *openedStore {
	client := op.Redis.Client()
	notes := "key prefix " + prefix
	if c, ok := client.(*goredis.Client); ok {
		notes += fmt.Sprintf(", pool %d conns", c.Options().PoolSize)
	}
	if v, err := client.ConfigGet(ctx, "appendonly").Result(); err == nil {
		notes += ", appendonly=" + v["appendonly"]
		if w, err := client.ConfigGet(ctx, "appendfsync").Result(); err == nil && v["appendonly"] == "yes" {
			notes += " appendfsync=" + w["appendfsync"]
		}
	}
	notes += ", server CPU from INFO cpu"
	return &openedStore{store: op.Store, notes: notes, serverCPU: redisServerCPU(client),
		// The keys go first (the run is over): closing the store closes
		// its client.
		close:   func() { deleteKeys(client, prefix); op.Close() },
		size:    func(ctx context.Context) (int64, error) { return memoryUsage(ctx, client, prefix) },
		sizeHow: "sum of MEMORY USAGE (SAMPLES 0) over the run's keys"}
}

// deleteKeys removes every key under prefix. The scan is bounded: a run
// writes a few keys per event, and a Redis that keeps answering with more
// is not one this cleanup should chase forever.
func deleteKeys(client goredis.UniversalClient, prefix string) {
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
func memoryUsage(ctx context.Context, client goredis.UniversalClient, prefix string) (int64, error) {
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
