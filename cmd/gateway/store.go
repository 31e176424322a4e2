package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/redis"
)

// openStore opens the configured store. close releases it; for Postgres it
// also runs the migration so a fresh database works on first start.
func (a *App) openStore(ctx context.Context, c config.Store) (store ledger.Store, close func(), err error) {
	switch c.Kind {
	case "memory":
		return memory.New(a.Clock), func() {}, nil
	case "bolt":
		if dir := filepath.Dir(c.Path); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, nil, fmt.Errorf("store.path: %w", err)
			}
		}
		s, err := bolt.Open(c.Path, bolt.Options{})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	case "postgres":
		pcfg, err := pgxpool.ParseConfig(c.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("store.url: %w", err)
		}
		if !strings.Contains(c.URL, "pool_max_conns") {
			// pgx's default, max(4, CPUs), starves a gateway whose every
			// request waits on a commit; pool_max_conns in the URL wins.
			pcfg.MaxConns = 32
		}
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, nil, fmt.Errorf("store.url: %w", err)
		}
		s := postgres.New(pool, postgres.Options{})
		if err := s.Migrate(ctx); err != nil {
			pool.Close()
			return nil, nil, err
		}
		return s, func() { s.Close(); pool.Close() }, nil
	case "redis":
		s, err := redis.Open(ctx, c.URL, redis.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("store.url: %w", err)
		}
		return s, func() { _ = s.Close() }, nil
	}
	return nil, nil, fmt.Errorf("store.kind: %q is not supported", c.Kind)
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
	_, closeStore, err := a.openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	closeStore()
	fmt.Fprintln(a.Stdout, "postgres schema is up to date")
	return nil
}
