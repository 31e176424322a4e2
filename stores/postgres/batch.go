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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
// into one round trip and one transaction, so one WAL flush (one commit)
// serves many Transacts. It belongs to a Store.
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
//   - Each caller is answered after the batch's commit has finished: it
//     either won its compare-and-set (the new version), lost it (it goes on
//     with Transact's usual retry), or a statement or the commit failed
//     and every caller in the batch gets the error, with nothing written
//     by any of them: it was one transaction.
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
	batches atomic.Int64 // transactions that carried more than one write
	grouped atomic.Int64 // writes carried by those transactions
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

// run sends one batch and answers its callers. The batch's context
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

// writeBatch sends the batch's compare-and-sets, each the very statement a
// lone write would use, in one round trip as one implicit transaction (a
// pgx batch ends with a single Sync), so one commit serves them all, and
// records each one's outcome. The statements run in scope order, so two
// batches, from any processes, take their row locks in the same order and
// cannot deadlock each other. A batch of one is a plain single write.
func (s *Store) writeBatch(ctx context.Context, batch []*pendingWrite) {
	if len(batch) == 1 {
		p := batch[0]
		p.version, p.ok, p.err = s.write(ctx, s.pool, p.scope, p.expected, p.w)
		return
	}
	s.batch.batches.Add(1)
	s.batch.grouped.Add(int64(len(batch)))
	slices.SortFunc(batch, func(a, b *pendingWrite) int { return strings.Compare(a.scope, b.scope) })
	err := s.runBatch(ctx, batch)
	if err != nil {
		for _, p := range batch {
			p.version, p.ok = 0, false
		}
		if retryable(err) {
			// The whole transaction was rolled back: nothing was written,
			// and trying again is what a lost compare-and-set does.
			return
		}
		err = fmt.Errorf("group commit of %d writes: %w", len(batch), err)
		for _, p := range batch {
			p.err = err
		}
	}
}

// runBatch sets version and ok on each write that won. They count only if
// it returns nil: until the commit has succeeded nothing is written.
func (s *Store) runBatch(ctx context.Context, batch []*pendingWrite) error {
	var b pgx.Batch
	for _, p := range batch {
		ttl := ttlMicros(p.w.TTL)
		var review any // NULL unless set
		if !p.w.ReviewAt.IsZero() {
			review = p.w.ReviewAt
		}
		if p.expected == 0 {
			b.Queue(s.q.insert, p.scope, p.w.Doc, ttl, review)
		} else {
			b.Queue(s.q.update, p.scope, p.w.Doc, ttl, review, p.expected)
		}
	}
	results := s.pool.SendBatch(ctx, &b)
	for _, p := range batch {
		switch err := results.QueryRow().Scan(&p.version); {
		case errors.Is(err, pgx.ErrNoRows):
			p.version = 0 // lost its compare-and-set
		case err != nil:
			_ = results.Close()
			return err
		default:
			p.ok = true
		}
	}
	// The commit happens at the batch's end: its failure shows here.
	return results.Close()
}

// retryable reports whether err is the server rolling a transaction back
// because of a deadlock or a serialization failure: nothing was written,
// and the write may simply be decided and tried again. Batches lock rows
// in scope order, which keeps them from deadlocking each other; the check
// stays as a safety net, since whatever the server rolls back this way
// wrote nothing.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}
