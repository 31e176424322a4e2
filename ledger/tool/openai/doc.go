// Package openaitool offers guarded tools (package tool) to OpenAI models
// through github.com/openai/openai-go/v3: tool definitions for Chat
// Completions and for the Responses API, and the handling of the model's
// tool call into the message that answers it.
//
// The run a call writes under is the one in the context (tool.WithRun),
// typically built from the gateway's forwarded Replyonce-* headers.
//
// It is its own Go module so that only users of the OpenAI SDK pull it in.
package openaitool
