// Package bolt is the embedded, durable ledger.Store: one bbolt file on local
// disk, for a gateway that runs as a single instance. It is the default
// store of `gateway serve`.
//
// Every write is fsynced before Transact returns. Transacts that arrive
// while a commit is running go together in the next one (group commit, see
// committer), so many callers share one set of fsyncs without any of them
// returning before its write is on disk, and a lone writer never waits.
// Within a commit each function runs alone, in arrival order, on the
// current document, so the read-modify-write of one scope is atomic; a
// function's own error writes nothing and reaches only its caller.
//
// Layout: bucket "docs" maps scope → document; bucket "meta" maps scope →
// 16 bytes (physical expiry and review time, Unix nanoseconds, big-endian);
// bucket "review" holds keys (review time ‖ scope) in time order for
// ScopesToReview. Only one process may open the file at a time (bbolt takes
// an exclusive file lock); sharing a ledger across processes needs Postgres
// or Redis.
package bolt
