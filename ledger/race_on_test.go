//go:build race

package ledger_test

// raceDetector: this test binary runs under -race, where the randomized
// long tests take one history instead of several (ten times slower each).
const raceDetector = true
