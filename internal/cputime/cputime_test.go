package cputime

import (
	"crypto/sha256"
	"runtime"
	"testing"
	"time"
)

// CPU work shows in the figure, on every platform the gateway ships for.
func TestSelfCountsWork(t *testing.T) {
	before, ok := Self()
	if !ok {
		t.Fatalf("no CPU time on %s/%s, one of the gateway's release platforms", runtime.GOOS, runtime.GOARCH)
	}
	// Busy for a quarter second of wall time: more than Windows' 15.6 ms
	// accounting tick, however loaded the machine.
	sum := sha256.Sum256(nil)
	for start := time.Now(); time.Since(start) < 250*time.Millisecond; {
		sum = sha256.Sum256(sum[:])
	}
	after, ok := Self()
	if !ok || after <= before {
		t.Fatalf("after busy work: %v (ok %t), before: %v", after, ok, before)
	}
}
