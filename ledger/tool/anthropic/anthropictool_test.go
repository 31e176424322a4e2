package anthropictool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/tool"
	anthropictool "github.com/replyonce/gateway/ledger/tool/anthropic"
	"github.com/replyonce/gateway/ledger/tool/tooltest"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// toolUse is a tool_use block of an assistant message as the Messages API
// returns it, decoded by the SDK.
func toolUse(t testing.TB, id, name string, input json.RawMessage) anthropic.ToolUseBlock {
	raw, _ := json.Marshal(map[string]any{"role": "assistant", "type": "message", "id": "msg_1", "model": "claude",
		"content": []any{map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}}})
	var msg anthropic.Message
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" {
		t.Fatalf("decoded %+v", msg.Content)
	}
	return msg.Content[0].AsToolUse()
}

// answer reads the tool_result block the model will be sent.
func answer(block anthropic.ContentBlockParamUnion) (useID, text string, isError bool, err error) {
	raw, err := json.Marshal(anthropic.NewUserMessage(block))
	if err != nil {
		return "", "", false, err
	}
	var m struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
			Content   []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", "", false, err
	}
	if m.Role != "user" || len(m.Content) != 1 || m.Content[0].Type != "tool_result" || len(m.Content[0].Content) != 1 {
		return "", "", false, fmt.Errorf("answer %s is not one tool_result", raw)
	}
	c := m.Content[0]
	return c.ToolUseID, c.Content[0].Text, c.IsError, nil
}

func TestRace(t *testing.T) {
	tooltest.Race(t, memoryStore, func(t *testing.T, _ tooltest.Backend) (*tooltest.Refund, tooltest.Call) {
		r := tooltest.NewRefund()
		return r, func(ctx context.Context, id string, args json.RawMessage) (tool.Status, error) {
			block, _, err := anthropictool.HandleToolUse(ctx, []*tool.Tool{r.Tool}, toolUse(t, "toolu_"+id, "refund", args))
			if err != nil {
				return "", err
			}
			got, text, isError, err := answer(block)
			if err != nil {
				return "", err
			}
			if got != "toolu_"+id {
				return "", fmt.Errorf("tool_result answers %q", got)
			}
			st, err := tooltest.StatusOf(text)
			if err == nil && isError != (st != tool.StatusExecuted && st != tool.StatusReplayed) {
				err = fmt.Errorf("is_error %v disagrees with %s", isError, st)
			}
			return st, err
		}
	})
}

func TestDefinitions(t *testing.T) {
	r := tooltest.NewRefund()
	check, err := tool.CheckTool(r.Tool)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(anthropictool.Tools(r.Tool, check))
	if err != nil {
		t.Fatal(err)
	}
	var defs []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatal(err)
	}
	if len(defs) != 2 || defs[0].Name != "refund" || defs[0].Description != "Refund an order." || defs[0].InputSchema["type"] != "object" {
		t.Fatalf("tools: %s", raw)
	}
	props, _ := defs[0].InputSchema["properties"].(map[string]any)
	if props["order"] == nil || fmt.Sprint(defs[0].InputSchema["required"]) != "[order cents]" {
		t.Fatalf("refund schema lost its properties or required: %s", raw)
	}
	if defs[1].Name != tool.CheckName || defs[1].InputSchema["additionalProperties"] != false {
		t.Fatalf("check schema lost a keyword: %s", raw)
	}
}

func TestUnknownToolUse(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{})
	run, err := l.Begin(context.Background(), "conv", ledger.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := tooltest.NewRefund()
	block, out, err := anthropictool.HandleToolUse(tool.WithRun(context.Background(), run), []*tool.Tool{r.Tool}, toolUse(t, "toolu_1", "wire_money", json.RawMessage(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	id, text, isError, err := answer(block)
	if err != nil || id != "toolu_1" || !isError || out.Status != tool.StatusUnknownTool || !strings.Contains(text, "refund") {
		t.Fatalf("unknown tool: %s %s %v %v", id, text, isError, err)
	}
}

// memoryStore is the store of the shared scenarios here: the race is about
// the adapter's types, and the store conformance suite covers the stores.
func memoryStore(*testing.T) ledger.Store { return memory.New(nil) }
