package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/redis"
)

// openStore opens the configured store (stores.Open). close releases it;
// for Postgres it also runs the migration so a fresh database works on
// first start, and a Redis server's persistence is said in the log.
func (a *App) openStore(ctx context.Context, c config.Store, log *zap.Logger) (store ledger.Store, close func(), err error) {
	op, err := stores.Open(ctx, c, stores.Options{Clock: a.Clock})
	if err != nil {
		return nil, nil, err
	}
	if op.Redis != nil {
		sayPersistence(ctx, op.Redis, log)
	}
	return op.Store, op.Close, nil
}

// sayPersistence logs what a crash of the Redis server can lose of what
// the gateway acknowledges: a warning when a crash of the Redis process
// alone loses acknowledged events (appendonly off), a line at info when
// only a crash of its machine can, or when the settings cannot be read.
func sayPersistence(ctx context.Context, s *redis.Store, log *zap.Logger) {
	const how = "docs/durability.md says what each setting keeps"
	p, err := s.Persistence(ctx)
	switch {
	case err != nil:
		log.Info("store: could not read the Redis server's persistence settings (CONFIG GET is refused on many managed services); "+
			"check that appendonly is on", zap.String("see", how), zap.Error(err))
	case p.ProcessCrashLoses():
		log.Warn("store: Redis can lose acknowledged events: "+p.CrashLoses()+"; set appendonly yes (and appendfsync always to survive a crash of its machine)",
			zap.String("redis", p.Server), zap.Bool("appendonly", p.AppendOnly), zap.String("save", p.Save), zap.String("see", how))
	case p.CrashLoses() != "":
		log.Info("store: Redis persistence: "+p.CrashLoses(), zap.String("redis", p.Server), zap.String("appendfsync", p.AppendFsync),
			zap.String("see", how))
	}
}

func (a *App) migrate(ctx context.Context, args []string) error {
	cfg, _, err := a.configOnly("migrate", args)
	if err != nil {
		return err
	}
	if cfg.Store.Kind != "postgres" {
		fmt.Fprintf(a.Stdout, "store %s needs no migration\n", cfg.Store.Kind)
		return nil
	}
	pool, err := pgxpool.New(ctx, cfg.Store.URL)
	if err != nil {
		return fmt.Errorf("store.url: %w", err)
	}
	defer pool.Close()
	table := cfg.Store.Table
	if table == "" {
		table = postgres.DefaultTable
	}
	objects := postgres.SchemaObjects(table)
	before, err := existing(ctx, pool, objects)
	if err != nil {
		return err
	}
	if err := postgres.New(pool, postgres.Options{Table: table}).Migrate(ctx); err != nil {
		return err
	}
	var created []string
	for _, o := range objects {
		if !before[o.Name] {
			created = append(created, o.Kind+" "+o.Name)
		}
	}
	if len(created) == 0 {
		fmt.Fprintf(a.Stdout, "postgres: schema already up to date (table %s)\n", table)
		return nil
	}
	fmt.Fprintf(a.Stdout, "postgres: created %s\n", strings.Join(created, ", "))
	return nil
}

// existing reports which of the schema's objects are already there.
func existing(ctx context.Context, pool *pgxpool.Pool, objects []postgres.SchemaObject) (map[string]bool, error) {
	out := map[string]bool{}
	for _, o := range objects {
		var found bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", o.Name).Scan(&found); err != nil {
			return nil, fmt.Errorf("migrate: look for %s %s: %w", o.Kind, o.Name, err)
		}
		out[o.Name] = found
	}
	return out, nil
}
