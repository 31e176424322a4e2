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
// function's own error writes nothing and reaches only its caller. (Running
// the functions ahead, in parallel on read snapshots, was tried: the
// commits then came faster and carried fewer writes each, and the extra
// fsyncs cost more than the parallel decisions saved; docs/performance.md.)
//
// Layout: bucket "docs" maps scope → document (packed with S2 when that
// makes it smaller, see packDoc); bucket "meta" maps scope → 24 bytes
// (physical expiry, review and due time, Unix nanoseconds, big-endian; 16
// in files written before queued delivery); buckets "review" and "due"
// hold keys (time ‖ scope) in time order for ScopesToReview and
// ScopesDue; "received" and "received-at" order scopes by their newest
// event; "blobs" holds each scope's side records under a prefix of the
// scope; "control" the control records. Only one process may open the
// file at a time (bbolt takes an exclusive file lock); sharing a ledger
// across processes needs Postgres or Redis.
package bolt
