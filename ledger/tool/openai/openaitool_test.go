package openaitool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/tool"
	openaitool "github.com/replyonce/gateway/ledger/tool/openai"
	"github.com/replyonce/gateway/ledger/tool/tooltest"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// chatToolCall is a tool call as the Chat Completions API returns it,
// decoded by the SDK.
func chatToolCall(t testing.TB, id, name string, args json.RawMessage) openai.ChatCompletionMessageToolCallUnion {
	raw, _ := json.Marshal(map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(args)}})
	var call openai.ChatCompletionMessageToolCallUnion
	if err := json.Unmarshal(raw, &call); err != nil {
		t.Fatal(err)
	}
	return call
}

// responsesCall is a function_call output item as the Responses API
// returns it, decoded by the SDK.
func responsesCall(t testing.TB, id, name string, args json.RawMessage) responses.ResponseFunctionToolCall {
	raw, _ := json.Marshal(map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": name, "arguments": string(args), "status": "completed"})
	var item responses.ResponseOutputItemUnion
	if err := json.Unmarshal(raw, &item); err != nil {
		t.Fatal(err)
	}
	return item.AsFunctionCall()
}

// chatAnswer reads what the model will be sent: the tool message's JSON.
func chatAnswer(msg openai.ChatCompletionMessageParamUnion) (toolCallID, content string, err error) {
	raw, err := json.Marshal(msg)
	if err != nil {
		return "", "", err
	}
	var m struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", "", err
	}
	if m.Role != "tool" {
		return "", "", fmt.Errorf("answer %s is not a tool message", raw)
	}
	return m.ToolCallID, m.Content, nil
}

func responsesAnswer(item responses.ResponseInputItemUnionParam) (callID, output string, err error) {
	raw, err := json.Marshal(item)
	if err != nil {
		return "", "", err
	}
	var m struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", "", err
	}
	if m.Type != "function_call_output" {
		return "", "", fmt.Errorf("answer %s is not a function_call_output", raw)
	}
	return m.CallID, m.Output, nil
}

func TestRaceChatCompletions(t *testing.T) {
	tooltest.Race(t, memoryStore, func(t *testing.T, _ tooltest.Backend) (*tooltest.Refund, tooltest.Call) {
		r := tooltest.NewRefund()
		return r, func(ctx context.Context, id string, args json.RawMessage) (tool.Status, error) {
			msg, _, err := openaitool.HandleChatToolCall(ctx, []*tool.Tool{r.Tool}, chatToolCall(t, id, "refund", args))
			if err != nil {
				return "", err
			}
			got, content, err := chatAnswer(msg)
			if err != nil {
				return "", err
			}
			if got != id {
				return "", fmt.Errorf("tool message answers %q, want %q", got, id)
			}
			return tooltest.StatusOf(content)
		}
	})
}

func TestRaceResponses(t *testing.T) {
	tooltest.Race(t, memoryStore, func(t *testing.T, _ tooltest.Backend) (*tooltest.Refund, tooltest.Call) {
		r := tooltest.NewRefund()
		return r, func(ctx context.Context, id string, args json.RawMessage) (tool.Status, error) {
			item, _, err := openaitool.HandleResponsesFunctionCall(ctx, []*tool.Tool{r.Tool}, responsesCall(t, id, "refund", args))
			if err != nil {
				return "", err
			}
			got, output, err := responsesAnswer(item)
			if err != nil {
				return "", err
			}
			if got != id {
				return "", fmt.Errorf("output answers %q, want %q", got, id)
			}
			return tooltest.StatusOf(output)
		}
	})
}

func TestDefinitions(t *testing.T) {
	r := tooltest.NewRefund()
	check, err := tool.CheckTool(r.Tool)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(openaitool.ChatTools(r.Tool, check))
	if err != nil {
		t.Fatal(err)
	}
	var chat []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
			Strict      bool           `json:"strict"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &chat); err != nil {
		t.Fatal(err)
	}
	if len(chat) != 2 || chat[0].Type != "function" || chat[0].Function.Name != "refund" || chat[0].Function.Description != "Refund an order." ||
		chat[0].Function.Parameters["type"] != "object" || chat[1].Function.Name != tool.CheckName {
		t.Fatalf("chat tools: %s", raw)
	}
	raw, err = json.Marshal(openaitool.ResponsesTools(r.Tool))
	if err != nil {
		t.Fatal(err)
	}
	var resp []map[string]any
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	props, _ := resp[0]["parameters"].(map[string]any)["properties"].(map[string]any)
	if resp[0]["type"] != "function" || resp[0]["name"] != "refund" || resp[0]["strict"] != false || props["order"] == nil {
		t.Fatalf("responses tools: %s", raw)
	}
}

// A model that calls a tool the loop does not have, or a custom tool, is
// told so in a tool message; nothing panics and nothing runs.
func TestUnknownCalls(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{})
	run, err := l.Begin(context.Background(), "conv", ledger.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tool.WithRun(context.Background(), run)
	r := tooltest.NewRefund()
	tools := []*tool.Tool{r.Tool}
	msg, out, err := openaitool.HandleChatToolCall(ctx, tools, chatToolCall(t, "call_1", "delete_account", json.RawMessage(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	id, content, err := chatAnswer(msg)
	if err != nil || id != "call_1" || out.Status != tool.StatusUnknownTool || !strings.Contains(content, "refund") {
		t.Fatalf("unknown tool: %s %s %v", id, content, err)
	}
	var custom openai.ChatCompletionMessageToolCallUnion
	if err := json.Unmarshal([]byte(`{"id":"call_2","type":"custom","custom":{"name":"refund","input":"A-1"}}`), &custom); err != nil {
		t.Fatal(err)
	}
	if _, out, err := openaitool.HandleChatToolCall(ctx, tools, custom); err != nil || out.Status != tool.StatusUnknownTool {
		t.Fatalf("custom tool call: %+v %v", out, err)
	}
	item, out, err := openaitool.HandleResponsesFunctionCall(ctx, tools, responsesCall(t, "call_3", "refund", json.RawMessage(`{"order":`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, output, _ := responsesAnswer(item); out.Status != tool.StatusInvalidArguments || !strings.Contains(output, "invalid_arguments") {
		t.Fatalf("bad arguments: %s", output)
	}
	if n := r.Executions.Load(); n != 0 {
		t.Fatalf("%d refunds", n)
	}
}

// memoryStore is the store of the shared scenarios here: the race is about
// the adapter's types, and the store conformance suite covers the stores.
func memoryStore(*testing.T) ledger.Store { return memory.New(nil) }
