package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/replyonce/gateway/ledger"
)

// CheckName is the name of the read-only tool CheckTool makes.
const CheckName = "check_already_done"

// CheckTool makes check_already_done, a read-only tool that tells the
// model whether one of tools was already done for the same identity, so
// that it can look before it acts. It writes nothing to the ledger.
func CheckTool(tools ...*Tool) (*Tool, error) {
	names := make([]string, 0, len(tools))
	byName := make(map[string]*Tool, len(tools))
	for _, t := range tools {
		if t == nil || t.readOnly {
			continue
		}
		if _, dup := byName[t.def.Name]; dup {
			return nil, fmt.Errorf("tool: %s is given twice", t.def.Name)
		}
		byName[t.def.Name] = t
		names = append(names, t.def.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("tool: %s needs at least one guarded tool", CheckName)
	}
	var asks []string
	for _, n := range names {
		if id := byName[n].def.Identity; len(id) > 0 {
			asks = append(asks, n+": "+strings.Join(id, ", "))
		} else {
			asks = append(asks, n+": the arguments you would call it with")
		}
	}
	schema, err := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"tool": map[string]any{"type": "string", "enum": names, "description": "the tool whose action to look up"},
			"arguments": map[string]any{"type": "object",
				"description": "what names the action, per tool (" + strings.Join(asks, "; ") + "); other arguments are ignored"},
		},
		"required":             []string{"tool", "arguments"},
		"additionalProperties": false,
	})
	if err != nil {
		return nil, fmt.Errorf("tool: %s schema: %w", CheckName, err)
	}
	compiled, err := compileSchema(CheckName, schema)
	if err != nil {
		return nil, err
	}
	t := &Tool{readOnly: true, def: Definition{Name: CheckName, Intent: CheckName, Parameters: schema,
		Description: "Look up, without doing anything, whether an action was already done in this conversation. Call it before repeating an action you may have done."}}
	t.call = func(ctx context.Context, run Run, raw json.RawMessage) (Outcome, error) {
		if err := validateArgs(compiled, raw, ""); err != nil {
			return invalidArguments(fmt.Errorf("arguments are not valid for %s: %w", CheckName, err)), nil
		}
		var in struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return invalidArguments(fmt.Errorf("arguments are not valid for %s: %w", CheckName, err)), nil
		}
		target := byName[in.Tool]
		if target == nil {
			return invalidArguments(fmt.Errorf("%s: tool %q is not one of %q", CheckName, in.Tool, names)), nil
		}
		payload, err := target.payload(in.Arguments, "arguments")
		if err != nil {
			return invalidArguments(err), nil
		}
		res, err := run.Check(ctx, target.def.Intent, payload)
		if err != nil {
			return ledgerRefusedInput(err)
		}
		return fromCheck(res), nil
	}
	return t, nil
}

func fromCheck(r ledger.CheckResult) Outcome {
	var o Outcome
	if r.Entry != nil {
		o.Value = r.Entry.Value
	}
	switch {
	case r.Done:
		o.Status = StatusDone
		o.Message = "Already done. Do not do it again and do not tell the customer again."
	case r.Status == ledger.StatusInFlight:
		o.Status = StatusInFlight
		o.Message = "Being done right now by another attempt. Do not start it again."
	case r.Status == ledger.StatusAmbiguous:
		o.Status = StatusAmbiguous
		o.Message = "It may or may not have happened; a person has to check. Do not do it again."
	case r.Status == ledger.StatusFailed:
		o.Status = StatusFailed
		o.Message = "An earlier attempt failed without taking effect. It has not been done."
	default:
		o.Status = StatusNotDone
		o.Message = "Not done yet."
	}
	return o.finish()
}
