package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/ledger"
)

const (
	// DefaultCacheSize is the number of scopes whose last known state a
	// Store remembers when Options.CacheSize is zero.
	DefaultCacheSize = 10000

	// DefaultMaxAttempts is how many times Transact calls its function
	// before giving up with ledger.ErrContention when Options.MaxAttempts
	// is zero.
	DefaultMaxAttempts = 50

	// optimisticAttempts is how many compare-and-set attempts Transact makes
	// before it falls back to locking the row. The first uses the cache, the
	// second a fresh read; a third miss means another process is writing the
	// same scope right now, and waiting in the row's lock queue is both
	// cheaper and fairer than racing it again.
	optimisticAttempts = 2

	// deleteBatch bounds the rows one DeleteExpired statement removes, so a
	// large backlog never holds many row locks in one long transaction.
	deleteBatch = 1000

	// delSlots is how many blob deletes a write makes as lookups of their
	// own (see buildStatements): the steps of a delivery delete a few.
	delSlots = 4
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// Table is the table holding one row per scope, optionally qualified
	// with a schema ("ledger.scopes"). Empty means DefaultTable.
	Table string

	// CacheSize bounds how many scopes this process remembers the last
	// version and document of, which is what lets an uncontended Transact
	// finish in one round trip. Zero means DefaultCacheSize; a negative
	// value disables the cache, and every Transact then reads before it
	// writes.
	CacheSize int

	// MaxAttempts bounds how many times Transact calls its function before
	// it gives up with an error wrapping ledger.ErrContention. Zero means
	// DefaultMaxAttempts.
	MaxAttempts int

	// MaxBatch bounds how many writes, to different scopes, are committed
	// together in one transaction when Transacts run concurrently (group
	// commit). Zero means DefaultMaxBatch; 1 or a negative value turns
	// grouping off, and every write is then a transaction of its own.
	MaxBatch int

	// BatchWindow is how long a write may wait for others to join its
	// batch while another write is already in flight. A write that finds
	// nothing in flight never waits. Zero means DefaultBatchWindow; a
	// negative value means no waiting beyond the writes in flight.
	BatchWindow time.Duration
}

// Store is a ledger.Store keeping each scope's document in one row of a
// PostgreSQL table. It is safe for concurrent use, and any number of
// processes may share the table. It does not own the pool: closing the
// pool is the caller's job, after calling Close, which stops the group
// commit's goroutines (they run only while concurrent writes are being
// grouped; an idle Store runs none).
type Store struct {
	pool        *pgxpool.Pool
	table       string
	names       names
	maxAttempts int
	scopes      *scopeTable
	batch       *batcher
	reads       *rowReader
	q           statements
}

var _ ledger.Store = (*Store)(nil)

var _ ledger.AbsenceChecker = (*Store)(nil)

// ChecksAbsent implements ledger.AbsenceChecker: the write's
// compare-and-set refuses a write whose Absent names a record that exists.
func (s *Store) ChecksAbsent() bool { return true }

// liveRow is true for a row that has not expired: an expired row reads
// as absent.
const liveRow = `(expires_at IS NULL OR expires_at > now())`

// statements are built once per Store; pgx prepares each on first use per
// connection, so afterwards every one of them is a single round trip.
type statements struct {
	load, loadForUpdate string
	// loadMany reads several scopes: loadMany[i] names 2<<i of them, $1
	// to $n (see readRows).
	loadMany       []string
	insert, update string
	// The same writes with blobs: one statement each, so the blobs land
	// only with a won compare-and-set, in its transaction.
	insertBlobs string
	// updateChecked is update checking n names taken as absent;
	// blobWrite(n, k) is the update with blobs, checking n names (none
	// for 0) and deleting k blobs; see buildStatements.
	updateChecked           func(n int) string
	blobWrite               func(n, k int) string
	checkedSQL              [5]string               // updateChecked for 1 to 4 names
	blobSQL                 [5][delSlots + 2]string // blobWrite by names (0-4) and deletes (0-delSlots, then more)
	review, due, dueBetween string
	countDue                string
	received                string
	readBlob                string
	readBlobAt              [2]string // ReadBlobs: the name's place goes between
	deleteExpired           string
}

// New returns a Store using pool. It does not touch the database; call
// Migrate (or apply SchemaSQL with your own tool) before first use.
func New(pool *pgxpool.Pool, opts Options) *Store {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	switch {
	case opts.BatchWindow == 0:
		opts.BatchWindow = DefaultBatchWindow
	case opts.BatchWindow < 0:
		opts.BatchWindow = 0
	}
	n := parseTable(opts.Table)
	s := &Store{
		pool:        pool,
		table:       opts.Table,
		names:       n,
		maxAttempts: opts.MaxAttempts,
		scopes:      newScopeTable(opts.CacheSize),
		q:           buildStatements(n),
	}
	s.q.loadMany = loadManySQL(n, opts.MaxBatch)
	s.batch = newBatcher(s, opts.MaxBatch, opts.BatchWindow, min(batchesInFlight, int(pool.Config().MaxConns)/2))
	s.reads = newRowReader(s, opts.MaxBatch, min(readsInFlight, int(pool.Config().MaxConns)/2))
	return s
}

// Close stops the store's group commit and grouped reads and waits for
// their goroutines: writes still queued fail without having been sent, and
// batches in flight are cancelled (their callers get an error; such a
// write may or may not have landed). Transact's writes fail after Close;
// reads still work, each alone, until the pool is closed. Call it once the
// store's callers are done, before closing the pool. It is safe to call
// more than once.
func (s *Store) Close() {
	s.batch.Close()
	s.reads.Close()
}

func buildStatements(n names) statements {
	// nextval takes a regclass literal: the quoted name inside a string.
	seq := "nextval('" + escapeLiteral(n.sequence) + "')"
	// $3 is the TTL in microseconds: 0 keeps the row until a later write
	// says otherwise; a negative TTL means the caller need not keep it at
	// all, so it expires at once. The server's clock is the only clock all
	// processes agree on, so expiry is computed there.
	const expires = `CASE WHEN $3::bigint = 0 THEN NULL ELSE now() + greatest($3::bigint, 0) * interval '1 microsecond' END`
	const live = liveRow
	t := n.table
	// Creating a scope succeeds when there is no row, and also when the
	// row there has expired: an expired document counts as absent. A live
	// row makes the WHERE false, nothing is returned, and the caller knows
	// it decided on a stale view.
	// received names the placeholder of received_at, which comes last in
	// every write's arguments.
	insert := func(received string) string {
		return `INSERT INTO ` + t + ` AS t (scope, doc, version, expires_at, review_at, due_at, updated_at, received_at)
VALUES ($1, $2, ` + seq + `, ` + expires + `, $4, $5, now(), ` + received + `::timestamptz)
ON CONFLICT (scope) DO UPDATE SET doc = excluded.doc, version = excluded.version,
    expires_at = excluded.expires_at, review_at = excluded.review_at, due_at = excluded.due_at,
    updated_at = excluded.updated_at, received_at = excluded.received_at
WHERE t.expires_at IS NOT NULL AND t.expires_at <= now()
RETURNING version`
	}
	// Compare-and-set on the version. Under READ COMMITTED a concurrent
	// writer makes PostgreSQL re-check the WHERE against the newest row,
	// so exactly one of two racing updates from the same version wins.
	update := func(received, cond string) string {
		return `UPDATE ` + t + ` SET doc = $2, version = ` + seq + `, expires_at = ` + expires + `,
    review_at = $4, due_at = $5, updated_at = now(), received_at = ` + received + `::timestamptz
WHERE scope = $1 AND version = $6 AND ` + live + cond + `
RETURNING version`
	}
	// The blob statements wrap those: the puts (names, data) and
	// deletes run only when the write returned a row. A created (or
	// revived) scope keeps no blob but the ones it puts: a revived row's
	// old blobs died with it.
	b := n.blobs
	puts := func(names, datas string) string {
		return `put AS (INSERT INTO ` + b + ` (scope, name, data)
    SELECT $1, x.n, x.d FROM w, unnest(` + names + `::text[], ` + datas + `::bytea[]) AS x(n, d)
    ON CONFLICT (scope, name) DO UPDATE SET data = excluded.data)`
	}
	// deletes removes k blobs, the names in parameters from $first on,
	// each its own primary-key lookup. Written as name = ANY($n) the
	// delete took, in a generic plan made while the table was small or
	// not yet analyzed, only scope for its index condition and filtered
	// the names: every write of a scope of 10,000 records read them all
	// (issue #34). Past delSlots names (a chunk of parked events read
	// back deletes its record and its events' markers) the names go as
	// one array. Joined to the table, or as name = ANY, a generic plan
	// on a table not yet analyzed hashes the whole scope; each name is
	// looked up instead by a subquery of its own, which can only be a
	// primary-key lookup, and the rows found are deleted by their
	// ctids, read in the same statement. A write that deletes nothing
	// has no delete.
	deletes := func(k, first int) string {
		if k > delSlots {
			return fmt.Sprintf(",\ndel AS (DELETE FROM %[1]s WHERE ctid = ANY (ARRAY(SELECT (SELECT x.ctid FROM %[1]s x WHERE x.scope = $1 AND x.name = u.name)"+
				" FROM unnest($%[2]d::text[]) AS u(name))) AND EXISTS (SELECT 1 FROM w))", b, first)
		}
		var out strings.Builder
		for i := range k {
			fmt.Fprintf(&out, ",\ndel%d AS (DELETE FROM %s WHERE scope = $1 AND name = $%d::text AND EXISTS (SELECT 1 FROM w))", i+1, b, first+i)
		}
		return out.String()
	}
	// found looks up each of n names, the array in arg, in the blobs of
	// a row that still has the version the decision saw.
	found := func(n int, arg string) string {
		var out strings.Builder
		for k := 1; k <= n; k++ {
			if k > 1 {
				out.WriteString("\n    UNION ALL ")
			}
			fmt.Fprintf(&out, "SELECT name, data FROM %s WHERE scope = $1 AND name = (%s::text[])[%d]", b, arg, k)
		}
		return `SELECT x.name, x.data FROM (` + out.String() + `) x
    WHERE EXISTS (SELECT 1 FROM ` + t + ` WHERE scope = $1 AND version = $6 AND ` + live + `)`
	}
	st := statements{
		load:          `SELECT version, doc, ` + live + ` FROM ` + t + ` WHERE scope = $1`,
		loadForUpdate: `SELECT version, doc, ` + live + ` FROM ` + t + ` WHERE scope = $1 FOR UPDATE`,
		insert:        insert("$6"),
		update:        update("$7", ""),
		insertBlobs: `WITH w AS (` + insert("$8") + `),
` + puts("$6", "$7") + `,
del AS (DELETE FROM ` + b + ` WHERE scope = $1 AND EXISTS (SELECT 1 FROM w) AND NOT (name = ANY($6::text[])))
SELECT version FROM w`,
		// The writes that took blobs as absent (Write.Absent, the names
		// in their argument): p finds those that exist, if the row
		// still has the version the decision saw, and the update runs
		// only if it found none. The statement answers one row, its
		// new version, when it wrote, one row per blob found when it
		// did not, and none when it lost its compare-and-set. Each name
		// is its own primary-key lookup, as in ReadBlobs below.
		updateChecked: func(n int) string {
			return `WITH p AS (` + found(n, "$8") + `),
w AS (` + update("$7", ` AND NOT EXISTS (SELECT 1 FROM p)`) + `)
SELECT version, NULL::text, NULL::bytea FROM w UNION ALL SELECT NULL, name, data FROM p`
		},
		// The update with blobs: $7 and $8 the puts' names and data, $9
		// received_at, then the names taken as absent when n > 0 (an
		// array, as in updateChecked), then the deletes.
		blobWrite: func(n, k int) string {
			first := 10
			var out string
			if n > 0 {
				out = `WITH p AS (` + found(n, "$10") + `),
w AS (` + update("$9", ` AND NOT EXISTS (SELECT 1 FROM p)`) + `)`
				first = 11
			} else {
				out = `WITH w AS (` + update("$9", "") + `)`
			}
			out += ",\n" + puts("$7", "$8") + deletes(k, first)
			if n > 0 {
				return out + `
SELECT version, NULL::text, NULL::bytea FROM w UNION ALL SELECT NULL, name, data FROM p`
			}
			return out + `
SELECT version FROM w`
		},
		review: `SELECT scope FROM ` + t + `
WHERE review_at IS NOT NULL AND review_at <= $1 AND ` + live + `
ORDER BY review_at, scope LIMIT $2`,
		due: `SELECT scope FROM ` + t + `
WHERE due_at IS NOT NULL AND due_at <= $1 AND ` + live + `
ORDER BY due_at, scope LIMIT $2`,
		countDue: `SELECT count(*) FROM ` + t + `
WHERE due_at IS NOT NULL AND due_at <= $1 AND ` + live,
		dueBetween: `SELECT scope FROM ` + t + `
WHERE due_at IS NOT NULL AND due_at >= $3 AND due_at <= $1 AND ` + live + `
ORDER BY due_at, scope LIMIT $2`,
		// Row comparison walks the descending index from the cursor;
		// $1 NULL starts at the newest.
		received: `SELECT scope, received_at FROM ` + t + `
WHERE received_at IS NOT NULL AND ($1::timestamptz IS NULL OR (received_at, scope) < ($1, $2::text)) AND ` + live + `
ORDER BY received_at DESC, scope DESC LIMIT $3`,
		readBlob: `SELECT b.data FROM ` + b + ` b JOIN ` + t + ` t ON t.scope = b.scope
WHERE b.scope = $1 AND b.name = $2 AND (t.expires_at IS NULL OR t.expires_at > now())`,
		// ReadBlobs asks this once per name, $2 being the name's place in
		// the array, in one statement (UNION ALL): a primary-key lookup
		// each. Written as name = ANY($2), IN, or a join on the names, the
		// statement, prepared and reused through pgx as every statement
		// here is, took time that grew with the scope's records: 1.4 ms
		// for two names in a scope of 10,000 spilled records against
		// 0.09 ms in one of 10 (this form: 0.09 to 0.10 ms for both).
		readBlobAt: [2]string{`SELECT b.data FROM ` + b + ` b JOIN ` + t + ` t ON t.scope = b.scope
WHERE b.scope = $1 AND b.name = ($2::text[])[`, `] AND (t.expires_at IS NULL OR t.expires_at > now())`},
		// SKIP LOCKED leaves alone a row some Transact is reviving right now;
		// the outer condition re-checks expiry on the row actually deleted.
		// The row's blobs go in the same statement: a writer reviving the
		// scope waits on the row's lock, so it finds them gone.
		deleteExpired: `WITH gone AS (DELETE FROM ` + t + ` WHERE scope IN (
    SELECT scope FROM ` + t + ` WHERE expires_at <= now() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at <= now() RETURNING scope),
blobs AS (DELETE FROM ` + b + ` WHERE scope IN (SELECT scope FROM gone))
SELECT count(*) FROM gone`,
	}
	for n := range st.blobSQL {
		if n > 0 {
			st.checkedSQL[n] = st.updateChecked(n)
		}
		for k := range st.blobSQL[n] {
			st.blobSQL[n][k] = st.blobWrite(n, k)
		}
	}
	return st
}

// writeArgs is the statement and arguments that save w for scope if its
// live row still has version expected (0: no live row).
func (s *Store) writeArgs(scope string, expected int64, w *ledger.Write) (string, []any) {
	ttl := ttlMicros(w.TTL)
	var review, due any // NULL unless set
	if !w.ReviewAt.IsZero() {
		review = w.ReviewAt
	}
	if !w.DueAt.IsZero() {
		due = w.DueAt
	}
	var received any
	if !w.ReceivedAt.IsZero() {
		received = w.ReceivedAt
	}
	checked := checksAbsent(expected, w)
	if len(w.Blobs) == 0 {
		switch {
		case expected == 0:
			return s.q.insert, []any{scope, w.Doc, ttl, review, due, received}
		case checked:
			return s.q.checked(len(w.Absent)), []any{scope, w.Doc, ttl, review, due, expected, received, w.Absent}
		}
		return s.q.update, []any{scope, w.Doc, ttl, review, due, expected, received}
	}
	names := make([]string, 0, len(w.Blobs))
	datas := make([][]byte, 0, len(w.Blobs))
	var dels []string
	for name, b := range w.Blobs {
		if b == nil {
			dels = append(dels, name)
			continue
		}
		names, datas = append(names, name), append(datas, b)
	}
	if expected == 0 {
		return s.q.insertBlobs, []any{scope, w.Doc, ttl, review, due, names, datas, received}
	}
	args := []any{scope, w.Doc, ttl, review, due, expected, names, datas, received}
	n := 0
	if checked {
		n = len(w.Absent)
		args = append(args, w.Absent)
	}
	if len(dels) > delSlots {
		args = append(args, dels)
	} else {
		for _, name := range dels {
			args = append(args, name)
		}
	}
	return s.q.blobs(n, len(dels)), args
}

// checked is updateChecked for n names, built once for the usual few.
func (q statements) checked(n int) string {
	if n > 0 && n < len(q.checkedSQL) {
		return q.checkedSQL[n]
	}
	return q.updateChecked(n)
}

// blobs is blobWrite for n names and k deletes, built once for the usual
// few; past delSlots deletes the statement is the same whatever their
// number.
func (q statements) blobs(n, k int) string {
	k = min(k, delSlots+1)
	if n < len(q.blobSQL) {
		return q.blobSQL[n][k]
	}
	return q.blobWrite(n, k)
}

func escapeLiteral(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte("''")))
}

// Transact implements ledger.Store.
//
// In the common case it costs one round trip: fn runs on the document this
// process last wrote or read for the scope (or on nil for a scope it has
// never seen, which for the gateway is usually a new one), and the write is
// a compare-and-set that succeeds only if the row still has that version.
// When it does not, Transact reads the row and tries once more; after that
// it locks the row (SELECT ... FOR UPDATE) and decides on what it holds.
// While other goroutines are writing other scopes, the compare-and-set may
// travel in a group commit with theirs (see the package documentation):
// still one round trip, answered after the shared commit.
//
// A decision that writes nothing (fn returned nil or an error) is only
// trusted once the document it was made on is known to be current: if it
// came from the cache, the row is read again and fn runs again when the
// row had moved on. A stale "in flight" must not hide a newer "committed".
func (s *Store) Transact(ctx context.Context, scope string, fn func(current []byte) (*ledger.Write, error)) error {
	// Checked first because a free lock and a done context are both ready
	// below, and select would pick either.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres store: transact %q: %w", scope, err)
	}
	unlock, err := s.scopes.lock(ctx, scope)
	if err != nil {
		return fmt.Errorf("postgres store: transact %q: waiting for other goroutines on this scope: %w", scope, err)
	}
	defer unlock()

	var cur snapshot
	if s.scopes.perShard > 0 {
		// Unverified either way: a hit may be stale, a miss is a guess.
		cur.version, cur.doc, _ = s.scopes.get(scope)
	} else if cur, err = s.load(ctx, scope); err != nil {
		return fmt.Errorf("postgres store: transact %q: %w", scope, err)
	}

	for attempt := 1; attempt <= s.maxAttempts; attempt++ {
		if attempt > optimisticAttempts {
			if attempt > optimisticAttempts+1 {
				if err := backoff(ctx, attempt); err != nil {
					return fmt.Errorf("postgres store: transact %q: %w", scope, err)
				}
			}
			retry, err := s.transactLocked(ctx, scope, fn)
			if err != nil || !retry {
				return err
			}
			continue
		}

		w, fnErr := fn(bytes.Clone(cur.doc))
		if fnErr != nil || w == nil {
			if !cur.verified {
				fresh, err := s.load(ctx, scope)
				if err != nil {
					return fmt.Errorf("postgres store: transact %q: verifying a read-only decision: %w", scope, err)
				}
				if fresh.version != cur.version {
					cur = fresh
					continue
				}
			}
			return fnErr // nil for a read-only decision; fn's own error unchanged otherwise
		}
		if err := checkWrite(w); err != nil {
			return fmt.Errorf("postgres store: transact %q: %w", scope, err)
		}

		r := s.groupWrite(ctx, scope, cur.version, w)
		version, ok, err := r.version, r.ok, r.err
		if err != nil {
			// The statement may or may not have committed; whatever we
			// remembered is no longer known to be true.
			s.scopes.drop(scope)
			return fmt.Errorf("postgres store: transact %q: write: %w", scope, err)
		}
		if ok {
			s.scopes.put(scope, version, bytes.Clone(w.Doc))
			return nil
		}
		if r.present != nil {
			// Found as of the version fn decided on, which the cache
			// may keep.
			return &ledger.PresentError{Blobs: r.present}
		}
		if cur, err = s.load(ctx, scope); err != nil {
			return fmt.Errorf("postgres store: transact %q: %w", scope, err)
		}
	}
	return fmt.Errorf("postgres store: transact %q: gave up after %d attempts: %w", scope, s.maxAttempts, ledger.ErrContention)
}

// transactLocked runs one attempt inside a transaction holding the row's
// lock, so the decision is made on a document nobody else can change until
// the write commits. A missing row cannot be locked; if another process
// creates it first, the insert finds it and retry is true.
func (s *Store) transactLocked(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) (retry bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("postgres store: transact %q: begin: %w", scope, err)
	}
	// After Commit this is a no-op. After a failure it ends the transaction,
	// or pgx closes the connection if it cannot.
	defer func() { _ = tx.Rollback(ctx) }()

	cur, err := s.loadLocked(ctx, tx, scope)
	if retryable(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("postgres store: transact %q: %w", scope, err)
	}
	w, fnErr := fn(bytes.Clone(cur.doc))
	if fnErr != nil {
		return false, fnErr
	}
	if w == nil {
		return false, nil
	}
	if err := checkWrite(w); err != nil {
		return false, fmt.Errorf("postgres store: transact %q: %w", scope, err)
	}
	r, err := s.write(ctx, tx, scope, cur.version, w)
	version := r.version
	if err != nil {
		s.scopes.drop(scope)
		return false, fmt.Errorf("postgres store: transact %q: write: %w", scope, err)
	}
	if r.present != nil {
		return false, &ledger.PresentError{Blobs: r.present}
	}
	if !r.ok {
		return true, nil
	}
	if err := tx.Commit(ctx); err != nil {
		s.scopes.drop(scope)
		if retryable(err) {
			return true, nil // rolled back: nothing was written
		}
		return false, fmt.Errorf("postgres store: transact %q: commit: %w", scope, err)
	}
	s.scopes.put(scope, version, bytes.Clone(w.Doc))
	return false, nil
}

func checkWrite(w *ledger.Write) error {
	if len(w.Doc) == 0 {
		return errors.New("the function returned a write with an empty document")
	}
	return nil
}

// snapshot is one view of a scope's row. version 0 means no live row: the
// sequence starts at 1, and an expired row reads as absent.
type snapshot struct {
	version  int64
	doc      []byte
	verified bool // read from the database during this call
}

// querier is what both the pool and a transaction offer.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// load reads the scope's row through the pool, sharing the statement with
// other reads that meet it (reads.go), and records what it found in the
// cache.
func (s *Store) load(ctx context.Context, scope string) (snapshot, error) {
	r, err := s.readRow(ctx, scope)
	return s.remember(scope, r, err)
}

// loadLocked is load inside tx, locking the row until tx ends.
func (s *Store) loadLocked(ctx context.Context, tx pgx.Tx, scope string) (snapshot, error) {
	r, err := s.readRowAlone(ctx, tx, scope, true)
	return s.remember(scope, r, err)
}

// remember records a read's row in the cache and returns it as a snapshot.
func (s *Store) remember(scope string, r row, err error) (snapshot, error) {
	switch {
	case err != nil:
		return snapshot{}, fmt.Errorf("read: %w", err)
	case !r.live:
		s.scopes.drop(scope)
		return snapshot{verified: true}, nil
	}
	s.scopes.put(scope, r.version, bytes.Clone(r.doc))
	return snapshot{version: r.version, doc: r.doc, verified: true}, nil
}

// write saves w if the scope's live row still has version expected (or, for
// expected 0, if there is no live row). ok is false when it had moved on.
func (s *Store) write(ctx context.Context, q querier, scope string, expected int64, w *ledger.Write) (writeResult, error) {
	sql, args := s.writeArgs(scope, expected, w)
	var r writeResult
	var err error
	if checksAbsent(expected, w) {
		r, err = scanChecked(q.Query(ctx, sql, args...))
	} else {
		r, err = scanWrite(q.QueryRow(ctx, sql, args...))
	}
	if retryable(err) {
		// The server rolled the statement back (see retryable):
		// nothing was written.
		return writeResult{}, nil
	}
	return r, err
}

// checksAbsent reports whether writeArgs checks w's Absent names. A write
// that creates the scope (or revives an expired one) has no live blobs to
// find: what it took as absent is.
func checksAbsent(expected int64, w *ledger.Write) bool { return expected != 0 && len(w.Absent) > 0 }

// scanWrite reads a write's answer: its new version, or no row when it
// lost its compare-and-set.
func scanWrite(row pgx.Row) (writeResult, error) {
	var version int64
	switch err := row.Scan(&version); {
	case errors.Is(err, pgx.ErrNoRows):
		return writeResult{}, nil
	case err != nil:
		return writeResult{}, err
	}
	return writeResult{version: version, ok: true}, nil
}

// scanChecked reads the answer of a write that checked names taken as
// absent (updateChecked): its new version, the blobs found, or nothing.
func scanChecked(rows pgx.Rows, err error) (writeResult, error) {
	if err != nil {
		return writeResult{}, err
	}
	defer rows.Close()
	var r writeResult
	for rows.Next() {
		var version *int64
		var name *string
		var data []byte
		if err := rows.Scan(&version, &name, &data); err != nil {
			return writeResult{}, err
		}
		switch {
		case version != nil:
			r.version, r.ok = *version, true
		case name != nil:
			if r.present == nil {
				r.present = map[string][]byte{}
			}
			r.present[*name] = data
		}
	}
	return r, rows.Err()
}

// ttlMicros rounds a positive TTL up to whole microseconds, PostgreSQL's
// resolution, so that a tiny TTL never turns into "expired at once".
func ttlMicros(d time.Duration) int64 {
	switch {
	case d == 0:
		return 0
	case d < 0:
		return -1
	}
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// backoff sleeps a jittered, growing interval before the next locked
// attempt; only creation races of a brand-new scope get here.
func backoff(ctx context.Context, attempt int) error {
	limit := time.Millisecond << min(attempt-optimisticAttempts, 6)
	d := limit/2 + rand.N(limit/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Read implements ledger.Store. It always asks the database: a read must
// see every write that finished before it began, whichever process made it.
// It leaves the cache alone, which only Transact changes, under the scope's
// lock.
func (s *Store) Read(ctx context.Context, scope string) ([]byte, error) {
	r, err := s.readRow(ctx, scope)
	switch {
	case err != nil:
		return nil, fmt.Errorf("postgres store: read %q: %w", scope, err)
	case !r.live:
		return nil, nil
	}
	return r.doc, nil
}

// ScopesToReview implements ledger.Store. It walks the partial index on
// review_at, which holds only rows whose last write asked for a review, so
// its cost follows the number of such scopes, not the table's size.
// Expired rows are left out: they read as absent.
func (s *Store) ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.review, notAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes to review: %w", err)
	}
	scopes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes to review: %w", err)
	}
	return scopes, nil
}

// ScopesDue implements ledger.Store through the partial index on due_at,
// as ScopesToReview does through review_at: its cost follows the number of
// scopes with a queued delivery, not the table's size.
func (s *Store) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.due, notAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes due: %w", err)
	}
	scopes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes due: %w", err)
	}
	return scopes, nil
}

// CountDue implements ledger.Store: a count over the same index.
func (s *Store) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.countDue, notAfter).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres store: count scopes due: %w", err)
	}
	return int(n), nil
}

// ScopesDueBetween implements ledger.Store: a range scan of the same index.
func (s *Store) ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.dueBetween, notAfter, limit, from)
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes due: %w", err)
	}
	scopes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes due: %w", err)
	}
	return scopes, nil
}

// ScopesReceived implements ledger.Store through the partial descending
// index on received_at: a page costs its length, however deep the cursor.
func (s *Store) ScopesReceived(ctx context.Context, before ledger.ScopeAt, limit int) ([]ledger.ScopeAt, error) {
	if limit <= 0 {
		return nil, nil
	}
	var at any // NULL: from the newest
	if !before.At.IsZero() {
		at = before.At
	}
	rows, err := s.pool.Query(ctx, s.q.received, at, before.Scope, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes received: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ledger.ScopeAt, error) {
		var a ledger.ScopeAt
		err := r.Scan(&a.Scope, &a.At)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres store: scopes received: %w", err)
	}
	return out, nil
}

// ReadBlob implements ledger.Store.
func (s *Store) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, s.q.readBlob, scope, name).Scan(&data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("postgres store: read blob %q of %q: %w", name, scope, err)
	}
	return data, nil
}

// readBlobsSQL is ReadBlobs' statement for n names: $1 the scope, $2 the
// names; each row is a name's place in $2 and its record.
func (s *Store) readBlobsSQL(n int) string {
	var q strings.Builder
	for i := range n {
		if i > 0 {
			q.WriteString("\nUNION ALL\n")
		}
		q.WriteString("SELECT " + strconv.Itoa(i) + " AS i, x.data FROM (" + s.q.readBlobAt[0] + strconv.Itoa(i+1) + s.q.readBlobAt[1] + ") x")
	}
	return q.String()
}

// ReadBlobs implements ledger.Store in one statement.
func (s *Store) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	out := make([][]byte, len(names))
	if len(names) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.readBlobsSQL(len(names)), scope, names)
	if err != nil {
		return nil, fmt.Errorf("postgres store: read blobs %q of %q: %w", names, scope, err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var data []byte
		if err := rows.Scan(&i, &data); err != nil {
			return nil, fmt.Errorf("postgres store: read blobs %q of %q: %w", names, scope, err)
		}
		if i < 0 || i >= len(out) {
			return nil, fmt.Errorf("postgres store: read blobs %q of %q: answer for place %d", names, scope, i)
		}
		out[i] = data
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres store: read blobs %q of %q: %w", names, scope, err)
	}
	return out, nil
}

// DeleteExpired removes rows whose TTL has run out and returns how many it
// removed. Expired rows already read as absent, so this only reclaims
// space; run it periodically (for example from a ticker in the process that
// owns the pool). It works in batches and stops at the first error,
// returning the count so far.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	var total int64
	for {
		var n int64
		if err := s.pool.QueryRow(ctx, s.q.deleteExpired, deleteBatch).Scan(&n); err != nil {
			return total, fmt.Errorf("postgres store: delete expired: %w", err)
		}
		total += n
		if n < deleteBatch {
			return total, nil
		}
	}
}

// Ping reports whether the database answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres store: ping: %w", err)
	}
	return nil
}

// Table returns the table name the store was configured with.
func (s *Store) Table() string { return s.table }
