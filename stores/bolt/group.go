package bolt

import (
	"bytes"
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
//   - A Transact that finds a commit running runs its function while it
//     waits, in the caller's goroutine, on the scope's document as the
//     last commit left it (a bbolt read transaction). Inside the shared
//     transaction, in arrival order, the commit looks at the document
//     again: if it is still the one the function saw (the same bytes,
//     still live), what the function returned is written (or refused) as
//     it is; if a write before it, in this commit or an earlier one,
//     changed it, the function runs again there, on the document as those
//     writes left it. A Transact that leads a commit at once runs its
//     function there. The read-modify-write of one scope stays atomic, and
//     the one writer spends its time on writes, not on the ledger's decisions
//     (issue #29: while a dispatcher drained a backlog the writer was busy
//     most of the time, and the decisions were about a third of its CPU).
//   - The ledger's own refusals (the function's error) write nothing and
//     reach only their caller. A storage failure fails the whole commit,
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

	// For tests and diagnostics: commits run, Transacts they carried,
	// and functions run in a commit (not prepared: the Transact led a
	// commit at once, or its document could not be read; or prepared on
	// a document that changed before its commit).
	commits, carried, reruns atomic.Int64
	// prepareReads counts the documents prepare read from the file (not
	// in docCache).
	prepareReads atomic.Int64
}

// pendingTx is one Transact waiting for, or in, a commit. lead is closed
// when the Transact must run the next commit itself; done when a commit
// that carried it has ended, with err set.
type pendingTx struct {
	scope string
	fn    func([]byte) (*ledger.Write, error)

	// prepared says fn already ran, before the commit, on base (the
	// scope's live document then, nil for none), and answered w, wErr.
	prepared bool
	base     []byte
	w        *ledger.Write
	wErr     error
	// written is the document the commit wrote for it (nil: none).
	written []byte

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
	if c.running {
		// It waits for that commit anyway: its function runs meanwhile,
		// outside the writer. A lone writer does not pay for the read.
		c.mu.Unlock()
		c.s.prepare(p)
		c.mu.Lock()
	}
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

	// The documents this commit wrote are what the next Transacts on
	// their scopes will be prepared on; a failed commit wrote none.
	for _, p := range batch {
		if err != nil {
			c.s.docs.drop(p.scope)
		} else if p.written != nil {
			c.s.docs.put(p.scope, p.written)
		}
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

// prepare runs p's function on the scope's document as the last commit
// left it, outside the writer, while p waits for the commit under way:
// the document this process last wrote or read for the scope (docCache),
// else one read from the file. The commit checks it is still the live one
// either way. A document that cannot be read leaves p unprepared: its
// function then runs in the commit.
func (s *Store) prepare(p *pendingTx) {
	base, ok := s.docs.get(p.scope)
	if !ok {
		s.commit.prepareReads.Add(1)
		if err := s.db.View(func(tx *bbolt.Tx) error {
			base = s.current(tx, p.scope)
			return nil
		}); err != nil {
			return
		}
	}
	p.w, p.wErr = safely(p.fn, bytes.Clone(base))
	p.base, p.prepared = base, true
}

// apply saves what one Transact's function returns for the document the
// shared transaction holds: the answer prepared before the commit when
// that document is still the one it was prepared on, else the function's
// answer run again here. Only a storage failure is returned: the
// function's own error is the caller's answer, and nothing is written for
// it. A panic in the function is that caller's error too, so the others
// are not left waiting.
func (s *Store) apply(tx *bbolt.Tx, p *pendingTx) error {
	doc := s.live(tx, p.scope)
	w, err := p.w, p.wErr
	if !p.prepared || !sameDoc(doc, p.base) {
		s.commit.reruns.Add(1)
		w, err = safely(p.fn, bytes.Clone(doc))
	}
	if err != nil || w == nil {
		p.fnErr = err
		return nil
	}
	if err := s.put(tx, p.scope, w); err != nil {
		return err
	}
	p.written = w.Doc
	return nil
}

// docCacheBytes bounds the bytes of the documents docCache keeps: a
// dispatcher's deliveries in flight many times over. A document larger
// than docCacheLargest is not kept.
const (
	docCacheBytes   = 8 << 20
	docCacheLargest = docCacheBytes / 64
)

// docCache keeps the document this process last wrote or read for recent
// scopes, so that a Transact waiting for a commit is prepared without a
// read of its own: a swept delivery's take is prepared on the document
// the due listing read, its settle on the one its take wrote. An entry
// may be stale (expired, or deleted by DeleteExpired): the commit compares
// it with the live document and runs the function again when they differ.
type docCache struct {
	mu   sync.Mutex
	m    map[string][]byte
	size int // bytes of the documents in m
}

func (c *docCache) get(scope string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	doc, ok := c.m[scope]
	return doc, ok
}

// put keeps doc, which nobody may change afterwards, for scope, first
// dropping arbitrary entries while the cache would hold more than
// docCacheBytes.
func (c *docCache) put(scope string, doc []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(scope)
	if len(doc) > docCacheLargest {
		return
	}
	for k, v := range c.m {
		if c.size+len(doc) <= docCacheBytes {
			break
		}
		delete(c.m, k)
		c.size -= len(v)
	}
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	c.m[scope] = doc
	c.size += len(doc)
}

func (c *docCache) drop(scope string) {
	c.mu.Lock()
	c.forget(scope)
	c.mu.Unlock()
}

// forget drops scope's entry; c.mu is held.
func (c *docCache) forget(scope string) {
	if old, ok := c.m[scope]; ok {
		delete(c.m, scope)
		c.size -= len(old)
	}
}

// clear drops every entry.
func (c *docCache) clear() {
	c.mu.Lock()
	c.m, c.size = nil, 0
	c.mu.Unlock()
}

// sameDoc says whether a and b are the same document, or both none.
func sameDoc(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func safely(fn func([]byte) (*ledger.Write, error), doc []byte) (w *ledger.Write, err error) {
	defer func() {
		if r := recover(); r != nil {
			w, err = nil, fmt.Errorf("bolt store: transaction function panicked: %v", r)
		}
	}()
	return fn(doc)
}
