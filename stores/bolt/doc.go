// Package bolt is the embedded, durable ledger.Store: one bbolt file on local
// disk, for a gateway that runs as a single instance. It is the default
// store of `gateway serve`.
//
// Every write is fsynced before Transact returns. Concurrent transactions
// are grouped into one bbolt transaction (bbolt's Batch), so many callers
// share one fsync without any of them returning before its write is on
// disk. Within a batch each function runs alone on the current document, so
// the read-modify-write of one scope is atomic.
//
// Layout: bucket "docs" maps scope → document; bucket "meta" maps scope →
// 16 bytes (physical expiry and review time, Unix nanoseconds, big-endian);
// bucket "review" holds keys (review time ‖ scope) in time order for
// ScopesToReview. Only one process may open the file at a time (bbolt takes
// an exclusive file lock); sharing a ledger across processes needs Postgres
// or Redis.
package bolt
