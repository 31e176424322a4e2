// Package stores groups the ledger's storage backends, one sub-package per
// backend, each named after what it stores in: memory, bolt, postgres and
// redis. Every one of them passes the same conformance and race suite,
// stores/storetest.
//
// Open (open.go) is the one switch over them: it opens the store a Config
// (the gateway's `store:` section) names, for serve, check and bench alike,
// and Kinds lists them. A new kind is a sub-package and an entry in that
// one file (its opener, and its cases in Config.Check and Config.String).
//
// # Queued delivery in the stores
//
// A Write may carry blobs (side records of the scope, such as a queued
// event's body) and a due time. Each store writes them in the same atomic
// step as the document, indexes the due time next to the review time, and
// lets blobs expire with their document:
//
//   - memory: both kept in the scope's record under the store's mutex.
//   - bolt: a "due" bucket keyed (time, scope) like "review", and a
//     "blobs" bucket keyed (length-prefixed scope, name), all in the
//     group commit's transaction.
//   - postgres: a due_at column with a partial index, like review_at, and
//     a <table>_blobs table, deleted with the scope's row. A
//     write with blobs is one statement: the compare-and-set in a CTE, the
//     blob upserts and deletes joined to its RETURNING row, so they land
//     exactly when it wins, in the same transaction (and group commit).
//   - redis: a per-bucket "due" sorted set beside "review", and one hash
//     of blobs per scope in the scope's hash slot, written by the same
//     compare-and-set script and given the document's TTL on every write.
//
// ScopesDueBetween reads the same due index from a lower bound as well
// (a bolt cursor seek, a range on the Postgres index, ZRANGE BYSCORE from
// that score in each Redis bucket): the ledger finds a resumed source's
// parked deliveries at the source's own parking time with it, and a
// dispatcher reads the page after one full of a busy source's deliveries.
// CountDue counts the index up to a time (the memory store's due set, a
// bolt cursor walk, a count over the Postgres index, ZCOUNT in each Redis
// bucket) for the queue gauges.
//
// The received index (Write.ReceivedAt: the newest receipt time of the
// scope's kept queued events) lists scopes newest first for operators,
// every status included. It is kept the same way, written by the same
// atomic step and gone with the document:
//
//   - memory: a field of the record.
//   - bolt: a "received" bucket keyed (time, scope), walked backwards,
//     and a "received-at" bucket (scope to time) to find the key a write
//     replaces, so the meta record keeps its layout.
//   - postgres: a received_at column with a partial index on
//     (received_at DESC, scope DESC), added to older tables by Migrate
//     only when missing, like due_at; a page is a row comparison against
//     the cursor.
//   - redis: a per-bucket "received" sorted set in the scope's slot, kept
//     by the compare-and-set script (its last argument), read by one
//     pipelined reverse range per bucket and merged newest first.
//
// # Control records
//
// The ledger's own settings shared by every process (which sources are
// paused) are control records, kept outside the scope key space so that no
// scope a webhook or an agent names can reach one (ReadControl and
// TransactControl): a map of their own in memory, a "control" bucket in
// bolt, a <table>_control table in Postgres (created by Migrate), and a
// {prefix}control:{name} key in Redis, written with WATCH/MULTI, where
// every scope's key carries a hash tag and ":s:". They never expire.
//
// The queue's own rules (what is due, who holds a delivery, what it came
// to) are the ledger's, decided on the document like every other rule, so
// the stores share them through stores/storetest.
package stores
