// Package dispatch delivers the events of queued sources. Every `gateway
// serve` process runs one Dispatcher; several processes on one Postgres or
// Redis share the work through the ledger.
//
// Work reaches it two ways. The gateway reserves a slot when it accepts an
// event and, if one is free, records the event with its claim held and
// hands the delivery straight over (no second store step). Otherwise the
// event waits in the store, and a sweep finds it: the Dispatcher reads the
// store's due index (ledger.DueDeliveries) when woken (an event queued
// without a slot, a slot freed) or every Poll, and takes each due delivery
// through ledger.TakeDelivery, whose claim is the lease. A delivery whose
// holder crashed is due again when its claim runs out, so another process
// (or this one after a restart) takes it over under a newer fencing token.
//
// Each delivery is forwarded exactly as inline mode forwards (the source's
// ForwardRequest: same headers, Standard Webhooks re-signing,
// Replyonce-Delivery counting the run's deliveries) and then settled with
// ledger.FinishDelivery:
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
// Conversation-aware delivery is the ledger's: DueDeliveries lists only
// what a source's forward.order lets go, TakeDelivery refuses the rest and
// settles a waiting event whose run was superseded (counted, logged), and a
// debounced delivery carries its covers into Replyonce-Covers. When the
// head of an ordered scope goes to dead letter the log and
// replyonce_scope_moved_on_total say the scope moves on. Cancellation
// notices (forward.cancel: notify) are sent by the dispatcher, once each,
// as deliveries it owns.
//
// At most forward.concurrency deliveries per source are in flight in one
// process. Shutdown stops reserving and taking, waits for the deliveries
// in flight within the grace period, then cuts what is left: a cut
// delivery is recorded due again at once (not counted as a failure), or,
// if even that cannot be recorded, becomes due when its claim runs out.
//
// With Options.TracerProvider, each delivery attempt is a span "dispatch"
// (kind consumer) whose parent is the request that accepted the event
// (ingress.EventTrace), so an event's accept and all its attempts, retries
// hours later included, read as one trace; an event accepted without
// tracing gets a root span per attempt. The span names the source, event
// id, run id, delivery and attempt numbers, the outcome and the agent's
// status, and is an error when the agent failed or the outcome could not
// be recorded.
//
// Run and every delivery goroutine belong to the Dispatcher: Run returns
// when its context ends, and Shutdown returns only when every delivery it
// started has ended.
package dispatch
