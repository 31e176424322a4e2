package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// counter is the document the concurrency tests increment. IDs, when used,
// makes an increment idempotent: an operation retried after an ambiguous
// failure finds its own id and writes nothing, as the ledger does with
// effect keys.
type counter struct {
	N   int             `json:"n"`
	IDs map[string]bool `json:"ids,omitempty"`
}

func decodeCounter(t testing.TB, doc []byte) counter {
	t.Helper()
	var c counter
	if doc == nil {
		return c
	}
	if err := json.Unmarshal(doc, &c); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	return c
}

// incr returns a Transact function adding one to the counter. With a
// non-empty id it adds only if that id has not been counted yet.
func incr(id string) func([]byte) (*ledger.Write, error) {
	return func(cur []byte) (*ledger.Write, error) {
		var c counter
		if cur != nil {
			if err := json.Unmarshal(cur, &c); err != nil {
				return nil, err
			}
		}
		if id != "" {
			if c.IDs[id] {
				return nil, nil
			}
			if c.IDs == nil {
				c.IDs = map[string]bool{}
			}
			c.IDs[id] = true
		}
		c.N++
		doc, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		return &ledger.Write{Doc: doc}, nil
	}
}

func put(doc string, ttl time.Duration, review time.Time) func([]byte) (*ledger.Write, error) {
	return func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(doc), TTL: ttl, ReviewAt: review}, nil
	}
}

func mustTransact(t testing.TB, s *postgres.Store, scope string, fn func([]byte) (*ledger.Write, error)) {
	t.Helper()
	if err := s.Transact(testContext(t), scope, fn); err != nil {
		t.Fatalf("transact %q: %v", scope, err)
	}
}

func mustRead(t testing.TB, s *postgres.Store, scope string) []byte {
	t.Helper()
	doc, err := s.Read(testContext(t), scope)
	if err != nil {
		t.Fatalf("read %q: %v", scope, err)
	}
	return doc
}

func TestSchemaSQL(t *testing.T) {
	sql := postgres.SchemaSQL("")
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "replyonce_scopes"`,
		`doc        json        NOT NULL`,
		`"replyonce_scopes_review_idx" ON "replyonce_scopes" (review_at, scope) WHERE review_at IS NOT NULL`,
		`CREATE SEQUENCE IF NOT EXISTS "replyonce_scopes_version_seq"`,
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("SchemaSQL(\"\") lacks %q:\n%s", want, sql)
		}
	}
	sql = postgres.SchemaSQL(`ops.we"ird`)
	if !strings.Contains(sql, `"ops"."we""ird"`) || !strings.Contains(sql, `"ops"."we""ird_version_seq"`) {
		t.Errorf("schema-qualified, quoted name not handled:\n%s", sql)
	}
}

// TestSchemaObjectsAndDropSQLCoverTheSchema checks that SchemaObjects
// names every relation Migrate makes (gateway migrate reports what it
// created from it) and that DropSQL leaves none of them behind.
func TestSchemaObjectsAndDropSQLCoverTheSchema(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool) // migrated, in a schema of its own
	ctx := testContext(t)
	schema := table[:strings.IndexByte(table, '.')]
	relations := func() []string {
		rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'S', 'i') AND c.relname NOT LIKE '%_pkey' ORDER BY 1`, schema)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	made := relations()
	listed := map[string]bool{}
	for _, o := range postgres.SchemaObjects(table) {
		name := o.Name[strings.LastIndexByte(o.Name, '.')+1:]
		listed[strings.Trim(name, `"`)] = true
	}
	for _, name := range made {
		if !listed[name] {
			t.Errorf("Migrate made %s, which SchemaObjects does not list (it lists %v)", name, listed)
		}
	}
	if _, err := pool.Exec(ctx, postgres.DropSQL(table)); err != nil {
		t.Fatal(err)
	}
	if left := relations(); len(left) > 0 {
		t.Errorf("DropSQL left %v", left)
	}
}

func TestTransactCreatesThenUpdatesByteForByte(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	// Odd spacing and key order: jsonb would normalise both away.
	first := `{"z": 1,   "a": [1, 2], "u": "\u00e9"}`
	var saw []byte
	mustTransact(t, s, "conv-1", func(cur []byte) (*ledger.Write, error) {
		if cur != nil {
			t.Errorf("new scope: fn got %q, want nil", cur)
		}
		return &ledger.Write{Doc: []byte(first)}, nil
	})
	if got := mustRead(t, s, "conv-1"); string(got) != first {
		t.Fatalf("read %q, want %q", got, first)
	}
	second := `{"z":2}`
	mustTransact(t, s, "conv-1", func(cur []byte) (*ledger.Write, error) {
		saw = cur
		return &ledger.Write{Doc: []byte(second)}, nil
	})
	if string(saw) != first {
		t.Fatalf("fn got %q, want %q", saw, first)
	}
	// A second store has nothing cached, so it reads the row.
	other := postgres.New(secondPool(t), postgres.Options{Table: s.Table()})
	mustTransact(t, other, "conv-1", func(cur []byte) (*ledger.Write, error) {
		saw = cur
		return nil, nil
	})
	if string(saw) != second {
		t.Fatalf("second store: fn got %q, want %q", saw, second)
	}
	if got := mustRead(t, s, "conv-2"); got != nil {
		t.Fatalf("read of a missing scope = %q, want nil", got)
	}
}

// secondPool opens another pool on the test database, for a second Store
// that shares nothing with the first but the table, as another process.
func secondPool(t testing.TB) *pgxpool.Pool {
	return newPool(t, testDSN(t), 0)
}

func TestFnErrorWritesNothing(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	boom := errors.New("boom")
	for _, scope := range []string{"absent", "present"} {
		if scope == "present" {
			mustTransact(t, s, scope, put(`{"v":1}`, 0, time.Time{}))
		}
		err := s.Transact(testContext(t), scope, func([]byte) (*ledger.Write, error) {
			return nil, fmt.Errorf("deciding: %w", boom)
		})
		if !errors.Is(err, boom) {
			t.Fatalf("%s: err = %v, want it to wrap boom", scope, err)
		}
		if strings.Contains(err.Error(), "postgres store") {
			t.Errorf("%s: fn's error was wrapped by the store: %v", scope, err)
		}
	}
	if got := mustRead(t, s, "absent"); got != nil {
		t.Errorf("absent scope written: %q", got)
	}
	if got := mustRead(t, s, "present"); string(got) != `{"v":1}` {
		t.Errorf("present scope = %q, want unchanged", got)
	}
}

func TestNilWriteWritesNothing(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	calls := 0
	mustTransact(t, s, "a", func(cur []byte) (*ledger.Write, error) {
		calls++
		return nil, nil
	})
	if calls != 1 {
		t.Errorf("fn called %d times for a confirmed absence, want 1", calls)
	}
	if got := mustRead(t, s, "a"); got != nil {
		t.Fatalf("nil write created %q", got)
	}
	mustTransact(t, s, "a", put(`{"v":1}`, 0, time.Time{}))
	mustTransact(t, s, "a", func([]byte) (*ledger.Write, error) { return nil, nil })
	if got := mustRead(t, s, "a"); string(got) != `{"v":1}` {
		t.Fatalf("after nil write: %q", got)
	}
}

func TestRejectsBadWrites(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	for name, doc := range map[string]string{"empty": "", "not json": `{"a":`} {
		err := s.Transact(testContext(t), "bad", put(doc, 0, time.Time{}))
		if err == nil {
			t.Errorf("%s document accepted", name)
		}
	}
	if got := mustRead(t, s, "bad"); got != nil {
		t.Fatalf("bad write stored %q", got)
	}
}

// A read-only decision made on a cached document must not stand when
// another process has moved the scope on: a stale "pending" would hide a
// newer "committed".
func TestStaleCacheIsVerifiedBeforeReadOnlyDecision(t *testing.T) {
	a, _ := setup(t, postgres.Options{})
	b := postgres.New(secondPool(t), postgres.Options{Table: a.Table()})
	mustTransact(t, a, "s", put(`{"state":"pending"}`, 0, time.Time{}))
	mustTransact(t, b, "s", func(cur []byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(`{"state":"committed"}`)}, nil
	})
	var last string
	mustTransact(t, a, "s", func(cur []byte) (*ledger.Write, error) {
		last = string(cur)
		return nil, nil
	})
	if last != `{"state":"committed"}` {
		t.Fatalf("decision stood on %q", last)
	}
	// Same for an error decided on the stale copy.
	mustTransact(t, b, "s", put(`{"state":"gone"}`, 0, time.Time{}))
	errStale := errors.New("stale")
	err := a.Transact(testContext(t), "s", func(cur []byte) (*ledger.Write, error) {
		if string(cur) == `{"state":"committed"}` {
			return nil, errStale
		}
		return nil, nil
	})
	if err != nil {
		t.Fatalf("error decided on a stale document was returned: %v", err)
	}
}

func TestTwoStoresAlternatingNeverLoseUpdates(t *testing.T) {
	a, _ := setup(t, postgres.Options{})
	b := postgres.New(secondPool(t), postgres.Options{Table: a.Table()})
	const rounds = 50
	for i := range rounds {
		mustTransact(t, a, "n", incr(""))
		mustTransact(t, b, "n", incr(""))
		if i%2 == 0 {
			mustTransact(t, b, "n", incr(""))
			mustTransact(t, a, "n", incr(""))
		}
	}
	if got, want := decodeCounter(t, mustRead(t, a, "n")).N, rounds*2+rounds; got != want {
		t.Fatalf("n = %d, want %d", got, want)
	}

	// And concurrently, each store with goroutines of its own.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for _, s := range []*postgres.Store{a, b} {
		for range 20 {
			wg.Go(func() {
				for range 10 {
					if err := s.Transact(testContext(t), "m", incr("")); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := decodeCounter(t, mustRead(t, a, "m")).N; got != 400 {
		t.Fatalf("m = %d, want 400", got)
	}
}

func TestConcurrentIncrementsAreAtomic(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts postgres.Options
	}{{"cache", postgres.Options{}}, {"nocache", postgres.Options{CacheSize: -1}}} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := setup(t, tc.opts)
			const goroutines, each = 64, 10
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for range goroutines {
				wg.Go(func() {
					for range each {
						if err := s.Transact(testContext(t), "hot", incr("")); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := decodeCounter(t, mustRead(t, s, "hot")).N; got != goroutines*each {
				t.Fatalf("n = %d, want %d", got, goroutines*each)
			}
		})
	}
}

func TestContentionErrorWritesNothing(t *testing.T) {
	a, _ := setup(t, postgres.Options{MaxAttempts: 1})
	b := postgres.New(secondPool(t), postgres.Options{Table: a.Table()})
	mustTransact(t, a, "s", put(`{"v":1}`, 0, time.Time{}))
	mustTransact(t, b, "s", put(`{"v":2}`, 0, time.Time{}))
	err := a.Transact(testContext(t), "s", put(`{"v":3}`, 0, time.Time{}))
	if !errors.Is(err, ledger.ErrContention) {
		t.Fatalf("err = %v, want ErrContention", err)
	}
	if got := mustRead(t, a, "s"); string(got) != `{"v":2}` {
		t.Fatalf("after contention error: %q", got)
	}
	// The miss refreshed the cache; the next call goes through.
	mustTransact(t, a, "s", put(`{"v":4}`, 0, time.Time{}))
}

func TestExpiredRowsReadAsAbsentAndAreOverwritten(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	ctx := testContext(t)
	review := time.Now().Add(-time.Hour)
	mustTransact(t, s, "e", put(`{"v":1}`, 150*time.Millisecond, review))
	if got := mustRead(t, s, "e"); string(got) != `{"v":1}` {
		t.Fatalf("before expiry: %q", got)
	}
	time.Sleep(400 * time.Millisecond)
	if got := mustRead(t, s, "e"); got != nil {
		t.Fatalf("after expiry: %q, want nil", got)
	}
	if scopes, err := s.ScopesToReview(ctx, time.Now(), 10); err != nil || len(scopes) != 0 {
		t.Fatalf("expired scope listed for review: %v %v", scopes, err)
	}
	// The cache still holds the live-looking copy; fn must see nil anyway.
	var saw []byte
	mustTransact(t, s, "e", func(cur []byte) (*ledger.Write, error) {
		saw = cur
		return &ledger.Write{Doc: []byte(`{"v":2}`)}, nil
	})
	if saw != nil {
		t.Fatalf("fn saw expired document %q", saw)
	}
	if got := mustRead(t, s, "e"); string(got) != `{"v":2}` {
		t.Fatalf("after overwrite: %q", got)
	}
	// TTL 0 cleared the expiry.
	if n, err := s.DeleteExpired(ctx); err != nil || n != 0 {
		t.Fatalf("DeleteExpired = %d, %v; want 0", n, err)
	}
	// A negative TTL means the document need not be kept at all.
	mustTransact(t, s, "neg", put(`{"v":1}`, -time.Second, time.Time{}))
	if got := mustRead(t, s, "neg"); got != nil {
		t.Fatalf("negative TTL kept %q", got)
	}
}

func TestDeleteExpired(t *testing.T) {
	s, pool := setup(t, postgres.Options{})
	ctx := testContext(t)
	withBlob := func(ttl time.Duration) func([]byte) (*ledger.Write, error) {
		return func([]byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{}`), TTL: ttl, Blobs: map[string][]byte{"e:1": []byte("body"), "a:1": []byte("attempt")}}, nil
		}
	}
	for i := range 5 {
		mustTransact(t, s, fmt.Sprintf("short-%d", i), withBlob(100*time.Millisecond))
	}
	for i := range 3 {
		mustTransact(t, s, fmt.Sprintf("forever-%d", i), withBlob(0))
	}
	for i := range 2 {
		mustTransact(t, s, fmt.Sprintf("long-%d", i), put(`{}`, time.Hour, time.Time{}))
	}
	time.Sleep(300 * time.Millisecond)
	n, err := s.DeleteExpired(ctx)
	if err != nil || n != 5 {
		t.Fatalf("DeleteExpired = %d, %v; want 5", n, err)
	}
	if n, err := s.DeleteExpired(ctx); err != nil || n != 0 {
		t.Fatalf("second DeleteExpired = %d, %v; want 0", n, err)
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+quote(s.Table())).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 5 {
		t.Fatalf("%d rows left, want 5", rows)
	}
	// The deleted rows' blobs went with them; the live rows keep theirs.
	var blobs, orphans int
	if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE scope LIKE 'short-%') FROM "+quote(s.Table()+"_blobs")).Scan(&blobs, &orphans); err != nil {
		t.Fatal(err)
	}
	if blobs != 6 || orphans != 0 {
		t.Fatalf("%d blobs left (%d of deleted rows), want the 6 of the live rows", blobs, orphans)
	}
}

func quote(table string) string {
	schema, name, _ := strings.Cut(table, ".")
	return pgx.Identifier{schema, name}.Sanitize()
}

// A row that expired, was deleted and was created again by another process
// must not be mistaken for the version this process has cached.
func TestRecreatedRowIsNotMistakenForCachedOne(t *testing.T) {
	a, _ := setup(t, postgres.Options{})
	b := postgres.New(secondPool(t), postgres.Options{Table: a.Table()})
	ctx := testContext(t)
	mustTransact(t, a, "r", put(`{"owner":"a","n":0}`, 100*time.Millisecond, time.Time{}))
	time.Sleep(300 * time.Millisecond)
	if n, err := a.DeleteExpired(ctx); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v", n, err)
	}
	mustTransact(t, b, "r", put(`{"owner":"b","n":0}`, 0, time.Time{}))
	var saw string
	mustTransact(t, a, "r", func(cur []byte) (*ledger.Write, error) {
		saw = string(cur)
		return &ledger.Write{Doc: []byte(strings.Replace(saw, `"n":0`, `"n":1`, 1))}, nil
	})
	if saw != `{"owner":"b","n":0}` {
		t.Fatalf("fn saw %q, want b's document", saw)
	}
	if got := mustRead(t, a, "r"); string(got) != `{"owner":"b","n":1}` {
		t.Fatalf("final %q", got)
	}
}

func TestScopesToReview(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	ctx := testContext(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mustTransact(t, s, "c", put(`{}`, 0, t0.Add(3*time.Second)))
	mustTransact(t, s, "a", put(`{}`, 0, t0.Add(1*time.Second)))
	mustTransact(t, s, "b", put(`{}`, 0, t0.Add(2*time.Second)))
	mustTransact(t, s, "b2", put(`{}`, 0, t0.Add(2*time.Second)))
	mustTransact(t, s, "none", put(`{}`, 0, time.Time{}))

	check := func(notAfter time.Time, limit int, want ...string) {
		t.Helper()
		got, err := s.ScopesToReview(ctx, notAfter, limit)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("ScopesToReview(t0+%v, %d) = %v, want %v", notAfter.Sub(t0), limit, got, want)
		}
	}
	check(t0.Add(2*time.Second), 10, "a", "b", "b2")
	check(t0.Add(2*time.Second), 2, "a", "b")
	check(t0.Add(time.Hour), 10, "a", "b", "b2", "c")
	check(t0, 10)
	check(t0.Add(time.Hour), 0)
	// A later write without ReviewAt takes the scope off the list.
	mustTransact(t, s, "a", put(`{}`, 0, time.Time{}))
	check(t0.Add(time.Hour), 10, "b", "b2", "c")
}

// queryCounter counts the statements a pool sends, which is how the tests
// see round trips: with statement caching each one is a single exchange.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch is one round trip, however many statements it carries.
func (c *queryCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *queryCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countedStore is a store on a fresh table whose pool counts the round
// trips it makes: statements, and batches of them.
func countedStore(t *testing.T) (*postgres.Store, *queryCounter) {
	t.Helper()
	dsn := testDSN(t)
	table := newTable(t, newPool(t, dsn, 0))
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	qc := &queryCounter{}
	cfg.ConnConfig.Tracer = qc
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.New(pool, postgres.Options{Table: table})
	t.Cleanup(s.Close)
	return s, qc
}

func TestUncontendedClaimAndSettleCostTwoRoundTrips(t *testing.T) {
	s, qc := countedStore(t)

	for i := range 5 {
		scope := fmt.Sprintf("event-%d", i)
		before := qc.n.Load()
		mustTransact(t, s, scope, put(`{"state":"pending"}`, time.Hour, time.Now().Add(15*time.Minute)))
		mustTransact(t, s, scope, func(cur []byte) (*ledger.Write, error) {
			if string(cur) != `{"state":"pending"}` {
				t.Fatalf("settle saw %q", cur)
			}
			return &ledger.Write{Doc: []byte(`{"state":"committed"}`), TTL: time.Hour}, nil
		})
		if n := qc.n.Load() - before; n != 2 {
			t.Fatalf("claim + settle took %d statements, want 2", n)
		}
	}
}

func TestWaitingRespectsContext(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Transact(ctx, "x", incr(""))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}

	// A goroutine blocked behind another Transact on the same scope gives
	// up when its own deadline passes.
	hold := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = s.Transact(testContext(t), "x", func([]byte) (*ledger.Write, error) {
			close(hold)
			<-release
			return nil, nil
		})
	})
	<-hold
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Transact(ctx, "x", incr(""))
	close(release)
	wg.Wait()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v, want DeadlineExceeded promptly", err, time.Since(start))
	}
}

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool) // already migrated once
	schema, _, _ := strings.Cut(table, ".")
	other := schema + ".second"
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		name := table
		if i%2 == 0 {
			name = other
		}
		wg.Go(func() { errs <- postgres.New(pool, postgres.Options{Table: name}).Migrate(testContext(t)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := postgres.New(pool, postgres.Options{Table: other})
	mustTransact(t, s, "x", incr(""))
}

// The budget: one ledger.Once on a new key, uncontended, is at most
// two statements (claim, settle).
func TestLedgerOnceCostsTwoRoundTrips(t *testing.T) {
	store, qc := countedStore(t)
	l := ledger.New(store, ledger.Options{})
	for i := range 5 {
		before := qc.n.Load()
		key := ledger.Key{Scope: fmt.Sprintf("event-%d", i), Intent: "deliver", Payload: map[string]any{"n": i}}
		res, err := l.Once(testContext(t), key, func(context.Context, ledger.Call) (any, error) { return "ok", nil })
		if err != nil || res.Status != ledger.StatusExecuted {
			t.Fatalf("once: %v %v", res.Status, err)
		}
		if n := qc.n.Load() - before; n > 2 {
			t.Fatalf("Once took %d statements, want at most 2", n)
		}
	}
}
