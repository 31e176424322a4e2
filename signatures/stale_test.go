package signatures

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The stale-timestamp message says which way the clock is off.
func TestStaleSaysAgoOrAhead(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := checkTime(now.Add(-10*time.Minute-time.Second), now, 5*time.Minute, "t")
	if !errors.Is(old, ErrStale) || !strings.Contains(old.Error(), "t is 10m1s ago") {
		t.Errorf("old signature: %v", old)
	}
	future := checkTime(now.Add(7*time.Minute), now, 5*time.Minute, "t")
	if !errors.Is(future, ErrStale) || !strings.Contains(future.Error(), "t is 7m0s ahead") {
		t.Errorf("future signature: %v", future)
	}
	// Milliseconds read as seconds: the difference saturates, and is still said to be ahead.
	far := checkTime(time.Unix(now.UnixMilli(), 0), now, 5*time.Minute, "t")
	if !errors.Is(far, ErrStale) || !strings.Contains(far.Error(), "t is 2562047h47m16") {
		t.Errorf("timestamp in milliseconds read as seconds: %v", far)
	}
	if err := checkTime(now.Add(-time.Minute), now, 5*time.Minute, "t"); err != nil {
		t.Errorf("fresh: %v", err)
	}
}
