package postgres_test

import (
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// A table made before queued delivery (no due_at) gets the column from
// Migrate, and due listing works on it.
func TestMigrateAddsDueColumn(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	ctx := testContext(t)
	if _, err := pool.Exec(ctx, "ALTER TABLE "+quote(table)+" DROP COLUMN due_at"); err != nil {
		t.Fatal(err)
	}
	s := postgres.New(pool, postgres.Options{Table: table})
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	due := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	err := s.Transact(ctx, "old", func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(`{}`), TTL: time.Hour, DueAt: due}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ScopesDue(ctx, due, 10)
	if err != nil || len(got) != 1 || got[0] != "old" {
		t.Fatalf("scopes due on an upgraded table: %v, %v", got, err)
	}
}
