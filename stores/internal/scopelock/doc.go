// Package scopelock serialises one process's store transactions on a scope.
//
// The Postgres and Redis stores decide on a cached copy of a scope's
// document and write with a compare-and-set. Goroutines of one process
// that write the same scope at once (a conversation with many deliveries
// in flight) would make each other's compare-and-set fail, decide again
// and back off: on a hot scope more round trips go to losing than to
// writing. Queued behind a lock instead, each finds the cache holding what
// the previous one wrote and wins at the first try. Other processes still
// race through the compare-and-set, which is what keeps the stores
// correct; the lock only saves work.
package scopelock
