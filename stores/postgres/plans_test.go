package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// TestBlobWritesReadOnlyTheRecordsTheyName checks that a write of a long
// scope's blobs reads the records it puts, deletes or checks and no
// others, whatever plan PostgreSQL caches for it. A generic plan made
// while the table was small, or never analyzed, once took only the scope
// as the delete's index condition and read every record of the scope to
// find the few it deletes (issue #34): 10,000 per step on a long
// conversation. Here each statement runs as the store sends it, with a
// generic plan, on a table that has never been analyzed, and the server
// counts the rows it read.
func TestBlobWritesReadOnlyTheRecordsTheyName(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	s := postgres.New(pool, postgres.Options{Table: table})
	t.Cleanup(s.Close)
	ctx := testContext(t)
	const records = 3000
	const scope = "long"
	seed := map[string][]byte{}
	for i := range records {
		seed[fmt.Sprintf("r:%d", i)] = []byte("record")
	}
	if err := s.Transact(ctx, scope, func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(`{"n":0}`), Blobs: seed}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var version int64
	if err := pool.QueryRow(ctx, "SELECT version FROM "+table+" WHERE scope = $1", scope).Scan(&version); err != nil {
		t.Fatal(err)
	}
	// putAndDelete puts one record and deletes n of the seeded ones.
	putAndDelete := func(n int) map[string][]byte {
		m := map[string][]byte{"new": []byte("x")}
		for i := range n {
			m[fmt.Sprintf("r:%d", i)] = nil
		}
		return m
	}
	cases := []struct {
		name    string
		blobs   map[string][]byte
		deletes int
		absent  []string
	}{
		{"a put", putAndDelete(0), 0, nil},
		{"a put and a delete", putAndDelete(1), 1, nil},
		{"a put and four deletes", putAndDelete(4), 4, nil},
		// Past four, the names go as one array: a chunk of parked
		// events read back deletes its record and its 16 markers.
		{"a put and seventeen deletes", putAndDelete(17), 17, nil},
		{"two names checked, a put and seventeen deletes", putAndDelete(17), 17, []string{"x:1", "x:2"}},
		{"two names checked, a put and a delete", putAndDelete(1), 1, []string{"x:1", "x:2"}},
		{"four names checked, a put and two deletes", putAndDelete(2), 2, []string{"x:1", "x:2", "x:3", "x:4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
				t.Fatal(err)
			}
			// The counts of a session's transactions gather until the
			// server flushes them: take the write's as a difference.
			before := readCount(t, tx, table)
			sql, args := postgres.WriteStatement(s, scope, version, &ledger.Write{Doc: []byte(`{"n":1}`), Blobs: c.blobs, Absent: c.absent})
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			wrote := false
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				wrote = wrote || vals[0] != nil
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !wrote {
				t.Fatal("the write did not land")
			}
			read := readCount(t, tx, table) - before
			// Each name looked up may fetch its row; nothing else.
			if limit := int64(len(c.blobs) + len(c.absent)); read > limit {
				t.Errorf("the write read %d records of the scope's %d; it names %d", read, records, limit)
			}
			var left int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+table+"_blobs WHERE scope = $1 AND name LIKE 'r:%'", scope).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != records-c.deletes {
				t.Errorf("%d records left, want %d", left, records-c.deletes)
			}
		})
	}
}

// readCount is how many rows of table's blobs the transaction's session
// has read and not yet reported.
func readCount(t *testing.T, tx pgx.Tx, table string) int64 {
	t.Helper()
	var n int64
	if err := tx.QueryRow(context.Background(), `SELECT coalesce(sum(seq_tup_read), 0) + coalesce(sum(idx_tup_fetch), 0)
FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`, table+"_blobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
