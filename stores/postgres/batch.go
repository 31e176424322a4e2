package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/replyonce/gateway/ledger"
)

const (
	// DefaultMaxBatch is how many compare-and-set writes, to different
	// scopes, one group commit carries at most when Options.MaxBatch is
	// zero.
	DefaultMaxBatch = 32

	// DefaultBatchWindow is how long a queued write waits for others to
	// join it, while another write is already in flight, when
	// Options.BatchWindow is zero.
	DefaultBatchWindow = 500 * time.Microsecond

	// batchesInFlight bounds the group commits one Store has in flight at
	// once (never more than half its pool). More writes per commit beat
	// more commits at once: with gateway bench at 64 senders on a 2-CPU
	// machine, 1 or 2 in flight gave 0.31-0.35x the baseline, 4 gave 0.31x
	// and 8 gave 0.26-0.27x.
	batchesInFlight = 2
)

// errClosed is what writes get once Close has been called.
var errClosed = errors.New("the store is closed")

// batcher coalesces concurrent compare-and-set writes to different scopes
// into one statement, so one transaction and one WAL flush (one commit)
// serve many Transacts. It belongs to a Store.
//
// The rules:
//
//   - A write that finds nothing queued and nothing in flight is sent at
//     once, from the caller's goroutine, as the single-row statement: a
//     lone writer waits for nobody and pays nothing.
//   - Otherwise it is queued. The dispatcher sends what is queued, up to
//     maxBatch writes, when a slot is free and either nothing is in flight,
//     or the batch is full, or its oldest write has waited window.
//   - A batch never holds two writes to one scope (the scope lock already
//     keeps a process's writers to one scope apart; the dispatcher checks
//     anyway, and leaves a second one for the next batch).
//   - Each caller is answered after the batch's statement, and so its
//     commit, has finished: it either won its compare-and-set (the new
//     version), lost it (it goes on with Transact's usual retry), or the
//     statement failed and every caller in the batch gets the error, with
//     nothing written by any of them: it was one transaction.
//   - A caller whose context ends while its write is still queued takes it
//     out and gets the context's error: nothing was sent. Once sent, it may
//     still stop waiting when its context ends, but the write may land, so
//     it gets an error and Transact drops what it had cached. The batch
//     itself runs until every caller in it has stopped waiting (or Close).
//
// Goroutines: the dispatcher runs only while writes are queued, and each
// batch runs in a goroutine of its own while it is in flight; both are
// counted in wg, which Close waits for. An idle Store runs no goroutine.
type batcher struct {
	s           *Store
	maxBatch    int
	window      time.Duration
	maxInflight int

	base   context.Context // ends at Close, and with it every batch in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the dispatcher; capacity 1

	mu       sync.Mutex
	queue    []*pendingWrite
	inflight int  // batches being executed plus lone writes being sent
	running  bool // the dispatcher goroutine is alive
	closed   bool

	// For tests and diagnostics.
	batches atomic.Int64 // statements that carried more than one write
	grouped atomic.Int64 // writes carried by those statements
}

// pendingWrite is one Transact's write waiting for, or travelling in, a
// batch. Fields above the line are set before it is queued and never
// change; sent is guarded by batcher.mu; the outcome is written by the
// batch's goroutine before it closes done.
type pendingWrite struct {
	ctx      context.Context
	scope    string
	expected int64
	w        *ledger.Write
	queuedAt time.Time

	sent bool

	done    chan struct{}
	version int64
	ok      bool
	err     error
}

func newBatcher(s *Store, maxBatch int, window time.Duration, maxInflight int) *batcher {
	base, cancel := context.WithCancel(context.Background())
	return &batcher{
		s:           s,
		maxBatch:    maxBatch,
		window:      window,
		maxInflight: max(1, maxInflight),
		base:        base,
		cancel:      cancel,
		kick:        make(chan struct{}, 1),
	}
}

// write saves w if the scope's live row still has version expected, like
// Store.write, sharing a transaction with other scopes' writes when there
// are any to share with.
func (b *batcher) write(ctx context.Context, scope string, expected int64, w *ledger.Write) (version int64, ok bool, err error) {
	if b.maxBatch <= 1 || !batchable(w.Doc) {
		// A document the server will reject is sent alone, so it fails
		// only its own Transact, with the server's own message.
		return b.s.write(ctx, b.s.pool, scope, expected, w)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, false, errClosed
	}
	if len(b.queue) == 0 && b.inflight == 0 {
		b.inflight++
		b.mu.Unlock()
		version, ok, err = b.s.write(ctx, b.s.pool, scope, expected, w)
		b.mu.Lock()
		b.inflight--
		if len(b.queue) > 0 {
			b.wakeLocked()
		}
		b.mu.Unlock()
		return version, ok, err
	}
	p := &pendingWrite{ctx: ctx, scope: scope, expected: expected, w: w, queuedAt: time.Now(), done: make(chan struct{})}
	b.queue = append(b.queue, p)
	if !b.running {
		b.running = true
		b.wg.Add(1)
		go b.dispatch()
	} else {
		b.wakeLocked()
	}
	b.mu.Unlock()

	select {
	case <-p.done:
		return p.version, p.ok, p.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !p.sent {
		if i := slices.Index(b.queue, p); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
			b.mu.Unlock()
			return 0, false, ctx.Err()
		}
	}
	b.mu.Unlock()
	select {
	case <-p.done: // finished as the context ended; or never sent, see take
		return p.version, p.ok, p.err
	default:
	}
	return 0, false, fmt.Errorf("stopped waiting for the group commit carrying this write, whose outcome is unknown: %w", ctx.Err())
}

// batchable reports whether doc is sure to pass the server's json input
// check, so that it cannot make a whole batch fail.
func batchable(doc []byte) bool {
	return utf8.Valid(doc) && json.Valid(doc)
}

func (b *batcher) wakeLocked() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// dispatch sends queued writes in batches while there are any, and returns
// when the queue is empty.
func (b *batcher) dispatch() {
	defer b.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		wait := time.Duration(-1) // until kicked
		b.mu.Lock()
		for {
			if b.closed {
				for _, p := range b.queue {
					p.err = errClosed
					close(p.done)
				}
				b.queue = nil
			}
			if len(b.queue) == 0 {
				b.running = false
				b.mu.Unlock()
				return
			}
			if b.inflight >= b.maxInflight {
				break
			}
			age := time.Since(b.queue[0].queuedAt)
			if b.inflight > 0 && len(b.queue) < b.maxBatch && age < b.window {
				wait = b.window - age
				break
			}
			if batch := b.takeLocked(); len(batch) > 0 {
				b.inflight++
				b.wg.Add(1)
				go b.run(batch)
			}
		}
		b.mu.Unlock()
		if wait < 0 {
			<-b.kick
			continue
		}
		timer.Reset(wait)
		select {
		case <-b.kick:
			timer.Stop() // since Go 1.23 no stale tick is left to drain
		case <-timer.C:
		}
	}
}

// takeLocked removes the next batch from the queue and marks it sent. A
// write whose context has already ended is answered with its error and
// not sent; a second write to a scope already in the batch stays queued.
func (b *batcher) takeLocked() []*pendingWrite {
	batch := make([]*pendingWrite, 0, min(len(b.queue), b.maxBatch))
	rest := b.queue[:0]
	for _, p := range b.queue {
		switch {
		case p.ctx.Err() != nil:
			p.err = p.ctx.Err()
			close(p.done)
		case len(batch) == b.maxBatch || slices.ContainsFunc(batch, func(q *pendingWrite) bool { return q.scope == p.scope }):
			rest = append(rest, p)
		default:
			p.sent = true
			batch = append(batch, p)
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return batch
}

// run sends one batch and answers its callers. The statement's context
// ends when every caller has stopped waiting, or at Close: until then
// someone wants the outcome.
func (b *batcher) run(batch []*pendingWrite) {
	defer b.wg.Done()
	ctx, cancel := context.WithCancel(b.base)
	var waiting atomic.Int64
	waiting.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, p := range batch {
		stops[i] = context.AfterFunc(p.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}

	b.s.writeBatch(ctx, batch)

	for _, stop := range stops {
		stop()
	}
	cancel()
	for _, p := range batch {
		close(p.done)
	}
	b.mu.Lock()
	b.inflight--
	b.wakeLocked()
	b.mu.Unlock()
}

// close stops the batcher: queued writes fail without being sent, batches
// in flight are cancelled, and it returns once every goroutine has ended.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.wakeLocked()
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// writeBatch runs the batch's compare-and-sets as one statement, so one
// transaction, and records each one's outcome. A batch of one uses the
// single-row statement.
func (s *Store) writeBatch(ctx context.Context, batch []*pendingWrite) {
	if len(batch) == 1 {
		p := batch[0]
		p.version, p.ok, p.err = s.write(ctx, s.pool, p.scope, p.expected, p.w)
		return
	}
	s.batch.batches.Add(1)
	s.batch.grouped.Add(int64(len(batch)))
	// Rows are locked in scope order, whichever process sends the batch,
	// which keeps two batches from waiting for each other's rows.
	slices.SortFunc(batch, func(a, b *pendingWrite) int { return strings.Compare(a.scope, b.scope) })
	var (
		scopes   = make([]string, len(batch))
		docs     = make([]string, len(batch))
		ttls     = make([]int64, len(batch))
		reviews  = make([]pgtype.Timestamptz, len(batch))
		expected = make([]int64, len(batch))
	)
	for i, p := range batch {
		scopes[i] = p.scope
		docs[i] = string(p.w.Doc)
		ttls[i] = ttlMicros(p.w.TTL)
		if !p.w.ReviewAt.IsZero() {
			reviews[i] = pgtype.Timestamptz{Time: p.w.ReviewAt, Valid: true}
		}
		expected[i] = p.expected
	}
	won, err := s.runBatch(ctx, scopes, docs, ttls, reviews, expected)
	if err != nil {
		if retryable(err) {
			// The whole transaction was rolled back: nothing was written,
			// and trying again is what a lost compare-and-set does.
			for _, p := range batch {
				p.ok = false
			}
			return
		}
		err = fmt.Errorf("group commit of %d writes: %w", len(batch), err)
		for _, p := range batch {
			p.err = err
		}
		return
	}
	for _, p := range batch {
		p.version, p.ok = won[p.scope]
	}
}

func (s *Store) runBatch(ctx context.Context, scopes, docs []string, ttls []int64, reviews []pgtype.Timestamptz, expected []int64) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, s.q.batch, scopes, docs, ttls, reviews, expected)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	won := make(map[string]int64, len(scopes))
	for rows.Next() {
		var (
			scope   string
			version int64
		)
		if err := rows.Scan(&scope, &version); err != nil {
			return nil, err
		}
		won[scope] = version
	}
	// Read to the end: an error in the statement or its commit shows here.
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return won, nil
}

// batchSQL is the group commit: every write in the batch, as arrays, in
// one statement. It first locks the batch's existing rows in scope order
// (lk, which both modifying parts wait for), so two batches, in this
// process or another, always take their row locks in the same order and
// cannot deadlock each other. Then creations (expected version 0) go
// through the same INSERT ... ON CONFLICT as a single one, overwriting only
// an expired row, and updates through the same compare-and-set UPDATE on
// the version and liveness. What comes back is the scopes that won and
// their new versions; a scope missing from the result lost its
// compare-and-set.
func batchSQL(t, seq string) string {
	const expires = `CASE WHEN u.ttl = 0 THEN NULL ELSE now() + greatest(u.ttl, 0) * interval '1 microsecond' END`
	const live = `(t.expires_at IS NULL OR t.expires_at > now())`
	return `WITH u AS MATERIALIZED (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::bigint[])
        AS u(scope, doc, ttl, review_at, expected)
), lk AS MATERIALIZED (
    SELECT t.scope FROM ` + t + ` AS t WHERE t.scope = ANY($1::text[]) ORDER BY t.scope FOR UPDATE
), ins AS (
    INSERT INTO ` + t + ` AS t (scope, doc, version, expires_at, review_at, updated_at)
    SELECT u.scope, u.doc::json, ` + seq + `, ` + expires + `, u.review_at, now()
    FROM u WHERE u.expected = 0 AND (SELECT count(*) FROM lk) >= 0 ORDER BY u.scope
    ON CONFLICT (scope) DO UPDATE SET doc = excluded.doc, version = excluded.version,
        expires_at = excluded.expires_at, review_at = excluded.review_at, updated_at = excluded.updated_at
    WHERE t.expires_at IS NOT NULL AND t.expires_at <= now()
    RETURNING t.scope, t.version
), upd AS (
    UPDATE ` + t + ` AS t SET doc = u.doc::json, version = ` + seq + `, expires_at = ` + expires + `,
        review_at = u.review_at, updated_at = now()
    FROM u WHERE u.expected <> 0 AND t.scope = u.scope AND t.version = u.expected AND ` + live + `
        AND (SELECT count(*) FROM lk) >= 0
    RETURNING t.scope, t.version
)
SELECT scope, version FROM ins UNION ALL SELECT scope, version FROM upd`
}

// retryable reports whether err is the server rolling a transaction back
// because of a deadlock or a serialization failure: nothing was written,
// and the write may simply be decided and tried again. Batches lock rows
// in scope order, but a row created by another process while a batch's
// statement runs is not covered by that order, and a single-row statement
// queued behind such a batch may be the one the server picks to cancel.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}
