package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// The arguments of a call are checked against the tool's JSON Schema
// (Definition.Parameters) before anything else, so that a model that sends
// a wrong type or leaves out a field hears which field, in words, and the
// ledger is not asked. The schema is the one the model is shown and it is
// written by the tool's author, so it may use any keyword of JSON Schema:
// a full validator (santhosh-tekuri/jsonschema, draft 2020-12 by default,
// the draft a schema's $schema names otherwise) rather than a checker of a
// subset.

// printer renders the validator's messages; they are English, as every
// other text the model is told.
var printer = message.NewPrinter(language.English)

// noLoader refuses every $ref that leaves the schema: a tool's schema is
// self-contained, and compiling it must read no file and no URL.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: a tool schema must be self-contained (no $ref outside it)", url)
}

// compileSchema compiles the JSON Schema doc of the arguments of tool
// name.
func compileSchema(name string, doc json.RawMessage) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("tool %s: parameters are not JSON: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	url := "urn:replyonce:tool:" + name
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("tool %s: parameters: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %s: parameters are not a valid JSON Schema: %w", name, err)
	}
	return s, nil
}

// validateArgs checks raw (empty means {}) against s. The error is for the
// model: it names each field that is wrong and how, with prefix before the
// field names (the arguments of check_already_done sit under
// "arguments").
func validateArgs(s *jsonschema.Schema, raw json.RawMessage, prefix string) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("the arguments are not valid JSON (%v)", err)
	}
	err = s.Validate(v)
	var ve *jsonschema.ValidationError
	if err == nil {
		return nil
	} else if !errors.As(err, &ve) {
		return fmt.Errorf("the arguments could not be checked (%v)", err)
	}
	var problems []string
	for _, leaf := range leaves(ve) {
		problems = append(problems, describe(leaf, prefix)...)
	}
	sort.Strings(problems)
	problems = compact(problems)
	if len(problems) == 0 {
		problems = []string{ve.LocalizedError(printer)}
	}
	return errors.New(strings.Join(problems, "; "))
}

// leaves are the errors with no causes: the failed keywords themselves,
// not the schemas that contain them.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// field names an instance location as the model wrote it: order,
// items.0.sku.
func field(prefix string, loc []string) string {
	parts := append([]string{}, loc...)
	if prefix != "" {
		parts = append([]string{prefix}, parts...)
	}
	return strings.Join(parts, ".")
}

func describe(e *jsonschema.ValidationError, prefix string) []string {
	where := field(prefix, e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var out []string
		for _, m := range k.Missing {
			out = append(out, fmt.Sprintf("argument %q is required", field(where, []string{m})))
		}
		return out
	case *kind.AdditionalProperties:
		var out []string
		for _, p := range k.Properties {
			out = append(out, fmt.Sprintf("argument %q is not one this tool takes", field(where, []string{p})))
		}
		return out
	case *kind.Type:
		return []string{fmt.Sprintf("argument %q must be %s, not %s", orArguments(where), strings.Join(k.Want, " or "), k.Got)}
	case *kind.FalseSchema:
		return []string{fmt.Sprintf("argument %q is not allowed", orArguments(where))}
	}
	return []string{fmt.Sprintf("argument %q: %s", orArguments(where), e.ErrorKind.LocalizedString(printer))}
}

// orArguments names the arguments as a whole when the location is their
// root.
func orArguments(where string) string {
	if where == "" {
		return "arguments"
	}
	return where
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
