package testkit

import (
	"sync/atomic"
	"testing"
	"time"
)

// Within returns once the condition holds, and gives up, saying so, when
// the time passes first.
func TestWithin(t *testing.T) {
	var n atomic.Int32
	if !Within(Deadline, func() bool { return n.Add(1) == 3 }) {
		t.Fatal("a condition that comes true on the third look was not seen")
	}
	if n.Load() != 3 {
		t.Fatalf("looked %d times, want 3", n.Load())
	}
	if Within(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported to hold")
	}
}

// The clock moves only when told to.
func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now() = %v, want %v", c.Now(), start)
	}
	c.Advance(time.Minute)
	if got := c.Now().Sub(start); got != time.Minute {
		t.Fatalf("after Advance(1m): %v later", got)
	}
}
