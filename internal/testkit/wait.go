package testkit

import (
	"testing"
	"time"
)

// Deadline bounds every Eventually. It is reached only when the code under
// test is broken; on a loaded two-core CI machine a correct run takes a
// small fraction of it.
const Deadline = 20 * time.Second

// Eventually polls cond until it holds, and fails t, naming what, when
// Deadline passes first. It polls every millisecond at first, then backs
// off to every 10 ms, so that a fast answer is seen at once and a slow one
// costs little CPU.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Within(Deadline, cond) {
		t.Fatalf("timed out after %s waiting until %s", Deadline, what)
	}
}

// Within polls cond until it holds or d passes, and says whether it held:
// for a helper without a testing.TB, whose caller reports the failure.
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
	return true
}
