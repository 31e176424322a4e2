package anthropictool

import (
	"context"
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/replyonce/gateway/ledger/tool"
)

// Tools are tools as Messages API custom tools.
func Tools(tools ...*tool.Tool) []anthropic.ToolUnionParam {
	out := make([]anthropic.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		d := t.Definition()
		u := anthropic.ToolUnionParamOfTool(inputSchema(d.Parameters), d.Name)
		u.OfTool.Description = param.NewOpt(d.Description)
		out = append(out, u)
	}
	return out
}

// inputSchema splits a JSON Schema object into the SDK's fields; every
// keyword it has no field for (additionalProperties, $defs, ...) is kept
// as an extra field. The tool package checked the schema is an object.
func inputSchema(raw json.RawMessage) anthropic.ToolInputSchemaParam {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	var s anthropic.ToolInputSchemaParam
	for k, v := range m {
		switch k {
		case "type":
		case "properties":
			var p map[string]any
			_ = json.Unmarshal(v, &p)
			s.Properties = p
		case "required":
			_ = json.Unmarshal(v, &s.Required)
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			var x any
			_ = json.Unmarshal(v, &x)
			s.ExtraFields[k] = x
		}
	}
	return s
}

// HandleToolUse performs one tool_use block and returns the tool_result
// block that answers it (is_error set when the action was not done by
// this call), with the outcome for the loop (stop on Terminal). A tool
// that is not among tools is answered as an error for the model. The
// error is the ledger's outage only.
func HandleToolUse(ctx context.Context, tools []*tool.Tool, use anthropic.ToolUseBlock) (anthropic.ContentBlockParamUnion, tool.Outcome, error) {
	out, err := tool.Dispatch(ctx, tools, use.Name, use.Input)
	if err != nil {
		return anthropic.ContentBlockParamUnion{}, out, err
	}
	return anthropic.NewToolResultBlock(use.ID, out.Text, out.IsError), out, nil
}
