// Package ingress is the gateway's public edge: the handler behind
// POST /hooks/{source} that turns a provider's delivery into exactly one
// decision.
//
// For each request it reads the body through a hard byte limit, answers
// provider handshakes, verifies the signature on the raw bytes, extracts the
// event id, scope and contextAt, and then, in one ledger transaction, claims
// the event's "deliver" effect and begins (or resumes) its run. Only a
// granted claim is forwarded; duplicates are answered from the ledger.
//
// # What it promises
//
//   - Nothing is answered 2xx unless it was delivered, rejected by the agent
//     for good, already recorded as such, or ignored by the source's own
//     configuration (ignore rules, presets, echo_of). Store failures and agent
//     failures answer 503 with Retry-After, so the provider keeps the event.
//   - A bad, missing or stale signature is 401 and touches neither the
//     ledger nor the agent.
//   - A duplicate that arrives while the first delivery is in flight never
//     takes the run over from it.
//   - The forward runs to completion (or its own timeout) even when the
//     provider hangs up, so the ledger always learns how it ended.
//
// # Choices where the design leaves room
//
//   - When a source's scope template does not resolve for an event, the
//     event gets its own scope (the default), so no event is refused for
//     lacking a conversation.
//   - When a context_at template does not resolve or parse, receipt time is
//     used and a warning is logged. Numeric timestamps below 10^11 are Unix
//     seconds, above are milliseconds; strings are RFC 3339.
//   - A redelivery of a delivered or rejected event answers 200 with status
//     "duplicate" and the original outcome.
//   - The deliver record is an entry on the event's scope like any other
//     write. On a shared scope (a conversation), a newer event that arrives
//     while a run is answering therefore makes that run's next claim
//     refused conversation_changed, which is the point: a new customer
//     message changed the conversation. Agents that want to ignore
//     deliveries claim with conflict "same-intent".
//   - A GET (or HEAD, for Trello's and Mandrill's checks) is answered only
//     for providers whose handshake arrives that way; for every other source
//     it is a 405 whatever it carries.
//   - With split, a batched request's elements are claimed and forwarded one
//     after the other, each as its own event; the request is answered 200
//     only when all are recorded, else with the first failure, so the
//     provider's retry brings back only what is missing (the rest are
//     duplicates). An element without an event id refuses the whole request
//     with 400 before anything is written, unless an ignore rule drops it.
//   - With forward.respond: agent (inline sources only), a 2xx from the
//     agent is the provider's answer: its status, Content-Type (no other
//     header) and body, kept in the deliver entry's value so duplicates
//     get the same bytes without a forward (respond.go). Failures keep the
//     gateway's answers. An answer over forward.respond_limit is neither
//     passed on nor kept: the provider hears the gateway's JSON with
//     agent_answer "too_large", first delivery and duplicates alike, and
//     the log line is a warning; a truncated body is never sent.
//   - Ignore rules (package filter), the provider's presets and echo_of are
//     applied after verification and before the ledger. An ignored event is
//     answered 200 "ignored", counted by rule and logged (throttled per
//     rule), and writes nothing: the decision is a function of the verified
//     request, or for echo_of of a committed effect, so a redelivery gets the
//     same answer without a ledger entry. Rules come first, in order, then
//     presets, then (once the scope is known) echo_of, the only one that
//     reads the store. With split they apply per element.
//   - Every error becomes an HTTP answer in one place, errorHandler; an
//     error it does not recognise is a 503, never a 2xx and never a 400.
//   - A scope starting with "replyonce:" is a 400: the gateway's own
//     records live there (ledger.ReservedScope).
//   - Where a source's event id reads what the signature does not cover,
//     a request whose signed content another event id already carried is
//     answered 200 duplicate (outcome replay), never forwarded (replay.go;
//     the ledger's "Content claims" say why a crash cannot lose an event
//     or let a replay through).
//
// # Tracing
//
// With Options.TracerProvider set (and the Forwarder given the same
// provider with WithTracer), every webhook is a server span "POST
// /hooks/{source}" with children verify, ledger.begin_claim (or
// ledger.enqueue for a queued source), forward and ledger.settle, and the
// agent receives the forward span's traceparent. The server span is a new
// root: a provider's traceparent is untrusted (anyone can send one), so it
// is recorded as a link, never as the parent. Spans carry the source, event
// id, run id, delivery number, the decision and the answer's status; never a
// secret, a signature, a header or the body, nor error texts (they can
// quote an agent's answer or a store's address). A 5xx answer, an agent
// failure and a store error mark their span as an error. A queued event
// keeps its accepting request's trace context under dispatch.TraceHeader, so the
// dispatcher's span for each delivery attempt is a child of that request.
// Without a provider no span is started: tracing off costs nothing.
package ingress
