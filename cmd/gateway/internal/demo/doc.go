// Package demo is the simulation behind `gateway demo`: support
// conversations under injected faults, played once with a naive agent that
// takes every webhook at face value and once through the real gateway
// (ingress handler, forwarder, ledger and store), so that the duplicate and
// missing replies of the two can be compared.
//
// # How it is built
//
// Everything is in-process, on a simulated clock that only the simulation
// advances, in an order the simulation controls: conversations one after the
// other, and inside one conversation a queue of the platform's scheduled
// deliveries. Faults that "arrive while the agent is answering" are hooks the
// agent reaches at a fixed point of its handling, where the simulation makes
// the extra delivery there and then, nested. Randomness comes from
// math/rand/v2 PCG sources seeded with the demo's seed and the
// conversation's number. No wall time, goroutine scheduling or map order
// reaches the report, so one seed prints the same report byte for byte, on
// either store.
//
//   - chat.go is the support platform: customer messages, the replies sent to
//     them, answers counted per message, and a lookup of replies by the
//     idempotency key they carried (the question a reconciler asks).
//   - provider.go is the platform's webhook sender: every attempt signed with
//     the real Standard Webhooks signer, redelivered on any non-2xx on a
//     fixed schedule (5 s, 5 min, 30 min, ...), Retry-After ignored as most
//     senders do.
//   - agent.go is the support bot, the same http.Handler in both runs. It
//     verifies the signature, "thinks" for two seconds, reads the
//     conversation and answers the delivered message together with every
//     earlier message still unanswered. Without the gateway it posts the
//     reply straight away and resends blindly when a send fails. Behind the
//     gateway it sends through the ledger: a run rebuilt from the forwarded
//     Replyonce-Scope, Replyonce-Run-Id and Replyonce-Fencing-Token, the
//     reply keyed on the message it answers, a summary naming every message
//     it covers, and a reconciler that asks the platform about sends of
//     unknown outcome.
//   - The gateway forwards through the real forward.Forwarder, whose
//     http.Client has a transport that calls the agent in-process. A worker
//     crash is panic(http.ErrAbortHandler), net/http's way for a handler to
//     drop its connection: nothing after it runs, a claim it made is never
//     settled, and the caller sees the connection reset.
//
// burst.go is a second scenario, customer bursts without send faults,
// played in three setups (no gateway, inline, queued with
// forward.debounce), each on its own clock and memory store, counting the
// agent's turns next to replies. Its queued run performs the dispatcher's
// steps through the ledger itself, one sweep per 100 ms of simulated time,
// so that it stays deterministic.
//
// # Faults
//
// Decided per conversation before either run, so both face the same ones:
// a duplicate delivery (the same event sent twice, the copy arriving while
// the first is being answered or up to 90 s later) and a customer burst (a
// second message arriving while the run for the first is answering, either
// before that run claimed its reply or after). Decided per attempt to send a
// reply, when it happens: a worker crash (before or after the platform took
// the reply), a timeout before send (a connect timeout: known not sent) or
// a timeout after send (the reply was posted, the answer lost: unknown). At
// most two send faults hit one conversation, within the ledger's three
// attempts per reply, so every message can be answered. The two runs make
// different numbers of send attempts, so their send-fault counts differ.
//
// # What it promises
//
// With the gateway no customer message is answered twice and none is left
// unanswered; a message that could not be answered is listed with the
// reason. Run reports counts; the command decides what a duplicate does to
// its exit status.
//
// # Choices
//
//   - A reply to a burst answers every message in it, so with the gateway
//     there are fewer replies than messages.
//   - A run refused as superseded leaves its message to the newer run, unless
//     no reply answered it or is answering it (the newer run had left it to
//     this run's reply, which then failed); then it answers under a fresh run
//     whose view is current.
//   - FORCE_COLOR wins over NO_COLOR (it is the narrower request); an empty
//     NO_COLOR counts as unset, FORCE_COLOR=0 or false turns colour off. A
//     terminal is a character device to Stat, so /dev/null counts as one;
//     on Windows it is a console that takes ANSI colours (virtual terminal
//     processing, switched on when it can be), so NUL does not.
//   - A bolt StorePath must not exist yet: a ledger that already knows the
//     demo's events would answer them all as repeats.
package demo
