package openaitool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/replyonce/gateway/ledger/tool"
)

// schema is a definition's parameters as the SDK's map. The tool package
// checked they are a JSON object.
func schema(t *tool.Tool) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(t.Definition().Parameters, &m)
	return m
}

// ChatTools are tools as Chat Completions function tools. They are not
// strict: a guarded tool's schema need not meet Structured Outputs' rules.
func ChatTools(tools ...*tool.Tool) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		d := t.Definition()
		out = append(out, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        d.Name,
			Description: param.NewOpt(d.Description),
			Parameters:  openai.FunctionParameters(schema(t)),
			Strict:      param.NewOpt(false),
		}))
	}
	return out
}

// ResponsesTools are tools as Responses API function tools, not strict.
func ResponsesTools(tools ...*tool.Tool) []responses.ToolUnionParam {
	out := make([]responses.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		u := responses.ToolParamOfFunction(t.Definition().Name, schema(t), false)
		u.OfFunction.Description = param.NewOpt(t.Definition().Description)
		out = append(out, u)
	}
	return out
}

// HandleChatToolCall performs one tool call of a chat completion and
// returns the tool message that answers it, with the outcome for the loop
// (stop on Terminal). A call of a tool that is not among tools, or of a
// custom tool, is answered as an error for the model. The error is the
// ledger's outage only.
func HandleChatToolCall(ctx context.Context, tools []*tool.Tool, call openai.ChatCompletionMessageToolCallUnion) (openai.ChatCompletionMessageParamUnion, tool.Outcome, error) {
	var out tool.Outcome
	var err error
	if call.Type != "" && call.Type != "function" {
		// A name with a colon matches no tool, so the model is told which
		// tools exist.
		out, err = tool.Dispatch(ctx, tools, fmt.Sprintf("%s:%s", call.Type, call.Custom.Name), nil)
	} else {
		out, err = tool.Dispatch(ctx, tools, call.Function.Name, json.RawMessage(call.Function.Arguments))
	}
	if err != nil {
		return openai.ChatCompletionMessageParamUnion{}, out, err
	}
	return openai.ToolMessage(out.Text, call.ID), out, nil
}

// HandleResponsesFunctionCall performs one function_call item of a
// response and returns the function_call_output item that answers it,
// with the outcome for the loop.
func HandleResponsesFunctionCall(ctx context.Context, tools []*tool.Tool, call responses.ResponseFunctionToolCall) (responses.ResponseInputItemUnionParam, tool.Outcome, error) {
	out, err := tool.Dispatch(ctx, tools, call.Name, json.RawMessage(call.Arguments))
	if err != nil {
		return responses.ResponseInputItemUnionParam{}, out, err
	}
	item := responses.ResponseInputItemParamOfFunctionCallOutput(out.Text)
	item.OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
	return item, out, nil
}
