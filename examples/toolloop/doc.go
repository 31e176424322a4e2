// Command toolloop is an agent whose LLM tool-calling loop writes through
// guarded tools (package ledger/tool). The gateway forwards each event with
// the run it began (Replyonce-Scope, Replyonce-Run-Id,
// Replyonce-Fencing-Token); the agent puts that run in the context of its
// loop, so every refund and reply the model asks for is claimed under it.
//
// The model is a scripted fake (deterministic, no network), standing in
// for any provider: it asks for tool calls, reads their answers, and the
// loop stops when an answer is terminal. Run it with
//
//	go run ./examples/toolloop
//
// to see a retried refund replayed and a stale delivery refused.
package main
