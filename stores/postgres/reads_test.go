package postgres_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// Reads that meet share one statement, and each gets its own scope's row:
// a live one as it is, an expired or missing one as absent, two reads of
// one scope the same row.
func TestGroupedReadsAnswerEachItsOwnRow(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	mustTransact(t, s, "a", incr("1"))
	mustTransact(t, s, "b", incr("1"))
	mustTransact(t, s, "b", incr("2"))
	mustTransact(t, s, "expired", put(`{"n":7}`, -time.Second, time.Time{}))

	scopes := []string{"a", "b", "b", "expired", "missing"}
	release := postgres.HoldReads(s)
	var wg sync.WaitGroup
	docs := make([][]byte, len(scopes))
	errs := make([]error, len(scopes))
	for i, scope := range scopes {
		wg.Go(func() { docs[i], errs[i] = s.Read(testContext(t), scope) })
	}
	waitCount(t, "reads", len(scopes), func() int { return postgres.QueuedReads(s) })
	release()
	wg.Wait()
	if batches, reads := postgres.GroupedReads(s); batches != 1 || reads != int64(len(scopes)) {
		t.Fatalf("%d grouped statements carrying %d reads, want 1 carrying %d", batches, reads, len(scopes))
	}
	want := []int{1, 2, 2, 0, 0}
	for i, scope := range scopes {
		if errs[i] != nil {
			t.Fatalf("read %q: %v", scope, errs[i])
		}
		if c := decodeCounter(t, docs[i]); c.N != want[i] {
			t.Errorf("read %q = %s, want n=%d", scope, docs[i], want[i])
		}
		if want[i] == 0 && docs[i] != nil {
			t.Errorf("read %q = %s, want absent", scope, docs[i])
		}
	}
}

// A decision that writes nothing, made on a copy another process has since
// moved past, is checked by a read that may travel with others, and is
// made again on what that read found.
func TestGroupedReadChecksAReadOnlyDecision(t *testing.T) {
	s, pool := setup(t, postgres.Options{})
	other := postgres.New(pool, postgres.Options{Table: s.Table()})
	t.Cleanup(other.Close)
	mustTransact(t, s, "x", incr("1"))     // s remembers n=1
	mustTransact(t, other, "x", incr("2")) // the row is now n=2

	release := postgres.HoldReads(s)
	var seen []int
	var wg sync.WaitGroup
	var txErr, readErr error
	wg.Go(func() {
		txErr = s.Transact(testContext(t), "x", func(cur []byte) (*ledger.Write, error) {
			seen = append(seen, decodeCounter(t, cur).N)
			return nil, nil // read-only
		})
	})
	wg.Go(func() { _, readErr = s.Read(testContext(t), "y") })
	waitCount(t, "reads", 2, func() int { return postgres.QueuedReads(s) })
	release()
	wg.Wait()
	if txErr != nil || readErr != nil {
		t.Fatalf("transact: %v; read: %v", txErr, readErr)
	}
	if batches, reads := postgres.GroupedReads(s); batches != 1 || reads != 2 {
		t.Fatalf("%d grouped statements carrying %d reads, want 1 carrying 2", batches, reads)
	}
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("the decision saw n=%v, want the cached 1, then the row's 2", seen)
	}
}

// A grouped read that fails fails every read in its group, as a store
// error: none of them reads as an absent scope.
func TestGroupedReadFailureIsAnErrorForEveryRead(t *testing.T) {
	s, pool := setup(t, postgres.Options{})
	mustTransact(t, s, "a", incr("1"))
	release := postgres.HoldReads(s)
	var wg sync.WaitGroup
	scopes := []string{"a", "b", "c"}
	docs := make([][]byte, len(scopes))
	errs := make([]error, len(scopes))
	for i, scope := range scopes {
		wg.Go(func() { docs[i], errs[i] = s.Read(testContext(t), scope) })
	}
	waitCount(t, "reads", len(scopes), func() int { return postgres.QueuedReads(s) })
	if _, err := pool.Exec(testContext(t), `ALTER TABLE `+s.Table()+` RENAME TO gone_`+time.Now().Format("150405")); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	for i, scope := range scopes {
		if errs[i] == nil {
			t.Errorf("read %q = %q with the table gone, want an error", scope, docs[i])
		}
	}
}

// After Close, reads still work, each alone.
func TestReadsAfterClose(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	mustTransact(t, s, "a", incr("1"))
	s.Close()
	if c := decodeCounter(t, mustRead(t, s, "a")); c.N != 1 {
		t.Fatalf("read after Close: n=%d, want 1", c.N)
	}
}

// groupedRead sends scopes' reads as one grouped statement (HoldReads
// queues them all before any is sent) and returns what each read found.
func groupedRead(t *testing.T, s *postgres.Store, scopes []string) [][]byte {
	t.Helper()
	release := postgres.HoldReads(s)
	docs := make([][]byte, len(scopes))
	errs := make([]error, len(scopes))
	var wg sync.WaitGroup
	for i, scope := range scopes {
		wg.Go(func() { docs[i], errs[i] = s.Read(testContext(t), scope) })
	}
	waitCount(t, "reads", len(scopes), func() int { return postgres.QueuedReads(s) })
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("read %q: %v", scopes[i], err)
		}
	}
	return docs
}

// A grouped read goes in the smallest statement that holds it (2, 4, 8,
// 16 or 32 scopes, the last scope repeated in the places left), and every
// size up to MaxBatch answers each read with its own row.
func TestGroupedReadsOfEverySize(t *testing.T) {
	s, _ := setup(t, postgres.Options{MaxBatch: 32})
	for i := range 32 {
		for k := range i%3 + 1 {
			mustTransact(t, s, "s"+strconv.Itoa(i), incr(strconv.Itoa(k)))
		}
	}
	for _, size := range []int{2, 3, 5, 8, 9, 16, 17, 31, 32} {
		scopes := make([]string, size)
		for i := range scopes {
			switch {
			case i%4 == 3:
				scopes[i] = "missing" + strconv.Itoa(i)
			case i%5 == 4:
				scopes[i] = scopes[i-1] // a scope read twice in one batch
			default:
				scopes[i] = "s" + strconv.Itoa(i)
			}
		}
		batches, _ := postgres.GroupedReads(s)
		docs := groupedRead(t, s, scopes)
		if after, _ := postgres.GroupedReads(s); after != batches+1 {
			t.Fatalf("%d reads went in %d statements, want 1", size, after-batches)
		}
		for i, scope := range scopes {
			n, err := strconv.Atoi(strings.TrimPrefix(scope, "s"))
			if err != nil { // a missing scope
				if docs[i] != nil {
					t.Errorf("%d reads: %q read as %s, want absent", size, scope, docs[i])
				}
				continue
			}
			if c := decodeCounter(t, docs[i]); c.N != n%3+1 {
				t.Errorf("%d reads: %q read as %s, want n=%d", size, scope, docs[i], n%3+1)
			}
		}
	}
}

// The grouped read keeps a generic plan. PostgreSQL plans a prepared
// statement anew for its first five executions on a session, then keeps a
// generic plan only if it looks as cheap as those; with the scopes in one
// array parameter (scope = ANY($1)) it never did, and every grouped read
// was planned again (storecost: 1.04 plans per call, issue #29).
func TestGroupedReadKeepsItsPlan(t *testing.T) {
	pool := newPool(t, testDSN(t), 2)
	table := newTable(t, pool)
	s := postgres.New(pool, postgres.Options{Table: table})
	t.Cleanup(s.Close)
	// Enough rows, analyzed, that a plan reads the primary key's index, as
	// on a gateway's table: on a table of a few rows every plan scans it
	// and a generic one looks as cheap as any.
	quoted := pgx.Identifier(strings.Split(table, ".")).Sanitize()
	if _, err := pool.Exec(testContext(t), `INSERT INTO `+quoted+` (scope, doc, version)
		SELECT 'filler-' || g, '{"n":1}', g FROM generate_series(1, 5000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(testContext(t), `ANALYZE `+quoted); err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"a", "b", "c"} {
		mustTransact(t, s, scope, incr("1"))
	}
	const reads = 20
	for range reads {
		groupedRead(t, s, []string{"a", "b", "c"})
	}
	// Both of the pool's sessions, held at once, and what each prepared
	// for the grouped read (the single-scope read starts "SELECT version").
	var executed, custom, statements int64
	ctx := testContext(t)
	for range 2 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		rows, err := c.Query(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'SELECT scope, version, doc%'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var g, cu int64
			if err := rows.Scan(&g, &cu); err != nil {
				t.Fatal(err)
			}
			executed, custom, statements = executed+g+cu, custom+cu, statements+1
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if executed < reads {
		t.Fatalf("the sessions prepared the grouped read for %d executions, want %d", executed, reads)
	}
	if custom > 5*statements {
		t.Fatalf("%d of %d grouped reads were planned anew (%d prepared statements), want at most five per statement", custom, executed, statements)
	}
}
