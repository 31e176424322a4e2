package demo

import (
	"sync"
	"time"
)

// clock is the simulated time every component reads. Only the simulation
// moves it, and only forward. It is locked because a bolt store runs the
// ledger's transaction (which reads the clock) on bbolt's batch goroutine
// while the simulation waits for it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(start time.Time) *clock { return &clock{now: start} }

// Now is the clock as a func() time.Time for the ledger, stores, ingress,
// forwarder and signer.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// AdvanceTo moves the clock to t unless it is already past it: a retry
// scheduled while a longer piece of work was running happens when that work
// is done, never in the past.
func (c *clock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}
