// Package mcptool serves guarded tools (package tool) on a server of the
// official MCP Go SDK, github.com/modelcontextprotocol/go-sdk.
//
// Each tool is registered with the IdempotentHint annotation, which is
// true of a guarded tool: a repeated call with the same identity has no
// further effect (check_already_done is also ReadOnlyHint). A call writes
// under the run the gateway forwarded to the agent, named by the
// Replyonce-Scope, Replyonce-Run-Id and Replyonce-Fencing-Token headers of
// the HTTP request (streamable HTTP transport), or by the same three names
// as keys of the call's _meta for transports without headers. A run
// already in the handler's context comes first.
//
// Every answer is a tool result in one shape (Result), a run named wrongly
// included (status invalid_run, terminal); only a ledger outage is a
// JSON-RPC error, the internal error -32603 with a short message, its
// details logged on the server (Options.Logger).
//
// It is its own Go module so that only users of MCP pull in the SDK.
package mcptool
