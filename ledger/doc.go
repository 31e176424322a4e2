// Package ledger decides, for every side effect an agent or the gateway wants
// to make, whether it may happen now, already happened, is happening
// elsewhere, or must not happen because the caller's view of the world is
// stale.
//
// All state for one scope (a conversation, an order, or a single webhook
// event) lives in one small JSON document. Every decision is a pure function
// of that document, the request, the time on the injected clock and the
// options; a Store only makes the read-modify-write of one document atomic.
// That is why the memory, bolt, Postgres and Redis stores behave alike and
// share one conformance suite (stores/storetest).
//
// A Ledger's own methods are the idempotency verbs (Claim, Settle, Once,
// Check, Begin, Resolve, ...). Queued delivery, the per-source control
// records and the read-only listings are reached through Ledger.Queue,
// Ledger.Sources and Ledger.Views, one value per noun.
//
// # What it promises
//
// With a shared store and every effect going through the ledger:
//
//   - No concurrent attempts: for one key, a new attempt starts only when no
//     attempt is pending and every earlier attempt is known not to have
//     applied.
//   - Committed is final: a committed effect is replayed, never run again,
//     for as long as the retention keeps it.
//   - Fencing: a run whose fencing token is stale (a later delivery of the
//     same run, a newer run in supersede mode, or an exclusive lease taken
//     over) cannot claim, and its End (EndDelivery) changes nothing. A
//     finished run cannot claim either, nor get a claim from BeginClaim.
//   - No writing from a stale view: a run's claim is refused with
//     conversation_changed while another write on the scope is pending, or
//     when one landed after the run's context was captured. The refusal
//     records an acknowledgement, so the next attempt (after the caller has
//     re-read) goes through.
//   - Ambiguity is preserved: an outcome that is not known is never retried
//     unless a reconciler or an operator says it did not happen. An
//     ambiguous entry, and a pending one that will read as ambiguous when
//     abandoned, is never pruned: its document loses its expiry until the
//     entry is resolved or settled.
//
// # Claims, leases and abandonment
//
// A claim is a lease on one attempt: its holder has until the deadline
// (claimedAt + pending TTL) to settle. Past the deadline nobody holds it:
//
//   - A claim that is not redeliverable reads as ambiguous (abandoned) and
//     stays until a reconciler, an operator or its own late settle says
//     what happened.
//   - A redeliverable claim (the gateway's deliver) lets the next claim
//     start a new attempt, stops counting as a pending write for other
//     runs' conflict checks, and is pruned one retention after its
//     deadline. An abandoned attempt is not a failure: MaxAttempts counts
//     only attempts known not to have applied.
//   - A settle after the deadline is recorded and flagged late_settle. If
//     the attempt was replaced meanwhile, the newer attempt stands and the
//     settle changes nothing (the ledger cannot recall an effect the newer
//     attempt already started).
//   - A worker's settle after an operator or reconciler resolved its
//     attempt not_applied: the worker's word wins where it says the effect
//     applied. The entry becomes committed with the worker's value, flagged
//     late_settle, and is replayed from then on, never redone; the failure
//     the resolution counted is taken back. Any other late outcome agrees
//     with the resolution and only adds the flag.
//
// An exclusive run's lease renews, on every claim and heartbeat, by the
// lease TTL the run began with (the ledger's LeaseTTL when none was
// given). Each delivery starts afresh: a run whose earlier delivery lost
// the lease takes it again once it is free.
//
// # Seeing the scope: contextAt and sequences
//
// Every write that lands (committed or ambiguous) takes the next sequence
// number and is appended to the document's landing list with the time on
// the clock of the instance that landed it. A run's contextAt maps to the
// sequence it has seen by walking that list in sequence order and stopping
// at the first landing stamped after contextAt; wall time never orders
// writes. Skew bound: with instance clocks at most δ apart, a write counts
// as seen only if it, and every write before it, was stamped no later than
// contextAt, so a write that truly landed more than δ after the context was
// captured is never counted as seen; one within δ of it may be, which is
// why clock skew must stay well below the time a run takes to read and
// answer. A contextAt more than MaxContextAhead past the ledger's clock, or
// outside years 1 to 9999, is refused ErrInvalid.
//
// A stored document the ledger cannot read (bad JSON, another format, a
// null entry or run) is reported as an error wrapping ErrCorrupt.
//
// A long scope keeps its document small: once 24 settled entries with no
// queued delivery still to go (and outside any cap's window) pile up, all
// but the newest 8 move into side records of the scope in the same store
// step, and the document, now format 2, counts and lists them (spill.go).
// A delivered, coalesced or superseded delivery moves out with its deliver
// entry, inline ones included (format 4: an older build would take the
// event for a new one); a waiting, dead, rejected or failed one stays.
// Exact lookups (a claim, an enqueue, a settle, Check, a replay, a trial)
// read the one record they need, and a decision on a delivery that moved
// out moves it back into the document if it changes it; History,
// Conversation, CommittedValue and a run whose context predates them read
// them all; HistoryPage reads a page, newest first, and only the records
// that page needs; the lists of deliveries read the records whose receipt
// times they list (RecentDeliveries, a page's worth, newest first). Format 1 documents are still read and are
// rewritten as format 2 when they first spill. The landing list (one
// sequence and time per write within retention, which maps a run's
// contextAt to the writes it has seen) keeps its newest 32 to 63 in the
// document and moves older ones out in chunks of 32, listed in pages of 16
// (landings.go); such a document is format 3. A run whose context predates
// the landings still in the document reads the one chunk (and page) its
// context falls in. The chunk listings fold into pages of 8 once 16 are
// listed (spillpages.go; format 3 too), and pages of either kind into
// pages of pages the same way, level by level (format 5), so what a long
// history leaves in the document is at most 15 listings of spilled
// entries and 31 of landings per level. Those four lists are written as
// flat arrays of numbers, a fixed count per listing (listings.go), about
// half the bytes of the objects they were: a document that lists any is
// format 10, and formats 3, 4, 5 and 7 are read but no longer written.
// Once a document lists more than 4 of them they move, all four lists,
// into one record of their own (listsout.go, format 11): the document
// keeps a summary of what every step asks of them (the highest sequence
// spilled, the earliest and latest end of retention, the span of the
// landings moved out) and the few listings added since, which join the
// record once there are more than 4. A step that needs the listings
// themselves (a fold, retention dropping the oldest, a run whose context
// falls within them, a whole history) reads the record, unless its ledger
// wrote or read that record already; so the bytes a step moves no longer
// grow with the history.
// Events waiting under order: scope behind a delivery in flight (a
// backlog behind a hung agent) are parked the same way (waits.go): past
// the scope's head and the newest few, each with its deliver entry and
// its run moves into a chunk record of 8 written in scope order, and the
// document lists the chunk with its first event's place, its times and
// how its ids are known (format 6): on a store that does not check
// Write.Absent, hashes of them in the listing (about 8 bytes per parked
// event); on one that does (every store here), a marker record per id,
// which a step naming an id the document does not hold takes as absent
// and the store checks (format 9).
// Past the first two, every 8 chunk listings fold into a page record
// (format 8), and every 8 pages of one level into a page of the next;
// listings without hashes are written as numbers (format 12). The head
// the order rule lets go is always in the document, so accepts, takes,
// finishes and the agent's own steps decide on the document alone; a
// write that leaves no head reads the first chunk back in. Every other
// decision and every list first puts every parked event back, and decides
// and answers as it would have.
// Runs leave with the entries of a spill (spillruns.go): but for the
// newest 8, each run that no item in the document names, of independent
// or exclusive mode and holding no lease, moves into a record of its own,
// and its id into a list beside the chunk, whose listing counts and bounds
// them (format 7). A step that names a run reads its record with the
// entry records it reads anyway; a run a decision changes comes back.
// On a store that checks Write.Absent (AbsenceChecker: Postgres, Redis,
// bolt, and memory, which stands in for them in tests) a step that names an
// entry or a run the document does not hold does not read first: it
// decides as if the record were absent, and the store's compare-and-set
// writes only if it is, in the same atomic step; otherwise the write
// hands the records over (PresentError) and the step decides again with
// them. A new claim on a long scope is then one round trip, as on a short
// one, and so is a duplicate of an effect that moved out (its committed
// record, which the refused write hands over, answers it; deciding and
// encoding that write is the price). A decision that writes nothing is
// made again on records read.
// Still in the document, and still growing with a long scope: its
// supersede-mode runs (whether one is superseded asks about every newer
// run), the listings of a backlog's chunks and pages (about 100 bytes
// per page of 64 parked events), and its dead and rejected
// deliveries.
//
// # Choices where the design leaves room
//
//   - Times in the document are RFC 3339 with nanoseconds; sequence numbers
//     order writes, wall time never does.
//   - A fresh document starts its token counter at the clock's Unix
//     milliseconds, so fencing tokens keep increasing even after an idle
//     scope has expired and been forgotten.
//   - Runs that see no activity for the retention period are dropped even
//     if nobody ended them: a run nobody touched for a week is dead.
//   - Supersession is judged among supersede-mode runs only; exclusive and
//     independent runs are fenced by their own deliveries and leases.
//   - An effect's id (and idempotency key) hashes its scope, intent and
//     payload, each written after its length, so no two different triples
//     share one. The payload is hashed in its RFC 8785 (JSON
//     Canonicalization Scheme) form: keys sorted by UTF-16 code units and
//     every number as the shortest ECMAScript rendering of its IEEE 754
//     double, so 2500, 2500.0 and 2.5e3 are one effect whichever language
//     wrote them. The limit that comes with it: integers beyond 2^53 round
//     to the nearest double, so two that differ only past that precision
//     are one effect; send such ids as strings. Invalid UTF-8 in a payload
//     string becomes U+FFFD first.
//   - Entries stored before that rule (format 1 ids: fields joined with NUL,
//     numbers hashed as written) keep their ids, which are the idempotency
//     keys their effects already sent. A claim, check or resolve by key
//     looks for its format 1 id when the document has no entry under the
//     new one, so a redelivery after the upgrade finds what it found
//     before: the same payload, spelled as it was then.
//   - Once, Run.Once and the ledger API client's Once are one loop
//     (RunEffect over the Attempts interface): claim, run the effect until
//     the claim's deadline, settle; put an ambiguous entry to the
//     reconciler; wait for an in-flight one by the injected clock.
//   - Because committed is final, a Ledger remembers the committed entries
//     it settled or was told of (Options.ReplayCache entries and 64 MiB of
//     values and payloads at most) and answers
//     a later claim for one of them "replayed" without the store, until
//     ten minutes before its retention ends. That is the one piece of state
//     outside the store: it makes a provider's redelivery of an event this
//     process delivered cost no round trip, and it can only say what the
//     store would say: it keeps its own copy of the entry, with the value
//     in the compact form the document stores, never the caller's buffer.
//     A committed deliver entry that a queued (not inline) delivery stands
//     for is the exception and is not remembered: an operator's
//     ReplayDelivery, in any process, makes its next take a new attempt,
//     pending again. Nor does Enqueue answer a queued event's redelivery
//     from memory: its answer carries the event's item, which a replay, a
//     trial or a late finish in another process may change.
//   - CommittedValue answers "did an effect committed on this scope return
//     this id?" from the document alone: any JSON string anywhere in a
//     committed entry's value, equal to the id, counts (object keys and
//     numbers do not; pending, failed and ambiguous entries have no value).
//     The gateway's echo suppression uses it; it is a read, not part of a
//     claim, because the echo's race is with the agent's settle, which no
//     transaction of the gateway's can close.
//
// # The loop breaker: caps and escalations
//
// Options.Caps limits, per intent, how many effects one scope may start
// within a sliding window on the ledger's clock (the gateway's example is
// reply: at most 3 in 5 minutes). No intent is capped by default. The cap
// is counted inside the claim's own transaction, from the scope document
// alone, so concurrent claims in any number of processes can never start
// more than Max effects in a window. It is weighed after step 1 (a replay,
// an in-flight or ambiguous answer is not a new effect and is never
// refused) and after the run's fence (a stale run is told superseded),
// before the conflict check and the claim.
//
// What counts: every other entry of the intent on the scope whose latest
// attempt was claimed within the window and that may have happened:
// committed, pending (redeliverable or not) and ambiguous. Failed entries,
// known not to have happened, do not. A new attempt of an entry is weighed
// against the other entries only. Counting uses ClaimedAt, the start of the
// attempt, and relies on the window not exceeding Retention (settled
// entries older than that are forgotten).
//
// A claim past the cap is refused rate_limited and its effect does not
// run. The first such refusal opens an Escalation in the scope document
// (intent, cap, count, the refused claim's run and summary) and the
// observer hears an "escalation" event; later refusals of the intent on the
// scope within one window of its opening extend it (Refused counts them)
// without a new event. An open escalation puts its scope on the review
// index, so Escalations lists it beside ambiguous entries until an operator
// dismisses it (DismissEscalation). Dismissing does not lift the cap; the
// next refusal after it opens a new escalation. Escalations are forgotten
// one retention after their last refusal. The gateway's own deliver claims
// (BeginClaim, Enqueue, TakeDelivery) are not capped.
//
// # Queued delivery
//
// The outbox lives in the same store step as the ledger's own state, never
// in a second system. Enqueue makes, in one Transact of the event's scope:
// the run (begun as for an inline delivery), the deliver entry (a claim,
// redeliverable), a QueueItem in the document's "queue" map keyed by that
// entry's id, and the event record, its JSON metadata then the raw body.
// The record is written by the same store step as the document, so an
// acknowledged event always has its record and its claim, and a failed step
// leaves neither. A small record (up to 4 KiB) rides in the item itself
// while its scope holds fewer than four items that carry theirs; any other
// is a blob (Write.Blobs). It rides as a JSON string or as base64,
// whichever is shorter (QueueItem.embed). Riding along spares the store a
// second record on the accept and the settle, which is most of what made a
// queued event cost more than an inline one (issue #29); the bound keeps a
// scope with many events (a supersede conversation) from carrying their
// bodies in every read. The QueueItem alone is about 400 bytes.
//
// A QueueItem is due when it is queued and its NextAt has come, or
// delivering and its claim's deadline (LeaseUntil) has passed: a crashed
// dispatcher's delivery comes back by itself. Every write stores the
// earliest such time as Write.DueAt, which the store indexes, and
// Due walks that index (Store.ScopesDue) the way Ambiguous walks
// ScopesToReview; DueQuery.From starts it further down
// (Store.ScopesDueBetween), and CountDue counts it (Store.CountDue). TakeDelivery is the lease: in one Transact it re-checks
// that the item is due, begins a new delivery of the run (a newer fencing
// token; the first take of an event accepted without Hold keeps the
// delivery Enqueue began, so Replyonce-Delivery counts attempts from 1),
// claims a new attempt of the deliver entry with the lease as its pending
// TTL, and marks the item delivering until then. Two dispatchers can never
// both take it, in any number of processes, because the store makes that
// read-modify-write atomic. FinishDelivery settles the attempt and moves
// the item (delivered, rejected, queued again at a time the caller chose,
// or dead), and keeps an attempt record: in the item while it carries its
// event and holds fewer than three (each with at most 512 bytes of the
// agent's answer), else as a blob; the outcome of a holder
// whose lease ran out and was taken over is kept only as a late record.
// The schedule, what counts as a failure and pausing are the caller's
// (the gateway's dispatcher): the ledger only records and fences.
//
// Operators find waiting and delivering items through the due index, dead
// and rejected ones through the review index (a dead letter waits for an
// operator, so its document asks for review; Ambiguous reads such scopes
// and skips them), and every item, delivered ones included, through a
// third index: every write stores the newest ReceivedAt of the items the
// document still keeps as Write.ReceivedAt (zero when none, so a scope
// leaves the index when retention drops its last item, and with its
// document when that expires). RecentDeliveries walks it (Store.
// ScopesReceived) newest first with a cursor, listing each scope's matching
// items newest first at its newest item's place; ListDeliveries uses it
// when no status or "delivered" is asked for. Pausing a source is one small JSON
// control record (Store.ReadControl), outside the scope key space so no
// webhook or agent can name it, which every dispatcher reads on each
// sweep. A record that cannot be read pauses nothing and stops nothing
// (ErrCorruptControl); the next pause or resume rewrites it. Releases
// before control records kept it in the scope
// "replyonce:control:paused-sources": that scope is read until the record
// is first written, so an upgraded gateway keeps its paused sources.
//
// Conversation reads one scope's runs (each with its latest token and why
// it may no longer write), entries and queued items in one read, for the
// admin console's view of a scope; it changes nothing. Resolve takes one
// Resolution, naming the entry by its effect or by scope and entry id
// (the console's and the CLI's way, from the Ambiguous list); by id it may
// record the operator's name in ResolvedBy ("operator:<name>").
//
// A paused source's deliveries must not stand in the due index's way: it
// is read earliest first, a page at a time, so a paused backlog in front
// would hold back every other source. A dispatcher that meets a due
// delivery of a paused source parks it (ParkDeliveries): the item stays
// queued with its place in the schedule, stops being due, and its
// document's DueAt becomes the source's parking time (ParkedAt), a fixed
// instant in the year 2199 derived from the source's name, which no sweep
// of due work reaches. On resume any dispatcher reads exactly that instant
// of the index (Store.ScopesDueBetween) and unparks the source's items
// (UnparkSource), a page at a time; they are due again at their old time.
// Both are ordinary Transacts, so the index stays exact across instances,
// and a pass that is cut short is finished by the next one (dispatchers
// also look at the parking time of every unpaused source every 30 s).
// Listings still find parked items (they are queued, and inside the
// index's listing range). One limit: a document holding items of two
// sources is indexed at its earliest time, so an item parked beside
// another source's later retry is unparked when that document is next due.
//
// Retention: a delivered, rejected, superseded or coalesced item and its
// blobs are dropped one retention after it finished; any other item once
// it is older than its MaxAge plus one retention. Dropping happens on the
// scope's next write, and a document keeps itself alive while it holds
// items.
//
// # Conversation-aware delivery
//
// Three rules an enqueued event can carry (EnqueueRequest.Order and
// .Debounce, kept on its QueueItem) and the run mode it begins with decide,
// from the scope document alone and inside the Transact of Enqueue or
// TakeDelivery, what may go out. Because nothing outside the document is
// consulted, every dispatcher in every process on the store keeps them.
//
//   - Order scope: an item is not takeable while another item of its
//     scope is in flight (delivering, claim live) or one ordered before it
//     still waits (queued, or delivering with its claim run out). The
//     order is contextAt, then receipt time, then entry id. Dead, rejected
//     and settled items hold nothing back: when the head goes to dead
//     letter the scope moves on. An item held back is left out of the
//     document's DueAt and of Due, so a long queue on one scope
//     never crowds other scopes out of a sweep. Enqueue's Hold is refused
//     (no Run in the answer) for an item that has to wait.
//   - Newest wins (supersede runs): whenever a write begins a run, every
//     waiting item whose run a newer supersede-mode run supersedes (the
//     same rule as a claim's) is settled superseded, with SupersededBy.
//     TakeDelivery applies it too, for runs begun through the API. An item
//     in flight is not touched: its run's next claim is refused
//     superseded.
//   - Debounce: an item with a quiet time is never held; Enqueue folds the
//     source's events on the scope that wait and were never forwarded,
//     and the new one, into the newest of them in scope order, which is
//     due at the earlier of (now + quiet) and (first held + max wait). The
//     others are settled coalesced with CoveredBy naming it; it keeps
//     CoverCount (exact) and Covers (the newest MaxCovers event ids,
//     oldest first, itself last), which the gateway forwards as
//     Replyonce-Covers. A held event is a queued item like any other, so
//     a crash in the quiet window loses nothing.
//
// A superseded or coalesced item's deliver entry is settled not applied
// (it never lands, so no run's conflict check sees it) and the item is
// kept, listed by scope, like a delivered one; a redelivery of its event
// is a duplicate.
//
// # Content claims
//
// ClaimContent and ConfirmContent let the gateway refuse a signed request
// replayed under a new event id, where the provider's id is not signed: the
// content's digest is recorded beside the first event id that carried it,
// in a reserved scope, for the retention. The digest's record and the
// event's claim live in different scopes, so the record is held, then
// confirmed, around the event's own recording, with a lease that makes a
// crash between the two writes lose no event and let no replay through;
// content.go explains the protocol and why it holds.
package ledger
