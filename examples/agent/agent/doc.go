// Package agent is the example agent behind the gateway: it receives
// forwarded chat events and answers every customer message exactly once,
// however often the event is delivered and whatever else the customer
// writes meanwhile.
//
// For each forwarded event it verifies the gateway's Standard Webhooks
// signature, takes a handle on the run the gateway began (scope, run id and
// fencing token from the Replyonce-* headers), reads the conversation from
// the chat provider, and sends one reply for the customer messages nobody
// has answered, through the ledger. When the ledger says the conversation
// changed (another run's reply is pending or landed), it waits for that
// reply to settle, reads the conversation again and decides again.
//
// It works the same against the in-process ledger and the remote one
// (ledgerapi.Ledger); cmd-style wiring lives in the parent main package.
//
// # Bursts
//
// A customer who types "hi", "my order", "is late" in four seconds sends
// three events. Behind a source with forward.debounce the gateway delivers
// only the newest, with Replyonce-Covers saying it stands for all three;
// with runs: supersede the older ones that were still waiting are never
// delivered. Either way the agent does the same thing: it reads the
// conversation and sends one reply that answers every unanswered message,
// so a burst gets one answer. A cancellation notice (Replyonce-Notice:
// cancel) is acknowledged and otherwise ignored: the ledger already
// refuses the superseded run's reply.
//
// # What it promises
//
//   - A reply goes out only under a fencing token the ledger still
//     honours, so a stale delivery or an older run cannot reply.
//   - A redelivered event never repeats a reply: the reply either shows in
//     the conversation, or its ledger entry replays.
//   - Its HTTP status tells the gateway the truth: 2xx when the event needs
//     nothing more (replied, nothing to answer, or another delivery owns
//     it), 503 when it should come again, 400/401 when it never should.
//
// # Choices
//
//   - The agent works inline and answers when its reply is recorded, within
//     Config.Budget (default 5 s, below the gateway's forward timeout).
//     Answering 2xx before the work is done would turn the gateway's
//     at-least-once delivery into at-most-once.
//   - An ambiguous reply (the provider may have posted it) is answered 2xx
//     and left to an operator; it is never retried blindly.
//   - The agent ends its run only after its reply went through, because
//     ending is not fenced by token in the ledger.
package agent
