// Package bolt is the embedded, durable ledger.Store: one bbolt file on local
// disk, for a gateway that runs as a single instance. It is the default
// store of `gateway serve`.
//
// Every write is fsynced before Transact returns. Transacts that arrive
// while a commit is running go together in the next one (group commit, see
// committer), so many callers share one set of fsyncs without any of them
// returning before its write is on disk, and a lone writer never waits.
// Each function runs first in a read transaction, on its caller's
// goroutine, so the decisions of a commit use every core rather than the
// one writer; the commit saves such a write only if nothing wrote its scope
// since that read, and otherwise runs the function again on the current
// document, so the read-modify-write of one scope is atomic. A function's
// own error, or a decision that writes nothing, is answered from its read
// and waits for no commit.
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
