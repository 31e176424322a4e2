package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
)

const (
	// DefaultMaxBatch is how many compare-and-set scripts one pipeline
	// carries at most when Options.MaxBatch is zero.
	DefaultMaxBatch = 64

	// pipelinesInFlight bounds the round trips one Store has in flight at
	// once, single scripts and pipelines together. Past it, writes queue
	// and leave together in the next pipeline.
	pipelinesInFlight = 4
)

// errClosed is what writes get once Close has been called.
var errClosed = errors.New("the store is closed")

// batcher sends concurrent compare-and-set scripts in pipelines: one write
// and one read on the connection, for the client and for the server,
// instead of one each per script. Redis still runs every script on its
// own, atomically and in order, so a pipeline changes nothing about what
// each write decides; it is not a transaction, and each script answers for
// itself.
//
// The rules:
//
//   - A write that finds nothing queued and a round trip free is sent at
//     once, from the caller's goroutine, as a single script: a lone writer
//     waits for nobody.
//   - Otherwise it is queued, and the dispatcher sends what is queued, up
//     to maxBatch scripts, as soon as a round trip is free.
//   - A caller whose context ends while its write is still queued takes it
//     out and gets the context's error: nothing was sent. Once sent, it may
//     still stop waiting when its context ends, but the write may land, so
//     it gets an error and Transact drops what it had cached. The pipeline
//     runs until every caller in it has stopped waiting, the last of their
//     deadlines, or Close.
//
// Goroutines: the dispatcher runs only while writes are queued, and each
// pipeline runs in a goroutine of its own while it is in flight; both are
// counted in wg, which close waits for. An idle Store runs no goroutine.
type batcher struct {
	s           *Store
	maxBatch    int
	maxInflight int

	base   context.Context // ends at close, and with it every pipeline in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the dispatcher; capacity 1

	mu       sync.Mutex
	queue    []*pendingCAS
	inflight int // pipelines plus lone scripts being sent
	running  bool
	closed   bool

	// For tests and diagnostics.
	pipelines atomic.Int64 // pipelines that carried more than one script
	grouped   atomic.Int64 // scripts carried by those pipelines
}

// pendingCAS is one Transact's write waiting for, or travelling in, a
// pipeline. Fields above the line are set before it is queued and never
// change; sent is guarded by batcher.mu; the outcome is written by the
// pipeline's goroutine before it closes done.
type pendingCAS struct {
	ctx  context.Context
	args casArgs

	sent bool

	done  chan struct{}
	reply casReply
}

func newBatcher(s *Store, maxBatch, maxInflight int) *batcher {
	base, cancel := context.WithCancel(context.Background())
	return &batcher{
		s:           s,
		maxBatch:    maxBatch,
		maxInflight: max(1, maxInflight),
		base:        base,
		cancel:      cancel,
		kick:        make(chan struct{}, 1),
	}
}

// compareAndSet runs the write script for a, alone or in a pipeline with
// other Transacts' writes.
func (b *batcher) compareAndSet(ctx context.Context, a casArgs) casReply {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return casReply{err: errClosed}
	}
	if b.maxBatch <= 1 || (len(b.queue) == 0 && b.inflight < b.maxInflight) {
		b.inflight++
		b.mu.Unlock()
		r := b.s.runCAS(ctx, a)
		b.mu.Lock()
		b.inflight--
		if len(b.queue) > 0 {
			b.wakeLocked()
		}
		b.mu.Unlock()
		return r
	}
	p := &pendingCAS{ctx: ctx, args: a, done: make(chan struct{})}
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
		return p.reply
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !p.sent {
		if i := slices.Index(b.queue, p); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
			b.mu.Unlock()
			return casReply{err: ctx.Err()}
		}
	}
	b.mu.Unlock()
	select {
	case <-p.done: // finished as the context ended, or refused unsent by take
		return p.reply
	default:
	}
	return casReply{err: fmt.Errorf("stopped waiting for the pipeline carrying this write, whose outcome is unknown: %w", ctx.Err())}
}

func (b *batcher) wakeLocked() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// dispatch sends queued writes while there are any, and returns when the
// queue is empty.
func (b *batcher) dispatch() {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		for {
			if b.closed {
				for _, p := range b.queue {
					p.reply.err = errClosed
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
			if batch := b.takeLocked(); len(batch) > 0 {
				b.inflight++
				b.wg.Add(1)
				go b.run(batch)
			}
		}
		b.mu.Unlock()
		<-b.kick
	}
}

// takeLocked removes the next pipeline's writes from the queue and marks
// them sent. A write whose context has already ended is answered with its
// error and not sent.
func (b *batcher) takeLocked() []*pendingCAS {
	batch := make([]*pendingCAS, 0, min(len(b.queue), b.maxBatch))
	rest := b.queue[:0]
	for _, p := range b.queue {
		switch {
		case p.ctx.Err() != nil:
			p.reply.err = p.ctx.Err()
			close(p.done)
		case len(batch) == b.maxBatch:
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

// run sends one pipeline and answers its callers.
func (b *batcher) run(batch []*pendingCAS) {
	defer b.wg.Done()
	ctx, cancel := b.pipelineContext(batch)
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

	b.s.runPipeline(ctx, batch)

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

// pipelineContext ends at close and, when every caller has a deadline, at
// the last of them: go-redis bounds a round trip by its context's deadline,
// so a stalled server cannot hold the pipeline longer than anyone waits.
func (b *batcher) pipelineContext(batch []*pendingCAS) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.WithCancel(b.base)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(b.base, last)
}

// close stops the batcher: queued writes fail without being sent,
// pipelines in flight are cancelled, and it returns once every goroutine
// has ended.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.wakeLocked()
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// runPipeline sends the batch's scripts in one pipeline and records each
// one's reply. Scripts the server did not know (NOSCRIPT: not run) are
// sent again one by one, which loads the script.
func (s *Store) runPipeline(ctx context.Context, batch []*pendingCAS) {
	if len(batch) == 1 {
		batch[0].reply = s.runCAS(ctx, batch[0].args)
		return
	}
	s.batch.pipelines.Add(1)
	s.batch.grouped.Add(int64(len(batch)))
	cmds := make([]*goredis.Cmd, len(batch))
	// Pipelined's own error repeats the first command's; each command's
	// error is read below.
	_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, w := range batch {
			cmds[i] = casScript.EvalSha(ctx, p, w.args.keys(s), w.args.argv()...)
		}
		return nil
	})
	for i, w := range batch {
		if goredis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			w.reply = s.runCAS(ctx, w.args)
			continue
		}
		w.reply = parseCASReply(cmds[i])
	}
}

// casArgs is one run of the write script.
type casArgs struct {
	scope, key   string
	expect, next string
	w            *ledger.Write
}

func (a casArgs) keys(s *Store) []string {
	return []string{a.key, s.indexKey(bucketOf(a.scope))}
}

func (a casArgs) argv() []any {
	ttl := "0"
	if a.w.TTL != 0 {
		// Sub-millisecond and negative TTLs round up to the smallest
		// expiry Redis has: keeping a document longer is allowed.
		ttl = strconv.FormatInt(max(a.w.TTL.Milliseconds(), 1), 10)
	}
	review := ""
	if !a.w.ReviewAt.IsZero() {
		review = strconv.FormatInt(a.w.ReviewAt.UnixMilli(), 10)
	}
	return []any{a.expect, a.next, a.w.Doc, ttl, review, a.scope}
}

// casReply is what the write script answered: won, or lost with the
// current token and document ("" and nil: no document), or an error after
// which the write may or may not have landed.
type casReply struct {
	won   bool
	token string
	doc   []byte
	err   error
}

// runCAS runs the write script alone, with EVALSHA and, when the server
// does not know the script, EVAL.
func (s *Store) runCAS(ctx context.Context, a casArgs) casReply {
	return parseCASReply(casScript.Run(ctx, s.client, a.keys(s), a.argv()...))
}

func parseCASReply(cmd *goredis.Cmd) casReply {
	reply, err := cmd.Slice()
	if err != nil {
		return casReply{err: err}
	}
	if len(reply) == 0 {
		return casReply{err: errors.New("empty reply from compare-and-set script")}
	}
	status, ok := reply[0].(int64)
	if !ok {
		return casReply{err: fmt.Errorf("compare-and-set script: unexpected status %T", reply[0])}
	}
	if status == 1 {
		return casReply{won: true}
	}
	if len(reply) < 3 {
		return casReply{} // no document
	}
	t, ok1 := reply[1].(string)
	d, ok2 := reply[2].(string)
	if !ok1 || !ok2 {
		return casReply{err: fmt.Errorf("compare-and-set script: unexpected reply %T, %T", reply[1], reply[2])}
	}
	return casReply{token: t, doc: []byte(d)}
}
