// Package postgres is the ledger's PostgreSQL store: one row per scope in
// a table that any number of gateway instances and agents share. It is the
// scale-out backend; a single node is better served by stores/bolt.
//
// # What it promises
//
// Store implements ledger.Store. Transact is atomic with respect to every
// other Transact on the same scope, in this process or any other using the
// same table: a write lands only if the row still holds the version the
// decision was made on, otherwise the decision is made again on the newer
// document. A read-only decision (the function returned nil or an error)
// is never made on a document that might be stale. Store errors are
// returned wrapped; they are never a decision, and a write whose fate is
// unknown (the connection broke after the statement was sent) is reported
// as an error, never as success, so callers retry through the ledger,
// whose decisions are idempotent. Every call honours its context's
// deadline, including while the server or the network is stalled.
//
// # Round trips
//
// A Store remembers, for a bounded number of scopes (Options.CacheSize),
// the version and document it last wrote or read. Transact runs the
// ledger's function on that copy (or on nil for a scope it does not know,
// which for the gateway is usually a new event) and writes with one
// compare-and-set statement. So an uncontended claim and settle, which is
// what one ledger.Once is, costs two round trips in total. When the copy
// was stale the row is read and the function runs again; when another
// process keeps winning, Transact locks the row (SELECT ... FOR UPDATE)
// and waits its turn there rather than racing. Goroutines of one process
// working on the same scope queue inside the process first, so they never
// make each other miss. After Options.MaxAttempts the call fails with an
// error wrapping ledger.ErrContention; nothing has been written then.
//
// A write that took side records as absent (ledger.Write.Absent: a claim
// on a long scope naming an entry that may have moved out) looks each up
// by primary key in the same statement, if the row still has the version
// decided on, and updates only if it found none; otherwise it answers the
// records it found, and Transact returns them as a *ledger.PresentError.
// The check costs no round trip of its own.
//
// A write reads only the side records it names. Each one it checks or
// deletes is a primary-key lookup of its own in the statement (the names
// in parameters of their own, up to four deletes; past that, rare, one
// array), so that the plan PostgreSQL caches for the statement cannot
// trade the name for a walk through every record of the scope. A plan
// made while the table was small, or never analyzed, did just that with
// name = ANY($n): a step on a scope of 10,000 records read all of them.
//
// # Group commit
//
// With synchronous_commit on, every commit waits for a WAL flush, and that
// flush, not the statement, is what limits a busy store. So concurrent
// compare-and-set writes to different scopes share one: a write that finds
// nothing queued and nothing in flight is sent at once as its own
// single-row statement (a lone writer never waits, and the round trip
// counts above still hold); otherwise it is queued, and the Store sends
// the queue in one round trip as one transaction, so one commit, carrying
// up to Options.MaxBatch writes (default 32), once a slot is free
// (at most two batches are in flight) and the batch is full, its oldest
// write has waited Options.BatchWindow (default 0.5 ms), or nothing else is
// in flight. Each write in a batch is the very statement it would be
// alone (the INSERT ... ON CONFLICT that creates a scope, or the
// compare-and-set UPDATE on the version); the batch is a pgx batch, which
// PostgreSQL runs as one implicit transaction, and its statements run in
// scope order, so two batches, from any processes, take their row locks in
// the same order and cannot deadlock each other. Every guarantee above
// holds per write:
//
//   - A caller is answered only after the batch's commit. A write that
//     lost its compare-and-set goes on as a lone one would (read, decide
//     again). If a statement or the commit fails, every write in the batch
//     fails with that error, a store failure, and none of them is visible:
//     it was one transaction. A deadlock or serialization failure reported
//     by the server means the transaction was rolled back, so every write
//     in it is treated as having lost and is decided again.
//   - Two writes to one scope are never in one batch: the process's
//     per-scope lock keeps them apart, and the batch checks anyway.
//   - A document the server rejects (not valid JSON or UTF-8) rolls its
//     batch back; the batch's writes are then sent alone, so it fails
//     alone.
//   - A caller whose context ends while its write is queued takes it out
//     and gets the context's error; nothing was sent. Once sent, it stops
//     waiting when its context ends, gets an error and forgets what it had
//     cached for the scope, since the write may land. The batch runs
//     until every caller in it has stopped waiting.
//
// Reads of a scope's row outside a transaction (Read, and Transact
// checking a decision that writes nothing, as a redelivery's answer is
// checked, or reading again after a lost compare-and-set) group the same
// way: a read that finds nothing in flight is its own single-row
// statement; otherwise it waits for the one grouped read in flight and
// goes with the reads queued behind it in one statement (scope =
// ANY($1)). A grouped read that fails fails every read in it, as a store
// error. Busy, this keeps the reads to one connection instead of one per
// concurrent redelivery.
//
// The goroutines of both (one dispatching while writes or reads are
// queued, one per batch in flight) run only while there is such work;
// Close stops them and waits for them, and must be called before the pool
// is closed. Writes fail after Close; reads still work, each alone.
//
// # Schema
//
// SchemaSQL returns the DDL (Migrate runs it, idempotently and safely from
// several processes at once): the table (scope text primary key, doc json,
// version bigint, expires_at, review_at, updated_at), a sequence the
// versions come from, and two partial indexes. The document is stored as
// json, not jsonb, because the store contract promises the ledger's bytes
// back unchanged; json keeps the text verbatim, still rejects malformed
// input and supports the JSON operators for inspection. The database must
// use the UTF8 (or SQL_ASCII) encoding for the bytes to survive intact.
// Versions are drawn from the sequence so that a row that is deleted and
// created again never repeats a version another process may have cached.
//
// # Expiry and review
//
// A write's TTL becomes expires_at, computed with the server's clock, the
// one clock every process agrees on (no TTL: NULL, kept until a later
// write; a negative TTL: expired at once). An expired row reads as absent
// everywhere and is overwritten by the next Transact; DeleteExpired removes
// such rows in batches to reclaim space, and should run periodically. A
// write's ReviewAt becomes review_at; a partial index over the rows where
// it is set lets ScopesToReview find scopes with ambiguous or soon-to-be
// ambiguous entries without scanning the table. ReviewAt is on the
// ledger's clock and is compared only with the time the caller passes.
//
// # Tests
//
// The tests run against a real server whose URL is read from
// REPLYONCE_TEST_POSTGRES (for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). Without it they
// skip, saying so; with it set and the server unreachable they fail. Each
// test works in a schema of its own, dropped at the end, so packages may
// run in parallel against one database. They include races between OS
// processes (the test binary re-executed), outages simulated with a
// closed port and a proxy that stalls or drops connections, and the group
// commit: batches forming under load, a batch whose transaction fails
// (a trigger rejecting one of its rows), and cancellation while queued.
package postgres
