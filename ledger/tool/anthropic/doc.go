// Package anthropictool offers guarded tools (package tool) to Claude
// through github.com/anthropics/anthropic-sdk-go: the tool definitions of
// a Messages request, and a tool_use block answered by its tool_result.
//
// The run a call writes under is the one in the context (tool.WithRun),
// typically built from the gateway's forwarded Replyonce-* headers.
//
// It is its own Go module so that only users of the Anthropic SDK pull it
// in.
package anthropictool
