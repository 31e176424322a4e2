// Package tool guards the side-effecting tools of an LLM tool-calling loop
// with the ledger, so that a repeated tool call is replayed, refused or
// escalated instead of being done again.
//
// A guarded tool has a Definition (what the model is shown), an identity
// function and an effect. The identity picks the fields of the arguments
// that make two calls the same action, such as the order being refunded or
// the message being answered. It must never include the model's wording or
// its tool-call id: both change on a retry, and a key built from them would
// let the retry through.
//
// The run a tool writes under travels in the context (WithRun), because
// every SDK hands a tool a context and nothing else that is ours. Any run
// with Once and Check works: *ledger.Run in process, or the ledger API
// client's *ledgerapi.Run behind the gateway.
//
// The identity is either a list of the arguments' properties
// (Definition.Identity), which check_already_done then asks for alone, or
// a function of the decoded arguments. Every call's arguments are checked
// against the tool's JSON Schema before the ledger is asked; a call that
// does not fit is told, in words, which field is wrong and how.
//
// A call answers an Outcome for the model: a JSON text it can read, whether
// the call failed, whether the loop must stop (Terminal), whether calling
// again may help (Retryable) and whether a person must look (Escalate). The
// ledger's answers are values, never errors; a Go error means the ledger
// could not be asked (a store or network outage) or the context ended.
//
// CheckTool adds the read-only check_already_done tool, and Dispatch routes
// a call by name. The SDK adapters (MCP, OpenAI, Anthropic) live in nested
// modules under this directory so that this package pulls in no SDK:
// besides the standard library it imports ledger (and through it
// goccy/go-json and gowebpki/jcs) and santhosh-tekuri/jsonschema, the
// schema validator, with golang.org/x/text for its messages.
package tool
