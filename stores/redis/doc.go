// Package redis keeps the ledger in Redis, so that several gateway
// processes, and agents on other machines, share one ledger. It works with
// a single server, with Sentinel and with Redis Cluster, through go-redis
// v9.
//
// # Topologies
//
// Config (the gateway's store.redis) and the store's URL name one
// deployment: a single server by URL, a Cluster by seed addresses, or a
// master by its Sentinels' name for it; with ACL users and TLS. Topology
// checks them (every problem a *FieldError naming the setting, TLS files
// read) and holds go-redis's own ClusterOptions, FailoverOptions or
// Options, so checking a configuration and opening it agree. go-redis
// follows Cluster redirects and Sentinel's announcements of a new master.
//
// # Layout
//
// Each scope is one hash, {prefix}{bb}:s:{scope}, holding the document (d)
// and a version token (t). bb is one of 256 buckets, chosen by hashing the
// scope. Each bucket also has a sorted set, {prefix}{bb}:review, scoring
// its scopes that need review by their review time in Unix milliseconds.
// (Hashes written by earlier releases may also hold an r field with that
// time; nothing reads it.) The braces make {bb} the Redis Cluster hash
// tag, so a scope and its bucket's index always live in the same slot.
// Control records are plain string keys, {prefix}control:{name}, written
// with WATCH and MULTI: without a hash tag, so never a scope's key.
//
// # Atomicity
//
// Every change is one Lua script run against the scope's hash and its
// bucket's index: it compares the stored token with the one the caller's
// decision was based on, and only if they match stores the new document and
// its expiry, and updates the index. Redis runs scripts
// one at a time, so two writers of the same scope, in any number of
// processes, cannot both win. The script is sent with EVALSHA and, when the
// server has forgotten it (a restart, SCRIPT FLUSH, a failover), with EVAL.
//
// Tokens are random, fresh for every write, rather than counters: a key
// that expired and was created again, or a write lost in a failover and
// replaced by another, never shows a token an old cache remembers. Because
// a token is fresh per attempt, the script also recognises a client retry
// of its own write whose reply was lost, and reports it as done rather
// than as a conflict, so a retried increment cannot count twice.
//
// # Round trips
//
// A Store remembers, in a bounded in-process cache, the last token and
// document it read or wrote for each scope. Transact runs the caller's
// function on that copy (nil, and "no document", for a scope it has not
// seen) and sends the result in one script call: one round trip when
// nobody else wrote in between, so a claim plus its settle costs two. When
// someone did, the script's reply carries the current document and the
// function runs again on it, without a separate read. A conflict caused
// only by this process's copy being out of date is not counted; real races
// are retried with jittered backoff up to Options.MaxRetries times, then
// Transact fails with a *ContentionError, which matches ledger.ErrContention.
//
// A write that took side records as absent (ledger.Write.Absent) has the
// script look them up in the scope's blob hash (one HMGET) once the token
// matches; if one exists the script writes nothing and answers them, and
// Transact returns them as a *ledger.PresentError, in the same round trip.
//
// When the function decides not to write, or refuses with an error, on a
// copy from the cache, Transact reads the scope once before believing it:
// a write from another process could change the answer. A function error is
// then returned unchanged, and nothing is written.
//
// Goroutines of one process that write the same scope take turns
// (stores/internal/scopelock), each deciding on the document the one
// before wrote, as the Postgres store's do: on a hot scope they would
// otherwise make each other's script fail, decide again and back off (a
// conversation with many deliveries in flight spent more round trips
// losing than writing). Other processes still race through the script.
//
// Under load, writes share round trips: once four are in flight from one
// Store, further writes queue and leave together in one pipeline of up to
// Options.MaxBatch scripts as soon as a round trip is free. Redis runs each
// script of a pipeline alone and in order, so batching changes how bytes
// travel, not what any write decides. A queued write whose caller gives up
// is never sent.
//
// # Listing scopes to review, on Cluster
//
// ScopesToReview cannot scan one global index on Cluster without giving up
// the atomic update: a key in another slot cannot be touched by the write
// script. Spreading the index over 256 hash-tagged buckets keeps the index
// exact (it changes in the same script as the document) at the cost of
// asking all 256 indexes when listing, in one pipelined call per node.
// The index can name a scope that needs no review in two ways only: the
// document expired, or it expired and was created again (a creating write
// clears no index, as the earlier life's entries are rare and each clear
// is a command on every new scope). The scope's hash records, under its
// token, which indexes its last write left it in (field x); a listing skips
// an entry whose document is gone or whose x says the index does not hold
// it, and removes it, by a script that checks the same thing atomically.
// The due and received indexes work the same way.
//
// A Store's keys occupy at most 256 slots, plenty to spread over a cluster's
// masters. The prefix must not contain braces, as they would change the
// hash tag.
//
// # Expiry
//
// Write.TTL becomes a PEXPIRE on the scope's hash (rounded up to whole
// milliseconds, at least one); zero removes any expiry. Redis deletes the
// key when the time has passed; the ledger already treats an expired
// document as absent.
//
// # Deadlines and outages
//
// Every call ends when its context does, including on a connection that has
// stalled, provided the go-redis client has ContextTimeoutEnabled set:
// without it, go-redis waits for its own ReadTimeout whatever the context
// says. New therefore refuses (panics on) a go-redis client without it, and
// Open sets it. An unreachable or failing server is always an error, never
// a decision. A write whose reply was lost may or may not have landed; the
// caller hears an error and the next Transact sees the truth.
//
// # Durability
//
// Redis acknowledges a write before it is on disk, and replicates it to
// replicas afterwards. A crash loses what the persistence settings had not
// yet saved (everything, with persistence off), and a failover can lose
// writes the old master had already acknowledged. A lost claim means the
// ledger may let an effect happen a second time; a lost queued event is
// never delivered. Where that matters, run Redis with appendonly yes and
// appendfsync always, use min-replicas-to-write to narrow the failover
// window, or use the Postgres or bolt store. Store.Persistence reads the
// server's settings (CONFIG GET, which changes nothing) and says what a
// crash of it can lose; `gateway serve` logs it.
//
// Options.Replicas closes the failover window: after each write (or
// pipeline of writes) the store sends WAIT on the same connection, to the
// master that holds the scope, and reports the write done only once that
// many replicas have it. When they do not within ReplicasTimeout, the
// write fails with a *ReplicasError although the master has it; the
// caller hears a failure, and the next Transact sees the write. A
// Transact that decides not to write confirms the document it read the
// same way (rewriting its token unchanged, then WAIT), so an answer never
// rests on a write only the master has. What WAIT does not do: make the
// write durable on disk (appendfsync does), or stop a master that has lost
// its replicas from taking writes nobody waits for (min-replicas-to-write
// does).
//
// # Tests
//
// The tests run against a real server named by REPLYONCE_TEST_REDIS (for
// example redis://127.0.0.1:6379/0), and the Cluster tests against the
// cluster REPLYONCE_TEST_REDIS_CLUSTER names (seed addresses). Unset, they
// skip and say so, or fail in CI; set but unreachable, they fail. Each
// test writes under its own random prefix and deletes it afterwards. The
// tests of replicas, TLS, ACL users and Sentinel start servers of their own
// (package testservers). The cross-process tests re-execute the test
// binary.
package redis
