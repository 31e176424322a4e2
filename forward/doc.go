// Package forward delivers one accepted webhook to the agent behind the gateway and tells the
// caller what the agent's answer means for the provider.
//
// It is standalone: it knows nothing of providers, the ledger or HTTP routing. The caller (ingress)
// decides what to forward; this package only sends it and classifies the result.
//
// # What it promises
//
// Forward makes exactly one POST to the agent and never follows a redirect. net/http never sends it
// a second time, whatever its headers: an agent that reads the request and closes the connection
// without answering has received it once, and the Outcome is a Retry for the caller to schedule as
// a new delivery (see oneShot). It carries:
//
//   - the original raw body and its Content-Type, byte for byte;
//   - the informative provider headers the caller passed, minus any header this package sets itself,
//     hop-by-hop headers, Authorization and Cookie, the provider's trace context (traceparent,
//     tracestate, baggage), and anything that looks like a provider
//     signature (a name containing "signature" or "hmac", or starting with "Webhook-" or "Svix-"):
//     the caller's allow-list is the real filter, this is a second fence;
//   - User-Agent: replyonce-gateway;
//   - the configured static headers (for example Authorization, or another User-Agent), which cannot
//     override the headers below (see IsReservedHeader);
//   - the Replyonce-* headers, Idempotency-Key and, when a signing secret is set, the Standard
//     Webhooks headers webhook-id (the idempotency key, the same on every delivery), webhook-timestamp
//     (the injected clock) and webhook-signature, computed as svix's Sign computes it (sign.go; tests hold the two equal).
//
// With tracing (WithTracer), each forward is a client span "forward", a child of the span in the
// caller's context, and the agent receives that span's W3C traceparent, so its own spans join the
// gateway's trace. The span names the agent's host and port, the source, event id, run id and
// delivery, and the agent's status; never the URL's path or query, a header or the body. Without
// it, Forward starts no span and sets no trace header.
//
// String headers with an empty value and a zero ContextAt are left out rather than sent empty.
//
// # Classification
//
//	agent answer                                       Kind       inline: provider hears
//	2xx                                                Delivered  200
//	400, 413, 415, 422, and Request.Final              Rejected   200, retrying cannot help
//	401, 403, 404, 405, 410                            Fault      503: a configuration fault
//	any other 4xx (408, 409, 425, 429, ...), 5xx       Retry      503
//	3xx (redirects are never followed)                 Retry      503
//	1xx or an unknown status class                     Retry      503
//	no answer: refused, reset, timeout, bad URL, ...   Retry      503
//
// Only the statuses that say the event itself is bad are final. A wrong signing secret or a typo in
// the forward path makes the agent answer 401, 403 or 404 to every event: taking those for
// rejections would drop every event until someone noticed, so they are a Fault, which the caller
// keeps and retries (queued mode) or answers 503 (inline mode, so the provider keeps the event).
// The Outcome keeps the first 256 bytes of the agent's answer (Answer) for operators. With
// Request.KeepBody it also keeps a 2xx answer's whole body and Content-Type (Body, ContentType), up to
// that many bytes, so the caller can pass the agent's answer back to the provider (Slack slash
// commands, Discord interactions, Twilio TwiML); a longer answer is not kept (BodyErr wraps
// ErrAnswerTooLarge) and is still Delivered: the agent acted on the event.
//
// A 3xx is a Retry rather than a Rejected because it means the forward URL is misconfigured: the
// event must not be acknowledged to the provider, whose retries then deliver it once the operator has
// fixed the URL. Following it is never right, because the body would go to a host nobody configured.
//
// Retry-After is read only from a 429 or a 503, as delta-seconds or an HTTP-date measured against the
// injected clock (Outcome.RetryAfterGiven). 0 or a date in the past asks for a retry now; an
// unreadable value counts as absent. No bound is applied here: callers apply their own.
//
// Every Outcome other than Delivered carries an Err saying why; errors.Is(err,
// context.DeadlineExceeded) reports an agent timeout, errors.Is(err, ErrRedirect) a 3xx and
// errors.Is(err, ErrAgentStatus) any other non-2xx answer. A failed forward's Err is an *AgentError
// (explain.go) whose text says in plain words what to check: "the agent did not answer within
// forward.timeout (2s)", "the agent refused the gateway's credentials (401 Unauthorized): check
// forward.signing_secret and forward.headers", "nothing is listening at URL (connection refused)",
// the URL's password redacted. The log, `gateway events show`, the console and alerts show it as is.
//
// A Request with no Timeout gets DefaultTimeout, because the ledger's claim on the delivery is sized
// from the forward timeout: an unbounded forward would outlive its claim.
//
// The response body is read up to 64 KiB and closed so that the connection goes back to the pool;
// an agent that answers with more than that costs a new connection, not a stuck one.
package forward
