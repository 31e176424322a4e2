package postgres_test

import (
	"strings"
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

// A table made before the received index (no received_at) gets the column
// and its index from Migrate, and the newest-first listing works on it.
func TestMigrateAddsReceivedColumn(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	ctx := testContext(t)
	if _, err := pool.Exec(ctx, "ALTER TABLE "+quote(table)+" DROP COLUMN received_at"); err != nil {
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
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	err := s.Transact(ctx, "old", func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(`{}`), TTL: time.Hour, ReceivedAt: at}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ScopesReceived(ctx, ledger.ScopeAt{}, 10)
	if err != nil || len(got) != 1 || got[0].Scope != "old" || !got[0].At.Equal(at) {
		t.Fatalf("scopes received on an upgraded table: %v, %v", got, err)
	}
	schema, name, _ := strings.Cut(table, ".")
	var idx int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = $2", schema, name+"_received_idx").Scan(&idx); err != nil || idx != 1 {
		t.Fatalf("received index after migrate: %d, %v", idx, err)
	}
}
