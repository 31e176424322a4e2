// Package ledgerapi serves the ledger to agents over HTTP, as JSON, and is
// the Go client for that API.
//
// The gateway mounts NewHandler on its private admin listener. An agent
// written in any language begins or resumes its run, claims each side
// effect, performs it, and settles the claim; the run id and fencing token
// it writes with are the ones the gateway forwarded, so a later delivery of
// the same event, or a newer run on the scope, fences it. API.md lists the
// endpoints with examples; openapi.yaml describes them as an OpenAPI 3.1
// document, served at "/v1/openapi.yaml" and "/v1/openapi.json". Tests hold
// the document to the routes the handler registers, to the Go types of the
// bodies (field names, required fields, JSON types) and to a real handler's
// answers, and hold API.md's endpoint and error tables to the document.
//
// The Client mirrors *ledger.Ledger method for method (Begin returns a Run
// with Once, Claim, Check, Heartbeat and End; Once runs the effect locally
// between a remote claim and a remote settle). The Ledger and RunHandle
// interfaces are what an agent needs from either, so its logic does not
// change when it moves from the in-process ledger to the remote one.
//
// The admin console (cmd/gateway/internal/console) is built on this API
// through the Client, like the CLI: the scope timeline and newest-first
// pages of deliveries exist for it (timeline.go), and so does a resolve's
// Who (ledger.Resolution). The
// timeline's refusals are the ones this handler answered since it was
// built, kept in memory (bounded): a refused claim changes nothing in the
// ledger, so nothing durable records it.
//
// # What it promises
//
//   - Ledger outcomes (executed, replayed, in_flight, ambiguous, failed,
//     refused with its reason) are 200 answers carrying the result; only
//     invalid requests, authentication and store failures are errors.
//   - Errors are JSON {"error": {"code": ..., "message": ...}} with stable
//     codes, mapped in one function (statusFor). A refused request changes
//     nothing in the ledger. Anything unrecognised is 503
//     store_unavailable, never a 2xx.
//   - With a token, every request needs "Authorization: Bearer <token>",
//     compared in constant time over SHA-256 digests of both sides.
//   - Request bodies must be application/json, at most MaxBodyBytes, one
//     object with no unknown fields.
//   - Over HTTP, errors.Is matches the ledger's sentinel errors
//     (ledger.ErrUnknownRun, ...), plus ErrUnauthorized and ErrUnavailable.
//
// # Choices where the design leaves room
//
//   - Field names are snake_case, durations integer milliseconds, times RFC
//     3339 in UTC, fencing tokens JSON numbers.
//   - A scope in a path (history) is percent-encoded as one segment; the
//     scopes "." and ".." cannot be addressed that way.
//   - end with a token is fenced on that delivery, as the ledger's Run.End
//     is: a stale delivery's end changes nothing. Without a token, and for
//     cancel, it is an operator's action on whichever delivery holds the run.
//   - A reconciler runs where the effect runs. The Go client's Once takes
//     one (WithReconciler) and runs the ledger's own claim → effect →
//     settle loop (ledger.RunEffect), so an ambiguous entry is put to it as
//     in process, and its answer recorded with /v1/entries/resolve
//     "by":"reconciler", fenced on the attempt. Without one, an ambiguous
//     entry is reported and waits for an operator.
//   - The client never retries by itself.
package ledgerapi
