package ledger

import (
	"bytes"
	"sync"
	"time"
)

// DefaultReplayCache is how many committed entries a Ledger remembers when
// Options.ReplayCache is zero.
const DefaultReplayCache = 10000

// replayBytes bounds the bytes of values and payloads the replay memory
// holds, whatever its entry count: an entry's value can be large (the
// gateway keeps an agent's answer for a provider, up to 1 MiB, in the
// deliver entry's value), and 10,000 of those must not take 10 GiB.
const replayBytes = 64 << 20

// replayMargin is taken off an entry's retention before a remembered entry
// stops being used: a process whose clock runs ahead of ours prunes the
// entry (and lets its document expire) that much earlier.
const replayMargin = 10 * time.Minute

// replayCache remembers entries this process saw committed, so that a claim
// for one of them (a provider's redelivery of an event already delivered, an
// agent's retry of a write that landed) is answered "replayed" without a
// store round trip. That answer cannot go stale: a committed entry never
// changes state again (but for one that a queued delivery stands for,
// which is never remembered: see document.rerunnable); it only leaves its
// document when retention prunes it or the document expires, and neither happens before SettledAt plus the
// retention, which is where a remembered entry stops being used (less
// replayMargin). Every process sharing a store is assumed to use the same
// retention: one with a shorter retention could forget an entry while
// another still replays it, which errs on the side of not redoing an effect.
//
// Two generations bound the memory: when the current one is full (half
// the entries, or half of replayBytes) it becomes the old one, and the
// previous old one is dropped. A hit in the old generation moves the entry
// forward.
type replayCache struct {
	retention time.Duration
	half      int   // entries per generation
	halfBytes int64 // bytes per generation

	mu       sync.Mutex
	cur, old map[replayKey]Entry
	curBytes int64
}

// entryBytes is what an entry costs the replay memory, roughly: its
// variable-length parts and a fixed overhead for the rest.
func entryBytes(e *Entry) int64 {
	return int64(len(e.Value)+len(e.Payload)+len(e.ID)+len(e.RunID)+len(e.Intent)+len(e.Summary)) + 256
}

type replayKey struct{ scope, id string }

// newReplayCache returns nil (no cache) for size < 0 or a retention too
// short to leave any time after the margin.
func newReplayCache(size int, retention time.Duration) *replayCache {
	if size == 0 {
		size = DefaultReplayCache
	}
	if size < 0 || retention <= replayMargin {
		return nil
	}
	half := max(size/2, 1)
	return &replayCache{retention: retention, half: half, halfBytes: replayBytes / 2,
		cur: make(map[replayKey]Entry, half), old: map[replayKey]Entry{}}
}

// usable reports whether e can still be answered from memory at now.
func (c *replayCache) usable(e *Entry, now time.Time) bool {
	return now.Before(e.SettledAt.Add(c.retention - replayMargin))
}

// get returns a copy of the committed entry, if remembered and still
// usable at now. The copy has its own Payload and Value: a caller may
// change what it was handed without changing later replays.
func (c *replayCache) get(scope, id string, now time.Time) (*Entry, bool) {
	if c == nil {
		return nil, false
	}
	k := replayKey{scope, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[k]
	if !ok {
		if e, ok = c.old[k]; !ok {
			return nil, false
		}
		delete(c.old, k)
		c.add(k, e)
	}
	if !c.usable(&e, now) {
		delete(c.cur, k)
		c.curBytes -= entryBytes(&e)
		return nil, false
	}
	e.Payload, e.Value = bytes.Clone(e.Payload), bytes.Clone(e.Value)
	return &e, true
}

// remember keeps e, under the id claims look it up by, if it is committed
// and still usable at now. Call it only
// with an entry read from, or written to, the store: never with one from a
// decision whose write may not have landed.
func (c *replayCache) remember(scope, id string, e *Entry, now time.Time) {
	if c == nil || e == nil || e.State != StateCommitted || e.SettledAt.IsZero() || !c.usable(e, now) || entryBytes(e) > c.halfBytes {
		return
	}
	k := replayKey{scope, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := *e
	// A copy of the bytes too: the entry's may still be a caller's.
	cp.Payload, cp.Value = bytes.Clone(e.Payload), bytes.Clone(e.Value)
	delete(c.old, k)
	c.add(k, cp)
}

// add puts e in the current generation, turning it over when full. c.mu
// must be held.
func (c *replayCache) add(k replayKey, e Entry) {
	size := entryBytes(&e)
	if prev, ok := c.cur[k]; ok {
		c.curBytes -= entryBytes(&prev)
	} else if len(c.cur) >= c.half || c.curBytes+size > c.halfBytes {
		c.old, c.cur, c.curBytes = c.cur, make(map[replayKey]Entry, c.half), 0
	}
	c.cur[k] = e
	c.curBytes += size
}

// len reports how many entries are remembered, for tests.
func (c *replayCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
