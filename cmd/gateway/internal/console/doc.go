// Package console is the gateway's admin console: server-rendered web
// pages on the private admin listener that show every queued event, every
// delivery attempt and every conversation (scope), and replay, resolve and
// pause.
//
// It reads and acts only through the ledger API's Go client (ledgerapi),
// the same API and client the CLI uses, so the console and `gateway
// events` / `gateway ledger` can never disagree. The gateway gives it a
// client that calls the API handler in process.
//
// # What it promises
//
//   - Every page and action needs a session. With an admin token, a person
//     signs in by typing the token into a form (POST, never in a URL); the
//     session is a random id in an HttpOnly, SameSite=Strict cookie, Secure
//     when the request came over TLS. Sessions live in this process's
//     memory for at most 12 hours and end at sign out or restart. Without a
//     token (allowed only on a loopback admin listener) a session is given
//     on the first visit and every page says that anyone on this host can
//     use the console.
//   - Every state-changing request is a POST carrying the session's CSRF
//     token (a form field, or the X-CSRF-Token header for the few fetch
//     calls), compared in constant time; a request a browser marks
//     Sec-Fetch-Site: cross-site is refused whatever it carries.
//   - Every value that came from a webhook or an agent is rendered through
//     html/template's contextual escaping; raw bodies are downloaded as
//     attachments with nosniff. A strict Content-Security-Policy allows
//     scripts, styles and connections from the console itself only, no
//     inline script or style, no frames, no plugins.
//   - Pages are rendered from templates embedded in the binary; the one
//     small script (live refresh, bulk replay progress, confirmations) is
//     an enhancement: every action also works as a plain form.
//
// # Choices where the issue leaves room
//
//   - Live refresh polls the overview every 5 seconds (no SSE): it is one
//     cheap request and survives proxies that buffer streams.
//   - The overview's chart of the last hour is this instance's: a History
//     samples the instance's own Prometheus counters every 2 seconds into
//     60 one-minute buckets in memory (no store writes, no shared data),
//     and the page says so. Minutes are real minutes of the clock.
//   - Rejected requests are read per instance (GET /v1/rejected), as the
//     gateway keeps them; conversations are listed by walking the store's
//     received index (GET /v1/conversations), reading only the scopes a
//     page shows. A conversation's page reads its newest 200 effect
//     entries (GET /v1/scopes/{scope}/timeline?entries=200) and links to
//     the older ones, 200 a page, so a long conversation costs a page.
//   - Resolving an ambiguous entry asks for the operator's name, which the
//     ledger records as resolved_by "operator:<name>" beside the time.
//   - Lists come from the ledger's indexes as the API serves them: queued
//     and delivering events through the due index, rejected and dead
//     through the review index, delivered events within a scope. A page
//     says when the scope bound cut the read short.
package console
