package bolt

import (
	"fmt"
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"

	"github.com/replyonce/gateway/ledger"
)

// DefaultMaxBatch is how many Transacts one commit carries at most when
// Options.MaxBatch is zero.
const DefaultMaxBatch = 256

// committer is the store's group commit. bbolt has one writer at a time
// and every commit pays for its fsyncs, so Transacts that arrive while a
// commit is running wait for it to end and then go together in the next
// one:
//
//   - A Transact that finds no commit running starts one at once with
//     itself alone: a lone writer waits for nobody (bbolt's own Batch
//     would wait MaxBatchDelay first).
//   - Otherwise it queues. When a commit ends, the first queued Transact
//     becomes the leader and runs the next commit, carrying everything
//     queued by then, up to maxBatch; the others wait for that commit.
//   - Each Transact's function runs alone, in arrival order, inside the
//     shared transaction, on the document as the writes before it in the
//     same commit left it: the read-modify-write of one scope stays atomic.
//   - The ledger's own refusals (the function's error), and a write that
//     takes as absent a record that exists, write nothing and reach only
//     their caller. A storage failure fails the whole commit,
//     which writes nothing, and every caller in it gets the error.
//   - Nobody returns before the commit carrying its write is on disk.
//
// No goroutine of its own: the leader is always a caller.
type committer struct {
	s        *Store
	maxBatch int

	mu      sync.Mutex
	queue   []*pendingTx
	running bool // a commit is running or about to; the next one is led from the queue

	// For tests and diagnostics.
	commits, carried atomic.Int64
}

// pendingTx is one Transact waiting for, or in, a commit. lead is closed
// when the Transact must run the next commit itself; done when a commit
// that carried it has ended, with err set.
type pendingTx struct {
	scope string
	fn    func([]byte) (*ledger.Write, error)

	lead  chan struct{}
	done  chan struct{}
	fnErr error // the function's own error: nothing written
	err   error // the commit's failure
}

// transact returns the function's own error (nothing written) and the
// commit's failure, separately.
func (c *committer) transact(scope string, fn func([]byte) (*ledger.Write, error)) (fnErr, err error) {
	p := &pendingTx{scope: scope, fn: fn, lead: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	if c.running {
		c.mu.Unlock()
		select {
		case <-p.done:
			return p.fnErr, p.err
		case <-p.lead:
		}
	} else {
		c.running = true
		c.mu.Unlock()
	}
	c.commitQueued()
	<-p.done
	return p.fnErr, p.err
}

// commitQueued runs one commit for the queue's head (the caller is in it),
// then hands the lead to the next queued Transact, if any.
func (c *committer) commitQueued() {
	c.mu.Lock()
	n := min(len(c.queue), max(c.maxBatch, 1))
	batch := c.queue[:n:n]
	c.queue = append([]*pendingTx(nil), c.queue[n:]...)
	c.mu.Unlock()

	c.commits.Add(1)
	c.carried.Add(int64(len(batch)))
	err := c.s.db.Update(func(tx *bbolt.Tx) error {
		for _, p := range batch {
			if err := c.s.apply(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && len(batch) > 1 {
		err = fmt.Errorf("commit of %d writes: %w", len(batch), err)
	}

	c.mu.Lock()
	if len(c.queue) > 0 {
		close(c.queue[0].lead)
	} else {
		c.running = false
	}
	c.mu.Unlock()
	for _, p := range batch {
		if err != nil {
			p.err = err
		}
		close(p.done)
	}
}

// apply runs one Transact's function inside the shared transaction and
// saves what it returns, unless it takes as absent a record of its live
// scope that exists (ChecksAbsent). Only a storage failure is returned: the
// function's own error, or the present records, are the caller's answer,
// and nothing is written for it. A panic in the function is that caller's
// error too, so the others are not left waiting.
func (s *Store) apply(tx *bbolt.Tx, p *pendingTx) error {
	doc, err := s.current(tx, p.scope)
	if err != nil {
		p.fnErr = err
		return nil
	}
	w, err := safely(p.fn, doc)
	if err != nil || w == nil {
		p.fnErr = err
		return nil
	}
	if doc != nil {
		if present := presentOf(tx, p.scope, w.Absent); present != nil {
			p.fnErr = present
			return nil
		}
	}
	return s.put(tx, p.scope, w, packDoc(w.Doc))
}

func safely(fn func([]byte) (*ledger.Write, error), doc []byte) (w *ledger.Write, err error) {
	defer func() {
		if r := recover(); r != nil {
			w, err = nil, fmt.Errorf("bolt store: transaction function panicked: %v", r)
		}
	}()
	return fn(doc)
}
