package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// Run is what a guarded tool needs of a ledger run. *ledger.Run and
// *ledgerapi.Run both satisfy it as they are.
type Run interface {
	Once(ctx context.Context, intent string, payload any, effect ledger.Effect, opts ...ledger.OnceOptions) (ledger.Result, error)
	Check(ctx context.Context, intent string, payload any) (ledger.CheckResult, error)
}

type runKey struct{}

// WithRun returns ctx carrying run, for the tools called under it.
func WithRun(ctx context.Context, run Run) context.Context {
	return context.WithValue(ctx, runKey{}, run)
}

// RunFrom returns the run ctx carries, if any.
func RunFrom(ctx context.Context) (Run, bool) {
	r, ok := ctx.Value(runKey{}).(Run)
	return r, ok && r != nil
}

// Definition is what the model is shown about a tool, and the intent its
// effects are recorded under.
type Definition struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, an object schema.
	// Empty means an object with no declared properties.
	Parameters json.RawMessage
	// Intent names the effect in the ledger (default Name). Two tools that
	// do the same thing under different names should share an intent.
	Intent string
}

// namePattern is the tool-name rule that OpenAI, Anthropic and MCP clients
// all accept.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func (d Definition) normalized() (Definition, error) {
	if !namePattern.MatchString(d.Name) {
		return d, fmt.Errorf("tool: name %q must be 1 to 64 letters, digits, '_' or '-'", d.Name)
	}
	if d.Intent == "" {
		d.Intent = d.Name
	}
	if len(bytes.TrimSpace(d.Parameters)) == 0 {
		d.Parameters = emptySchema
	}
	var schema map[string]any
	if err := json.Unmarshal(d.Parameters, &schema); err != nil {
		return d, fmt.Errorf("tool %s: parameters must be a JSON Schema object: %w", d.Name, err)
	}
	if t, ok := schema["type"]; ok && t != "object" {
		return d, fmt.Errorf("tool %s: parameters: type must be \"object\", not %v", d.Name, t)
	}
	return d, nil
}

// Options tune a guarded tool. Zero values are the ledger's defaults.
type Options[A any] struct {
	// Summary describes the effect to other runs that conflict with it.
	Summary func(args A) string
	// Conflict says which other writes on the scope make this one stale.
	Conflict ledger.ConflictMode
	// Wait makes an in-flight answer wait up to this long for the other
	// attempt to settle.
	Wait time.Duration
	// PendingTTL overrides the ledger's pending TTL for this tool.
	PendingTTL time.Duration
}

// Tool is a tool the model may call: a guarded one (Guard) or the
// read-only check_already_done (CheckTool).
type Tool struct {
	def      Definition
	readOnly bool
	// payload is the identity of a call's arguments, for CheckTool.
	payload func(args json.RawMessage) (any, error)
	call    func(ctx context.Context, run Run, args json.RawMessage) (Outcome, error)
}

// Definition is what the model is shown, normalized (Intent and Parameters
// filled in).
func (t *Tool) Definition() Definition { return t.def }

// ReadOnly reports whether the tool only reads (check_already_done). A
// guarded tool is idempotent but not read-only.
func (t *Tool) ReadOnly() bool { return t.readOnly }

// Guard makes a guarded tool. identity returns the payload that names the
// action in the ledger; effect performs it and returns what the model is
// told (stored and replayed to later calls). An effect returns an error
// wrapped with ledger.NotApplied when the action certainly did not happen;
// any other error is recorded as ambiguous and escalated.
func Guard[A any](def Definition, identity func(A) (any, error), effect func(ctx context.Context, args A, call ledger.Call) (any, error), opts ...Options[A]) (*Tool, error) {
	def, err := def.normalized()
	if err != nil {
		return nil, err
	}
	if identity == nil || effect == nil {
		return nil, fmt.Errorf("tool %s: identity and effect are required", def.Name)
	}
	var o Options[A]
	if len(opts) > 0 {
		o = opts[0]
	}
	decode := func(raw json.RawMessage) (A, any, error) {
		var args A
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage("{}")
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			return args, nil, fmt.Errorf("arguments are not valid for %s: %w", def.Name, err)
		}
		id, err := identity(args)
		if err != nil {
			return args, nil, fmt.Errorf("arguments are not valid for %s: %w", def.Name, err)
		}
		return args, id, nil
	}
	t := &Tool{def: def}
	t.payload = func(raw json.RawMessage) (any, error) {
		_, id, err := decode(raw)
		return id, err
	}
	t.call = func(ctx context.Context, run Run, raw json.RawMessage) (Outcome, error) {
		args, id, err := decode(raw)
		if err != nil {
			return invalidArguments(err), nil
		}
		lo := ledger.OnceOptions{Conflict: o.Conflict, Wait: o.Wait, PendingTTL: o.PendingTTL}
		if o.Summary != nil {
			lo.Summary = o.Summary(args)
		}
		res, err := run.Once(ctx, def.Intent, id, func(ctx context.Context, c ledger.Call) (any, error) {
			return effect(ctx, args, c)
		}, lo)
		if err != nil {
			return ledgerRefusedInput(err)
		}
		return FromResult(res), nil
	}
	return t, nil
}

// MustGuard is Guard for definitions known to be valid; it panics on an
// invalid one, as regexp.MustCompile does.
func MustGuard[A any](def Definition, identity func(A) (any, error), effect func(ctx context.Context, args A, call ledger.Call) (any, error), opts ...Options[A]) *Tool {
	t, err := Guard(def, identity, effect, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Call performs one tool call under the run ctx carries. The error is
// non-nil only when the ledger could not be asked (store or network
// outage, or ctx ended); every answer of the ledger, and every mistake of
// the model, is an Outcome.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (Outcome, error) {
	run, ok := RunFrom(ctx)
	if !ok {
		return noRun(t.def.Name), nil
	}
	return t.call(ctx, run, args)
}

// ledgerRefusedInput turns the ledger's input errors into outcomes and
// passes every other error (an outage) on.
func ledgerRefusedInput(err error) (Outcome, error) {
	switch {
	case errors.Is(err, ledger.ErrUnknownRun):
		return Outcome{Status: StatusUnknownRun, IsError: true, Terminal: true, Escalate: true,
			Message: "The ledger does not know this run, so nothing was done. Stop and hand over to a person."}.finish(), nil
	case errors.Is(err, ledger.ErrInvalid):
		return Outcome{Status: StatusInvalidArguments, IsError: true,
			Message: "The ledger refused this call as invalid (" + err.Error() + "); nothing was done."}.finish(), nil
	}
	return Outcome{}, fmt.Errorf("tool: ledger unavailable, nothing decided: %w", err)
}

// Dispatch performs the call of the tool named name. An unknown name is an
// outcome telling the model which tools exist, not an error.
func Dispatch(ctx context.Context, tools []*Tool, name string, args json.RawMessage) (Outcome, error) {
	for _, t := range tools {
		if t.def.Name == name {
			return t.Call(ctx, args)
		}
	}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.def.Name)
	}
	return Outcome{Status: StatusUnknownTool, IsError: true, Retryable: true,
		Message: fmt.Sprintf("There is no tool named %q; the tools are %q.", name, names)}.finish(), nil
}
