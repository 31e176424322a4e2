package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// controlKey names a control record's key: the prefix, then "control:",
// with no hash tag, where every scope's key carries one ("{bucket}:s:"), so
// no scope maps onto it.
func (s *Store) controlKey(name string) string { return s.prefix + "control:" + name }

// ReadControl implements ledger.Store.
func (s *Store) ReadControl(ctx context.Context, name string) ([]byte, error) {
	b, err := s.client.Get(ctx, s.controlKey(name)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redis store: read control record %q: %w", name, err)
	}
	return b, nil
}

// TransactControl implements ledger.Store with WATCH and MULTI on the one
// key: a write that lost the race to another runs fn again on the winner's
// record, up to Options.MaxRetries times.
func (s *Store) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	key := s.controlKey(name)
	for conflicts := 0; ; conflicts++ {
		var fnErr error
		err := s.client.Watch(ctx, func(tx *goredis.Tx) error {
			cur, err := tx.Get(ctx, key).Bytes()
			switch {
			case errors.Is(err, goredis.Nil):
				cur = nil
			case err != nil:
				return err
			}
			rec, err := fn(cur)
			if err != nil || rec == nil {
				fnErr = err
				return nil
			}
			_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.Set(ctx, key, rec, 0)
				return nil
			})
			return err
		}, key)
		switch {
		case errors.Is(err, goredis.TxFailedErr):
			if conflicts >= s.maxRetries {
				return &ContentionError{Scope: "control:" + name, Conflicts: conflicts + 1}
			}
			continue
		case err != nil:
			return fmt.Errorf("redis store: control record %q: %w", name, err)
		}
		return fnErr
	}
}
