// Package riverledger makes each job of a River queue
// (github.com/riverqueue/river) a ledger run, so that a job worked twice
// does each of its effects once.
//
// A job is the run "river:{queue}:{job id}" on a scope the caller picks
// (a conversation, an order). Every attempt of the job, whether a retry
// or a stuck job that River rescued, begins that run again as a new
// delivery: its effects already committed replay instead of running
// again, and the copy of the job still running somewhere (a worker that
// hung and was given up on) is fenced, so its later writes are refused.
//
// What the work's ledger results mean for the job:
//
//   - done: the job completes and the run ends;
//   - in flight (another attempt's effect is pending): the job is snoozed,
//     which uses no attempt;
//   - superseded, run cancelled or run ended: the job is cancelled, with
//     the reason as its error;
//   - ambiguous, exhausted or rate limited: the job is cancelled and the
//     Escalate hook is called, since a retry cannot settle them;
//   - failed (known not applied), conversation changed or busy: an error,
//     which River retries.
//
// River rescues a job that has been running longer than
// RescueStuckJobsAfter. If that is shorter than the ledger's pending TTL,
// a rescued attempt finds the hung attempt's effect still pending and
// snoozes until it settles or its TTL makes it ambiguous; New logs a
// warning for that configuration.
//
// River does not fence a job's completion by attempt: if a hung copy
// finishes while the rescued attempt is running, its answer (a cancel,
// since its writes are refused) is what River records for the job. The
// ledger still does each effect once; only the job's River state can then
// read cancelled while the live attempt finishes its work.
//
// It is its own Go module so that only River users pull River in.
package riverledger
