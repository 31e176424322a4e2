package tool

import (
	"encoding/json"

	"github.com/replyonce/gateway/ledger"
)

// Status is what a tool call came to, as the model is told.
type Status string

// Statuses of a guarded call. The refusal reasons of the ledger keep their
// names, so a reason the ledger adds later still reads well.
const (
	StatusExecuted            Status = "executed"
	StatusReplayed            Status = "replayed"
	StatusInFlight            Status = "in_flight"
	StatusFailed              Status = "failed"
	StatusAmbiguous           Status = "ambiguous"
	StatusConversationChanged Status = "conversation_changed"
	StatusSuperseded          Status = "superseded"
	StatusRunCancelled        Status = "run_cancelled"
	StatusRunEnded            Status = "run_ended"
	StatusBusy                Status = "busy"
	StatusExhausted           Status = "exhausted"
	// StatusRateLimited is the loop breaker's refusal
	// (ledger.ReasonRateLimited): the scope reached its cap of this intent
	// (ledger.Options.Caps), which looks like a loop.
	StatusRateLimited Status = Status(ledger.ReasonRateLimited)

	StatusInvalidArguments Status = "invalid_arguments"
	StatusUnknownTool      Status = "unknown_tool"
	StatusUnknownRun       Status = "unknown_run"
	StatusNoRun            Status = "no_run"
	// StatusInvalidRun is a call whose run is named wrongly (a fencing
	// token that is not a number, a scope without a run id): a fault of
	// the host, not of the model.
	StatusInvalidRun Status = "invalid_run"

	// Answers of check_already_done.
	StatusDone    Status = "done"
	StatusNotDone Status = "not_done"
)

// Outcome is the model-facing answer of one tool call.
type Outcome struct {
	Status  Status
	Message string // what the model should understand and do next
	// Text is what goes back to the model: a JSON object with status,
	// message, and result or conflicts when there are any.
	Text string
	// IsError says the action was not done by this call.
	IsError bool
	// Terminal says the loop must stop: this run may not act any more, or
	// a person has to decide.
	Terminal bool
	// Retryable says that calling again (with the same arguments, after
	// the message's advice) may make progress.
	Retryable bool
	// Escalate says a person must look: the effect may have happened, or
	// it was refused for a reason no retry fixes.
	Escalate bool
	// Value is the effect's stored result (executed, replayed, done).
	Value json.RawMessage
	// Conflicts are the writes another run made under this one
	// (conversation_changed).
	Conflicts []Conflict
}

// Conflict is one write that changed the scope under the run.
type Conflict struct {
	Intent  string `json:"intent"`
	State   string `json:"state"`
	Summary string `json:"summary,omitempty"`
}

// finish renders Text from the other fields.
func (o Outcome) finish() Outcome {
	body := struct {
		Status    Status          `json:"status"`
		Message   string          `json:"message"`
		Result    json.RawMessage `json:"result,omitempty"`
		Conflicts []Conflict      `json:"conflicts,omitempty"`
	}{o.Status, o.Message, o.Value, o.Conflicts}
	b, err := json.Marshal(body)
	if err != nil {
		// Value came from the ledger as valid JSON; should it not be, the
		// model still gets the status and the message.
		body.Result = nil
		b, _ = json.Marshal(body)
	}
	o.Text = string(b)
	return o
}

// FromResult maps a ledger result to what the model is told.
func FromResult(r ledger.Result) Outcome {
	o := Outcome{Value: r.Value}
	switch r.Status {
	case ledger.StatusExecuted:
		o.Status, o.Message = StatusExecuted, "Done."
	case ledger.StatusReplayed:
		o.Status = StatusReplayed
		o.Message = "Already done earlier; this call did nothing. Do not tell the customer again and do not repeat it."
	case ledger.StatusInFlight:
		o.Status, o.IsError, o.Retryable = StatusInFlight, true, true
		o.Message = "The same action is being done right now by another attempt, and this call did nothing. Wait a moment, then call again with the same arguments (it will not be done twice) or use check_already_done to see how it ended."
	case ledger.StatusFailed:
		o.Status, o.IsError, o.Retryable = StatusFailed, true, true
		o.Message = "It failed and certainly did not happen" + errorText(r.Err) + ". It is safe to try again."
	case ledger.StatusAmbiguous:
		o.Status, o.IsError, o.Terminal, o.Escalate = StatusAmbiguous, true, true, true
		o.Message = "It may or may not have happened" + errorText(r.Err) + ". Do not repeat it; a person will check. Stop here."
	case ledger.StatusRefused:
		o = refused(r)
	default:
		o.Status, o.IsError, o.Terminal, o.Escalate = Status(r.Status), true, true, true
		o.Message = "The ledger answered " + string(r.Status) + ", which this tool does not know; nothing is assumed done. Stop here."
	}
	return o.finish()
}

func refused(r ledger.Result) Outcome {
	o := Outcome{Status: Status(r.Reason), IsError: true}
	switch Status(r.Reason) {
	case StatusConversationChanged:
		o.Retryable = true
		o.Message = "Not done: the conversation changed since you read it (see conflicts). Re-read it, then decide again; call again only if it is still needed."
		for _, e := range r.Conflicts {
			o.Conflicts = append(o.Conflicts, Conflict{Intent: e.Intent, State: string(e.State), Summary: e.Summary})
		}
	case StatusBusy:
		o.Retryable = true
		o.Message = "Not done: another run holds this conversation right now. Try again later."
	case StatusSuperseded:
		o.Terminal = true
		o.Message = "Not done: a newer run now handles this conversation. Stop; say nothing more."
	case StatusRunCancelled:
		o.Terminal = true
		o.Message = "Not done: this run was cancelled. Stop; say nothing more."
	case StatusRunEnded:
		o.Terminal = true
		o.Message = "Not done: this run has already ended. Stop; say nothing more."
	case StatusExhausted:
		o.Terminal, o.Escalate = true, true
		o.Message = "Not done: it failed too many times. Do not try again; a person will take over. Stop here."
	case StatusRateLimited:
		o.Terminal, o.Escalate = true, true
		o.Message = "Not done: this conversation reached its limit for this action, which looks like a loop. A person will take over. Stop here."
	default:
		o.Terminal, o.Escalate = true, true
		o.Message = "Not done: refused (" + string(r.Reason) + "). Stop here; a person will look."
	}
	return o
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

func invalidArguments(err error) Outcome {
	return Outcome{Status: StatusInvalidArguments, IsError: true, Retryable: true,
		Message: err.Error() + ". Nothing was done; fix the arguments and call again."}.finish()
}

// InvalidRun is the outcome of a call whose run could not be read (err
// says which header or key, and why). The model cannot fix it, so it is
// terminal and escalated.
func InvalidRun(err error) Outcome {
	return Outcome{Status: StatusInvalidRun, IsError: true, Terminal: true, Escalate: true,
		Message: "Nothing was done: " + err.Error() + ". The run this call acts for could not be read, which you cannot fix. Stop here; a person will look."}.finish()
}

func noRun(name string) Outcome {
	return Outcome{Status: StatusNoRun, IsError: true, Terminal: true, Escalate: true,
		Message: "Tool " + name + " cannot act: it was called outside a ledger run, so nothing was done. Stop here."}.finish()
}
