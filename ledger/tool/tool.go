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
	// Identity names the properties of Parameters that make two calls
	// the same action (the order refunded, the message answered), as an
	// alternative to an identity function: the ledger's payload is then
	// those properties' values, and check_already_done asks for them
	// alone. Each must be a property Parameters declares.
	Identity []string
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
	props, _ := schema["properties"].(map[string]any)
	seen := map[string]bool{}
	for _, f := range d.Identity {
		if _, ok := props[f]; !ok {
			return d, fmt.Errorf("tool %s: identity %q is not a property of the parameters", d.Name, f)
		}
		if seen[f] {
			return d, fmt.Errorf("tool %s: identity %q is given twice", d.Name, f)
		}
		seen[f] = true
	}
	return d, nil
}

// checkSchema is the schema of what check_already_done asks for this
// tool: with Identity, those properties alone (required where Parameters
// requires them, others ignored); without, Parameters with nothing
// required, since which fields the identity function reads is not known.
func (d Definition) checkSchema() (json.RawMessage, error) {
	var schema map[string]any
	if err := json.Unmarshal(d.Parameters, &schema); err != nil {
		return nil, err
	}
	if len(d.Identity) == 0 {
		delete(schema, "required")
		return json.Marshal(schema)
	}
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if rs, ok := schema["required"].([]any); ok {
		for _, r := range rs {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	sub := map[string]any{"type": "object"}
	subProps := map[string]any{}
	var subRequired []string
	for _, f := range d.Identity {
		subProps[f] = props[f]
		if required[f] {
			subRequired = append(subRequired, f)
		}
	}
	sub["properties"] = subProps
	if len(subRequired) > 0 {
		sub["required"] = subRequired
	}
	// $defs and definitions stay, for a property that refers to them.
	for _, k := range []string{"$schema", "$defs", "definitions"} {
		if v, ok := schema[k]; ok {
			sub[k] = v
		}
	}
	return json.Marshal(sub)
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
	// payload is the identity of the arguments check_already_done was
	// given for this tool; prefix names where they sit, for messages.
	payload func(args json.RawMessage, prefix string) (any, error)
	call    func(ctx context.Context, run Run, args json.RawMessage) (Outcome, error)
}

// Definition is what the model is shown, normalized (Intent and Parameters
// filled in).
func (t *Tool) Definition() Definition { return t.def }

// ReadOnly reports whether the tool only reads (check_already_done). A
// guarded tool is idempotent but not read-only.
func (t *Tool) ReadOnly() bool { return t.readOnly }

// Guard makes a guarded tool. The identity names the action in the
// ledger: either Definition.Identity lists the properties that make it, and
// identity is nil, or identity returns the payload from the decoded
// arguments. effect performs the action and returns what the model is
// told (stored and replayed to later calls). An effect returns an error
// wrapped with ledger.NotApplied when the action certainly did not
// happen; any other error is recorded as ambiguous and escalated.
//
// Every call's arguments are checked against Definition.Parameters first:
// a call that does not fit is told which field is wrong and how, and the
// ledger is not asked.
func Guard[A any](def Definition, identity func(A) (any, error), effect func(ctx context.Context, args A, call ledger.Call) (any, error), opts ...Options[A]) (*Tool, error) {
	def, err := def.normalized()
	if err != nil {
		return nil, err
	}
	switch {
	case effect == nil:
		return nil, fmt.Errorf("tool %s: an effect is required", def.Name)
	case identity == nil && len(def.Identity) == 0:
		return nil, fmt.Errorf("tool %s: an identity is required: Definition.Identity or an identity function", def.Name)
	case identity != nil && len(def.Identity) > 0:
		return nil, fmt.Errorf("tool %s: give Definition.Identity or an identity function, not both", def.Name)
	}
	schema, err := compileSchema(def.Name, def.Parameters)
	if err != nil {
		return nil, err
	}
	checkDoc, err := def.checkSchema()
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", def.Name, err)
	}
	checkSchema, err := compileSchema(def.Name, checkDoc)
	if err != nil {
		return nil, err
	}
	var o Options[A]
	if len(opts) > 0 {
		o = opts[0]
	}
	// identityOf is the payload of arguments that fit the schema.
	identityOf := func(raw json.RawMessage) (any, error) {
		if identity == nil {
			return fieldsOf(raw, def.Identity)
		}
		var args A
		if err := json.Unmarshal(orEmpty(raw), &args); err != nil {
			return nil, fmt.Errorf("arguments are not valid for %s: %w", def.Name, err)
		}
		id, err := identity(args)
		if err != nil {
			return nil, fmt.Errorf("arguments are not valid for %s: %w", def.Name, err)
		}
		return id, nil
	}
	t := &Tool{def: def}
	t.payload = func(raw json.RawMessage, prefix string) (any, error) {
		if err := validateArgs(checkSchema, raw, prefix); err != nil {
			return nil, fmt.Errorf("arguments are not valid for %s: %w", def.Name, err)
		}
		return identityOf(raw)
	}
	t.call = func(ctx context.Context, run Run, raw json.RawMessage) (Outcome, error) {
		if err := validateArgs(schema, raw, ""); err != nil {
			return invalidArguments(fmt.Errorf("arguments are not valid for %s: %w", def.Name, err)), nil
		}
		var args A
		if err := json.Unmarshal(orEmpty(raw), &args); err != nil {
			return invalidArguments(fmt.Errorf("arguments are not valid for %s: %w", def.Name, err)), nil
		}
		id, err := identityOf(raw)
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

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// fieldsOf is the payload of a tool with Definition.Identity: the named
// properties of raw (which fit the schema, so raw is an object), those
// absent left out.
func fieldsOf(raw json.RawMessage, names []string) (any, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(orEmpty(raw), &all); err != nil {
		return nil, fmt.Errorf("the arguments must be a JSON object: %w", err)
	}
	id := make(map[string]json.RawMessage, len(names))
	for _, n := range names {
		if v, ok := all[n]; ok {
			id[n] = v
		}
	}
	return id, nil
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
