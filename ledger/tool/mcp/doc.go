// Package mcptool serves guarded tools (package tool) on a server of the
// official MCP Go SDK, github.com/modelcontextprotocol/go-sdk.
//
// Each tool is registered with the IdempotentHint annotation, which is
// true of a guarded tool: a repeated call with the same identity has no
// further effect (check_already_done is also ReadOnlyHint). A call writes
// under the run the gateway forwarded to the agent, named by the
// Replyonce-Scope, Replyonce-Run-Id and Replyonce-Fencing-Token headers of
// the HTTP request (streamable HTTP transport), or, for transports without
// headers, by the call's _meta under the namespaced keys replyonce/scope,
// replyonce/run-id and replyonce/fencing-token (or the header names as
// keys). A _meta key in the replyonce namespace that this package does not
// know is refused as invalid_run, naming it, rather than ignored; other
// keys are left alone. A run already in the handler's context comes first.
//
// Every answer is a tool result in one shape (Result), a run named wrongly
// included (status invalid_run, terminal); only a ledger outage is a
// JSON-RPC error, the internal error -32603 with a short message, its
// details logged on the server (Options.Logger).
//
// It is its own Go module so that only users of MCP pull in the SDK.
package mcptool
