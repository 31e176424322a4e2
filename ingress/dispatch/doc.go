// Package dispatch owns queued delivery. Every `gateway serve` process runs
// one Dispatcher; several processes on one Postgres or Redis share the work
// through the ledger.
//
// # What it owns
//
//   - Source: a source as the dispatcher delivers it (name, runs mode,
//     forward.Target, Policy), built by the gateway from the source's
//     configuration (ingress.Source.Queued), and the requests it sends
//     (ForwardRequest, CancelRequest) and the claims it holds (Lease,
//     StartBy, KeepFor).
//   - Policy: a source's delivery mode (Mode; queued by default) and, in
//     queued mode, concurrency, forward.accept_wait, conversation-aware
//     delivery (order, debounce, cancel), with its YAML keys, its one
//     defaults function and its validation.
//   - RetryPolicy (retry.go): which answers end a delivery, when a failed
//     one is tried again (schedule, jitter, the agent's Retry-After within
//     bounds) and when it is dead. Changing the schedule changes that file.
//   - Cancellation notices (CancelNotice, SendCancel), the dispatcher's
//     metrics and the conversation metrics it shares with the gateway, and
//     the trace context a queued event keeps (TraceHeader, EventTrace).
//
// It imports forward and ledger, never ingress: the gateway (ingress)
// imports it, reserves places (Reserve) and hands deliveries over.
//
// Work reaches it two ways. The gateway reserves a place when it accepts
// an event and, if one is free, records the event with its claim held and
// hands the delivery straight over (no second store step). Otherwise the
// event waits in the store, and a sweep finds it: the Dispatcher reads the
// store's due index (ledger.DueQuery.Skip, leaving out the scopes
// it is taking from right now) when woken (an event queued without a
// place, a place freed) or every Poll, and takes each due delivery through
// ledger.Queue.TakeDelivery, whose claim is the lease, reading the event's
// record beside the take rather than after it (unless it rides in the
// item). A sweep takes each delivery on a worker of its own, so the takes
// of one sweep share the store's group commits; what a page leaves for lack
// of free places is tried first by the following sweeps (for at most one
// Poll), so a freed place costs no index read of its own; and after a read
// that found the index empty, a freed place reads it again before the
// next Poll only if work may have become due since (an event queued
// without a place, a delivery given back, a settle in an ordered or
// debounced scope), since every event handed over at accept would
// otherwise cost an index read. A due delivery of a paused source is parked
// (ledger ParkDeliveries) rather than skipped, so that a paused backlog
// never fills the page in front of other sources' work; when the source
// is resumed, each process unparks its deliveries a page per sweep. A busy
// source (every place of its taken) is not parked, but when a full page
// holds only busy sources' deliveries while another source has a free
// place, the sweep reads up to four further pages
// (ledger.DueQuery.From), going on from where the last such sweep
// stopped, so a long backlog of one source does not hide another's due
// event until it drains: it is found within backlog / (4 × Batch) sweeps.
// A delivery whose holder crashed is due again when its claim runs out, so
// another process (or this one after a restart) takes it over under a
// newer fencing token.
//
// # Places
//
// forward.concurrency bounds the requests to the agent in flight per
// source in this process, not the deliveries it holds: a held delivery
// (handed over or taken) takes one of the agent's places only for its
// forward, so the store steps before and after it (the accept or take,
// the settle) overlap other deliveries' forwards. While the agent's
// answers average under 500 ms (takeAheadLatency) a process holds up to
// eight times forward.concurrency deliveries (takeAhead); with a slower
// agent, or for a source with runs: supersede (a held delivery is in
// flight for the ledger, so newest-wins could no longer drop it; see
// Source.HoldsAhead), no more than forward.concurrency.
//
// Every forward starts only with time left on its claim for the whole
// forward and its settle (Source.StartBy), checked with the injected clock
// after each step that can wait: the take's store call, the read of the
// event, the wait for a request place. The forward itself is cut at the
// claim's end minus the settle margin (Source.ForwardBy) if that comes
// before forward.timeout. A held delivery that fails the check is given
// back: recorded due again at once, not as a failure (outcome given_back
// in replyonce_delivery_attempts_total), and taken again later under a
// newer claim. A take whose store call is answered only after its claim
// ran out is abandoned unsent (counted given_back too): another process
// may already have delivered the event under a newer token. The take's
// store call is cut once its claim could no longer be used.
//
// When every place is taken and the agent is fast, an accept waits up to forward.accept_wait (Policy.AcceptWait, 50 ms by
// default) for one: the event is then handed over rather than stored and
// swept, and under sustained load the backlog does not outgrow what the
// agent is fed.
//
// Each delivery is forwarded exactly as inline mode forwards
// (Source.ForwardRequest: same headers, Standard Webhooks re-signing,
// Replyonce-Delivery counting the run's deliveries) and then settled with
// ledger.Queue.FinishDelivery, as the source's RetryPolicy says:
//
//   - 2xx: delivered. 400, 413, 415, 422 and the source's forward.reject:
//     rejected for good. Both commit the deliver entry.
//   - anything else (5xx, timeouts, redirects, 429, and the configuration
//     faults 401, 403, 404, 405, 410): due again after the next delay of
//     the source's schedule with ±20 % jitter, or at the agent's
//     Retry-After on 429 and 503, clamped to [1 s, 6 h].
//   - the schedule spent, or the next attempt later than forward.retry
//     .max_age after receipt: dead letter, kept, never retried by itself.
//
// Conversation-aware delivery is the ledger's: Due lists only
// what a source's forward.order lets go, TakeDelivery refuses the rest and
// settles a waiting event whose run was superseded (counted, logged), and a
// debounced delivery carries its covers into Replyonce-Covers. When the
// head of an ordered scope goes to dead letter the log and
// replyonce_scope_moved_on_total say the scope moves on. Cancellation
// notices (forward.cancel: notify) are sent by the dispatcher, once each,
// as deliveries it owns.
//
// Shutdown stops reserving and taking, waits for the deliveries
// in flight within the grace period, then cuts what is left: a cut
// delivery is recorded due again at once (not counted as a failure), or,
// if even that cannot be recorded, becomes due when its claim runs out.
//
// With Options.TracerProvider, each delivery attempt is a span "dispatch"
// (kind consumer) whose parent is the request that accepted the event
// (EventTrace), so an event's accept and all its attempts, retries
// hours later included, read as one trace; an event accepted without
// tracing gets a root span per attempt. The span names the source, event
// id, run id, delivery and attempt numbers, the outcome and the agent's
// status, and is an error when the agent failed or the outcome could not
// be recorded.
//
// Run and the workers belong to the Dispatcher. Takes and deliveries run
// on workers that wait for the next one for a while before they exit
// (workers.go): a goroutine started per delivery grew its stack afresh
// each time. Run returns when its context ends, and Shutdown returns only
// when every delivery it started has ended and the workers have exited.
package dispatch
