package ledger

import (
	"fmt"
	"testing"
	"time"
)

// The replay memory holds what its size says, and no more: two
// generations of half the size each (a hit in the old one moves it to the
// current one, which can turn the generations over early).
func TestReplayCacheHoldsItsSize(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := newReplayCache(4, DefaultRetention)
	entry := func(i int) *Entry {
		return &Entry{ID: fmt.Sprint("e", i), State: StateCommitted, SettledAt: now}
	}
	for i := range 4 {
		c.remember("s", entry(i).ID, entry(i), now)
	}
	if n := c.len(); n != 4 {
		t.Errorf("a memory of 4 holds %d of the first 4 entries", n)
	}
	if _, ok := c.get("s", entry(3).ID, now); !ok {
		t.Error("the newest entry is forgotten")
	}
	for i := 4; i < 20; i++ {
		c.remember("s", entry(i).ID, entry(i), now)
		if n := c.len(); n > 4 {
			t.Fatalf("after %d entries the memory holds %d, more than its size 4", i+1, n)
		}
	}
	if (*replayCache)(nil).len() != 0 {
		t.Error("no memory holds something")
	}
}

// The replay memory also holds no more than its byte budget, however few
// entries that is: large values (an agent's answer kept for a provider's
// duplicates) turn the generations over early.
func TestReplayCacheHoldsItsBytes(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := newReplayCache(DefaultReplayCache, DefaultRetention)
	value := make([]byte, 1<<20)
	for i := range 200 {
		e := &Entry{ID: fmt.Sprint("e", i), State: StateCommitted, SettledAt: now, Value: value}
		c.remember("s", e.ID, e, now)
		var held int64
		c.mu.Lock()
		for _, m := range []map[replayKey]Entry{c.cur, c.old} {
			for _, e := range m {
				held += entryBytes(&e)
			}
		}
		c.mu.Unlock()
		if held > replayBytes {
			t.Fatalf("after %d entries of 1 MiB the memory holds %d bytes, over its budget of %d", i+1, held, replayBytes)
		}
	}
	if _, ok := c.get("s", "e199", now); !ok {
		t.Error("the newest large entry is forgotten")
	}
	huge := &Entry{ID: "huge", State: StateCommitted, SettledAt: now, Value: make([]byte, replayBytes)}
	c.remember("s", huge.ID, huge, now)
	if _, ok := c.get("s", "huge", now); ok {
		t.Error("an entry larger than a generation's budget is remembered")
	}
}
