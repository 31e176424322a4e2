package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ReadControl implements ledger.Store.
func (s *Store) ReadControl(ctx context.Context, name string) ([]byte, error) {
	var doc []byte
	err := s.pool.QueryRow(ctx, `SELECT doc FROM `+s.names.control+` WHERE name = $1`, name).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: read control record %q: %w", name, err)
	}
	return doc, nil
}

// TransactControl implements ledger.Store: the record's row is created
// empty if missing and locked, so concurrent writers of one name queue on
// it. Control records change rarely; no cache, no batching.
func (s *Store) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	wrap := func(err error) error { return fmt.Errorf("postgres store: control record %q: %w", name, err) }
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return wrap(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.names.control+` (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return wrap(err)
	}
	var cur []byte
	if err := tx.QueryRow(ctx, `SELECT doc FROM `+s.names.control+` WHERE name = $1 FOR UPDATE`, name).Scan(&cur); err != nil {
		return wrap(err)
	}
	rec, err := fn(cur)
	if err != nil || rec == nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.names.control+` SET doc = $2 WHERE name = $1`, name, rec); err != nil {
		return wrap(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return wrap(err)
	}
	return nil
}
