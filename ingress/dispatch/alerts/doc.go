// Package alerts tells a person when a source's delivery stops: when its
// agent starts failing (after alerts.after_failures attempts in a row or
// alerts.after of failing), when it answers again, when the
// forward.pause_after breaker pauses it, and when its events go to dead
// letter (grouped per source and minute, counted in the store once the
// minute is over). It also tells of each loop-breaker escalation and of a
// jump in a source's signature refusals (alerts.verification_failures in
// a minute, counted across instances in a control record of the store,
// at most one alert per source per hour).
// Alerts go to the targets of the
// gateway's alerts: section, a Slack incoming webhook (Slack's {"text": …}
// message, with a link to the console's page for the source) or a generic
// JSON webhook signed with Standard Webhooks, the way the forwarder signs.
//
// Every gateway process sees the same incident (source health is read from
// the store), so each would raise the same alert. Each alert is sent once
// across all of them: before sending, a process claims it through the
// ledger itself, in one scope per incident ("replyonce-alerts:SOURCE:START";
// for dead letters the minute, for verification the hour, for an
// escalation its scope and id), one entry per kind and target; a process that finds it sent (replayed)
// drops it, one that finds it being sent elsewhere (in flight) looks again
// after its backoff, and a send that failed is settled not applied, so the
// next try (here or elsewhere) may claim it again.
//
// Raise, DeadLetter and VerificationFailed never block: each target has
// its own bounded queue and its own goroutine, which retries a target that
// is down with backoff, and one more goroutine sends the dead-letter groups
// whose minute ended. Close stops them and waits for them, so a down
// target never slows a webhook and no goroutine outlives the Notifier.
package alerts
