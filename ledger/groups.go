package ledger

// A Ledger's own methods are the idempotency verbs an agent or the gateway
// calls on every effect (Claim, Settle, Once, Check, Begin, End, Heartbeat,
// Resolve, ...). What the gateway builds on them is reached through one
// small value per noun, so that each concern has one place in the API:
//
//   - Queue: queued delivery, from Enqueue to FinishDelivery, and what
//     operators read and do to queued items;
//   - Sources: the per-source control records every process shares (paused
//     sources and their acknowledgements, agent health, signature refusals);
//   - Views: read-only listings for operators and agents (a scope's
//     history and conversation, recent deliveries, what waits for review).
//
// The values are only a way in: they hold the Ledger and nothing else, so
// they cost nothing to make and are as safe for concurrent use as it is.

// Queue is the ledger's queued delivery: the outbox in each scope's
// document and the event bytes in its blobs. See the package
// documentation, "Queued delivery".
type Queue struct{ l *Ledger }

// Queue returns the ledger's queued delivery.
func (l *Ledger) Queue() Queue { return Queue{l} }

// Sources is the per-source state every process sharing the store reads
// and writes: which sources are paused and who has seen it, the health of
// each source's agent, and the signature refusals counted per minute. Each
// is one small control record, apart from any scope.
type Sources struct{ l *Ledger }

// Sources returns the ledger's per-source control records.
func (l *Ledger) Sources() Sources { return Sources{l} }

// Views is what operators and agents read without changing anything: a
// scope's history and conversation, the deliveries received lately, the
// scopes that received events, and what waits for review (ambiguous
// entries, escalations).
type Views struct{ l *Ledger }

// Views returns the ledger's read-only listings.
func (l *Ledger) Views() Views { return Views{l} }
