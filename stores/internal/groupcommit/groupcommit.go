package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is what writes get once Close has been called.
var ErrClosed = errors.New("the store is closed")

// Options shape a Batcher.
type Options struct {
	// MaxBatch bounds the writes one batch carries; 1 or less sends every
	// write alone, from its caller's goroutine.
	MaxBatch int
	// MaxInflight bounds the round trips in flight at once, lone writes
	// and batches together (at least 1).
	MaxInflight int
	// AloneBelow is how many round trips may be in flight for a write that
	// finds nothing queued to still go at once, alone: 1 means only when
	// nothing else is in flight. Zero means MaxInflight.
	AloneBelow int
	// Window is how long a queued write may wait for others to fill its
	// batch while another round trip is in flight. Zero sends as soon as a
	// slot is free.
	Window time.Duration
}

// Item is one write waiting for, or travelling in, a batch. The Batcher's
// send function sets Result; nothing else may touch an Item.
type Item[W, R any] struct {
	Ctx    context.Context
	Write  W
	Result R

	queuedAt time.Time
	sent     bool // guarded by Batcher.mu
	done     chan struct{}
}

// Batcher sends concurrent writes together. Its rules:
//
//   - A write that finds nothing queued and fewer than AloneBelow round
//     trips in flight is sent at once, alone, from the caller's goroutine:
//     a lone writer waits for nobody.
//   - Otherwise it is queued. The dispatcher sends what is queued, up to
//     MaxBatch writes, when a slot is free and either nothing is in
//     flight, or the batch is full, or its oldest write has waited Window.
//   - Two writes that Separate says must not share a batch never do: the
//     second waits for the next one.
//   - A caller whose context ends while its write is still queued takes it
//     out and gets the context's error: nothing was sent. Once sent, it may
//     still stop waiting when its context ends, but the write may land, so
//     it gets an error saying the outcome is unknown. A batch's context
//     ends when every caller in it has stopped waiting, at the last of
//     their deadlines if they all have one, or at Close.
//
// Goroutines: the dispatcher runs only while writes are queued, and each
// batch runs in a goroutine of its own while it is in flight; Close waits
// for both. An idle Batcher runs no goroutine.
type Batcher[W, R any] struct {
	opts Options
	// alone sends one write by itself; send sends a batch of two or more
	// and sets each Item's Result; fail makes the Result of a write that
	// did not (or may not) happen; separate, if set, keeps two writes out
	// of one batch.
	alone    func(ctx context.Context, w W) R
	send     func(ctx context.Context, batch []*Item[W, R])
	fail     func(err error) R
	separate func(a, b W) bool

	base   context.Context // ends at Close, and with it every batch in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the dispatcher; capacity 1

	mu       sync.Mutex
	queue    []*Item[W, R]
	inflight int
	running  bool // the dispatcher goroutine is alive
	closed   bool

	batches atomic.Int64 // batches of two or more writes sent
	grouped atomic.Int64 // writes those batches carried
}

// New returns a Batcher. separate may be nil.
func New[W, R any](opts Options, alone func(context.Context, W) R, send func(context.Context, []*Item[W, R]),
	fail func(error) R, separate func(a, b W) bool) *Batcher[W, R] {
	opts.MaxInflight = max(1, opts.MaxInflight)
	if opts.AloneBelow <= 0 || opts.AloneBelow > opts.MaxInflight {
		opts.AloneBelow = opts.MaxInflight
	}
	base, cancel := context.WithCancel(context.Background())
	return &Batcher[W, R]{
		opts: opts, alone: alone, send: send, fail: fail, separate: separate,
		base: base, cancel: cancel, kick: make(chan struct{}, 1),
	}
}

// Do sends w, alone or in a batch, and returns its result.
func (b *Batcher[W, R]) Do(ctx context.Context, w W) R {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return b.fail(ErrClosed)
	}
	if b.opts.MaxBatch <= 1 || (len(b.queue) == 0 && b.inflight < b.opts.AloneBelow) {
		b.inflight++
		b.mu.Unlock()
		r := b.alone(ctx, w)
		b.mu.Lock()
		b.inflight--
		if len(b.queue) > 0 {
			b.wakeLocked()
		}
		b.mu.Unlock()
		return r
	}
	it := &Item[W, R]{Ctx: ctx, Write: w, queuedAt: time.Now(), done: make(chan struct{})}
	b.queue = append(b.queue, it)
	if !b.running {
		b.running = true
		b.wg.Add(1)
		go b.dispatch()
	} else {
		b.wakeLocked()
	}
	b.mu.Unlock()

	select {
	case <-it.done:
		return it.Result
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !it.sent {
		if i := slices.Index(b.queue, it); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
			b.mu.Unlock()
			return b.fail(ctx.Err())
		}
	}
	b.mu.Unlock()
	select {
	case <-it.done: // finished as the context ended, or answered unsent by take
		return it.Result
	default:
	}
	return b.fail(fmt.Errorf("stopped waiting for the batch carrying this write, whose outcome is unknown: %w", ctx.Err()))
}

func (b *Batcher[W, R]) wakeLocked() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// dispatch sends queued writes in batches while there are any, and returns
// when the queue is empty.
func (b *Batcher[W, R]) dispatch() {
	defer b.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		wait := time.Duration(-1) // until kicked
		b.mu.Lock()
		for {
			if b.closed {
				for _, it := range b.queue {
					it.Result = b.fail(ErrClosed)
					close(it.done)
				}
				b.queue = nil
			}
			if len(b.queue) == 0 {
				b.running = false
				b.mu.Unlock()
				return
			}
			ready, left := b.readyLocked()
			if !ready {
				wait = left
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

// readyLocked reports whether the next batch may leave now: the queue holds
// writes, a slot is free, and nothing else is in flight, or the batch is
// full, or its oldest write has waited Window. When only the wait stands in
// the way, wait is how much of it is left; otherwise it is -1 (until
// something changes). b.mu must be held.
func (b *Batcher[W, R]) readyLocked() (ready bool, wait time.Duration) {
	if len(b.queue) == 0 || b.inflight >= b.opts.MaxInflight {
		return false, -1
	}
	age := time.Since(b.queue[0].queuedAt)
	if b.inflight > 0 && len(b.queue) < b.opts.MaxBatch && age < b.opts.Window {
		return false, b.opts.Window - age
	}
	return true, 0
}

// takeLocked removes the next batch from the queue and marks it sent. A
// write whose context has already ended is answered with its error and
// not sent; a write that must not share the batch with one already in it
// stays queued.
func (b *Batcher[W, R]) takeLocked() []*Item[W, R] {
	batch := make([]*Item[W, R], 0, min(len(b.queue), b.opts.MaxBatch))
	rest := b.queue[:0]
	for _, it := range b.queue {
		switch {
		case it.Ctx.Err() != nil:
			it.Result = b.fail(it.Ctx.Err())
			close(it.done)
		case len(batch) == b.opts.MaxBatch || (b.separate != nil &&
			slices.ContainsFunc(batch, func(o *Item[W, R]) bool { return b.separate(o.Write, it.Write) })):
			rest = append(rest, it)
		default:
			it.sent = true
			batch = append(batch, it)
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return batch
}

// run sends batch and answers its callers. Then, as long as queued writes
// may leave at once, it sends them too, from the same goroutine: this one
// is running already, while handing them to the dispatcher would put two
// goroutine wake-ups (the dispatcher, then a new batch goroutine) on the
// path of every queued write, each a wait for a CPU on a busy machine.
func (b *Batcher[W, R]) run(batch []*Item[W, R]) {
	defer b.wg.Done()
	for len(batch) > 0 {
		b.sendBatch(batch)
		b.mu.Lock()
		b.inflight--
		batch = nil
		if ready, _ := b.readyLocked(); ready && !b.closed {
			if batch = b.takeLocked(); len(batch) > 0 {
				b.inflight++
			}
		}
		// The dispatcher may send more alongside, wait out a window, or,
		// with the queue empty, end.
		b.wakeLocked()
		b.mu.Unlock()
	}
}

// sendBatch sends one batch and answers its callers.
func (b *Batcher[W, R]) sendBatch(batch []*Item[W, R]) {
	ctx, cancel := b.batchContext(batch)
	var waiting atomic.Int64
	waiting.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, it := range batch {
		stops[i] = context.AfterFunc(it.Ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}

	if len(batch) == 1 {
		batch[0].Result = b.alone(ctx, batch[0].Write)
	} else {
		b.batches.Add(1)
		b.grouped.Add(int64(len(batch)))
		b.send(ctx, batch)
	}

	for _, stop := range stops {
		stop()
	}
	cancel()
	for _, it := range batch {
		close(it.done)
	}
}

// batchContext ends at Close and, when every caller has a deadline, at the
// last of them: a client that bounds a round trip by its context's
// deadline rather than its cancellation (go-redis) then cannot hold a
// stalled batch longer than anyone waits for it.
func (b *Batcher[W, R]) batchContext(batch []*Item[W, R]) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, it := range batch {
		d, ok := it.Ctx.Deadline()
		if !ok {
			return context.WithCancel(b.base)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(b.base, last)
}

// Close stops the Batcher: queued writes fail without being sent, batches
// in flight are cancelled, and it returns once every goroutine has ended.
// Writes fail with ErrClosed afterwards.
func (b *Batcher[W, R]) Close() {
	b.mu.Lock()
	b.closed = true
	b.wakeLocked()
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// Stats reports how many batches of two or more writes were sent and how
// many writes they carried.
func (b *Batcher[W, R]) Stats() (batches, writes int64) {
	return b.batches.Load(), b.grouped.Load()
}

// Inflight and Queued report the round trips in flight and the writes
// waiting, for tests.
func (b *Batcher[W, R]) Inflight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight
}

// Queued reports how many writes are waiting to be sent.
func (b *Batcher[W, R]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Hold makes the Batcher behave as if every slot were busy: writes queue
// and none is sent until the returned function is called. For tests.
func (b *Batcher[W, R]) Hold() (release func()) {
	b.mu.Lock()
	b.inflight += b.opts.MaxInflight
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.inflight -= b.opts.MaxInflight
		b.wakeLocked()
		b.mu.Unlock()
	}
}
