package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// upgradedStore is a store on a table made by an older build that lacked
// column, after Migrate ran twice (it must be idempotent).
func upgradedStore(t *testing.T, ctx context.Context, column string) (*postgres.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	if _, err := pool.Exec(ctx, "ALTER TABLE "+quote(table)+" DROP COLUMN "+column); err != nil {
		t.Fatal(err)
	}
	s := postgres.New(pool, postgres.Options{Table: table})
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	return s, pool, table
}

// A table made before queued delivery (no due_at) gets the column from
// Migrate, and due listing works on it.
func TestMigrateAddsDueColumn(t *testing.T) {
	ctx := testContext(t)
	s, _, _ := upgradedStore(t, ctx, "due_at")
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
	ctx := testContext(t)
	s, pool, table := upgradedStore(t, ctx, "received_at")
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

// A blobs table made with the foreign key of older versions loses it on
// Migrate: each blob insert no longer locks the scope row (issue #29), and
// blobs still go with their row.
func TestMigrateDropsBlobsForeignKey(t *testing.T) {
	ctx := testContext(t)
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	if _, err := pool.Exec(ctx, "ALTER TABLE "+quote(table+"_blobs")+" ADD FOREIGN KEY (scope) REFERENCES "+quote(table)+" (scope) ON DELETE CASCADE"); err != nil {
		t.Fatal(err)
	}
	foreignKeys := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'f'", quote(table+"_blobs")).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if foreignKeys() != 1 {
		t.Fatal("the old foreign key was not made")
	}
	s := postgres.New(pool, postgres.Options{Table: table})
	t.Cleanup(s.Close)
	for range 2 { // idempotent
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := foreignKeys(); n != 0 {
		t.Fatalf("%d foreign keys left on the blobs table after Migrate", n)
	}
	err := s.Transact(ctx, "old", func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(`{}`), TTL: time.Hour, Blobs: map[string][]byte{"e:1": []byte("body")}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadBlob(ctx, "old", "e:1"); err != nil || string(b) != "body" {
		t.Fatalf("blob on the migrated table: %q, %v", b, err)
	}
}

// Documents are compressed with lz4 where the server has it (PostgreSQL
// 14 and later, built with lz4, as this one is): a queued event's document
// carries its body, and pglz, the default, made compressing it most of the
// statement's time (issue #29). A table made with the default gets lz4 on
// Migrate.
func TestMigrateCompressesDocumentsWithLZ4(t *testing.T) {
	ctx := testContext(t)
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	compression := func() string {
		var c string
		if err := pool.QueryRow(ctx, "SELECT attcompression::text FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'doc'", quote(table)).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := compression(); c != "l" {
		t.Fatalf("a new table compresses documents with %q, want l (lz4)", c)
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE "+quote(table)+" ALTER COLUMN doc SET COMPRESSION pglz"); err != nil {
		t.Fatal(err)
	}
	s := postgres.New(pool, postgres.Options{Table: table})
	t.Cleanup(s.Close)
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c := compression(); c != "l" {
		t.Fatalf("an older table compresses documents with %q after Migrate, want l (lz4)", c)
	}
}
