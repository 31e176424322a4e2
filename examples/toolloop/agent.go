package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/ledger/tool"
)

// ToolCall is one call the model asks for.
type ToolCall struct {
	ID   string
	Name string
	Args string
}

// Turn is what the model says next: tool calls, or a final answer.
type Turn struct {
	Calls []ToolCall
	Final string
}

// Model picks the next turn from the transcript so far (the tool answers
// it was given).
type Model interface {
	Next(ctx context.Context, transcript []Step) (Turn, error)
}

// Step is one tool call and what the model was told.
type Step struct {
	Call    ToolCall
	Outcome tool.Outcome
}

// Script is a fake model that says its turns in order.
type Script struct {
	mu    sync.Mutex
	Turns []Turn
	said  int
}

// Next returns the next scripted turn; past the end it gives up.
func (s *Script) Next(context.Context, []Step) (Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.said == len(s.Turns) {
		return Turn{Final: "(nothing more to say)"}, nil
	}
	s.said++
	return s.Turns[s.said-1], nil
}

// Said is how many turns the model was asked for.
func (s *Script) Said() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.said
}

// Shop is the fake provider behind the tools: it counts what it did.
type Shop struct {
	mu      sync.Mutex
	Refunds []string
	Replies []string
}

type refundArgs struct {
	Order  string `json:"order"`
	Cents  int    `json:"cents"`
	Reason string `json:"reason"`
}

type replyArgs struct {
	To   string `json:"to"`
	Text string `json:"text"`
}

// Tools are the agent's guarded refund and reply, and check_already_done.
func (s *Shop) Tools() []*tool.Tool {
	refund := tool.MustGuard(tool.Definition{Name: "refund", Description: "Refund an order in full or in part.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"cents":{"type":"integer"},"reason":{"type":"string"}},"required":["order","cents"]}`)},
		// The order and amount are the action; the reason is wording.
		func(a refundArgs) (any, error) {
			if a.Order == "" || a.Cents <= 0 {
				return nil, errors.New("order and a positive cents are required")
			}
			return map[string]any{"order": a.Order, "cents": a.Cents}, nil
		},
		func(ctx context.Context, a refundArgs, c ledger.Call) (any, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.Refunds = append(s.Refunds, a.Order)
			return map[string]string{"refund_id": "re_" + strconv.Itoa(len(s.Refunds))}, nil
		})
	reply := tool.MustGuard(tool.Definition{Name: "reply", Description: "Send the customer a message.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the customer message answered"},"text":{"type":"string"}},"required":["to","text"]}`)},
		// The message answered is the action; the text is wording.
		func(a replyArgs) (any, error) {
			if a.To == "" {
				return nil, errors.New("to is required")
			}
			return map[string]string{"to": a.To}, nil
		},
		func(ctx context.Context, a replyArgs, c ledger.Call) (any, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.Replies = append(s.Replies, a.Text)
			return map[string]string{"message_id": "msg_" + strconv.Itoa(len(s.Replies))}, nil
		},
		tool.Options[replyArgs]{Summary: func(a replyArgs) string { return a.Text }, Conflict: ledger.ConflictSameIntent})
	check, err := tool.CheckTool(refund, reply)
	if err != nil {
		panic(err) // two distinct guarded tools: cannot fail
	}
	return []*tool.Tool{refund, reply, check}
}

// Agent answers the gateway's forwarded events with an LLM loop.
type Agent struct {
	Ledger   ledgerapi.Ledger
	Tools    []*tool.Tool
	NewModel func() Model // one conversation with the model per event
	MaxTurns int
}

// Result is how one event's loop ended.
type Result struct {
	Steps   []Step
	Final   string
	Stopped tool.Status // the terminal status that stopped the loop, if any
}

// Loop runs the model under run until it answers, a tool's answer is
// terminal, or MaxTurns.
func (a *Agent) Loop(ctx context.Context, run tool.Run) (Result, error) {
	ctx = tool.WithRun(ctx, run)
	model := a.NewModel()
	var res Result
	for range a.MaxTurns {
		turn, err := model.Next(ctx, res.Steps)
		if err != nil {
			return res, fmt.Errorf("model: %w", err)
		}
		if len(turn.Calls) == 0 {
			res.Final = turn.Final
			return res, nil
		}
		for _, c := range turn.Calls {
			out, err := tool.Dispatch(ctx, a.Tools, c.Name, json.RawMessage(c.Args))
			if err != nil {
				return res, err // the ledger is down: nothing decided
			}
			res.Steps = append(res.Steps, Step{Call: c, Outcome: out})
			if out.Terminal {
				res.Stopped = out.Status
				return res, nil
			}
		}
	}
	return res, nil
}

// ServeHTTP handles one forwarded event: the run comes from the gateway's
// headers, the loop runs under it, and the answer says how it ended.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scope, runID := r.Header.Get(forward.HeaderScope), r.Header.Get(forward.HeaderRunID)
	token, err := strconv.ParseUint(r.Header.Get(forward.HeaderFencingToken), 10, 64)
	if scope == "" || runID == "" || err != nil || token == 0 {
		http.Error(w, "missing or malformed Replyonce-Scope, Replyonce-Run-Id or Replyonce-Fencing-Token", http.StatusBadRequest)
		return
	}
	res, err := a.Loop(r.Context(), a.Ledger.RunRef(scope, runID, token))
	if err != nil {
		// 503 so the gateway delivers again: the ledger decided nothing.
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	steps := make([]map[string]string, 0, len(res.Steps))
	for _, s := range res.Steps {
		steps = append(steps, map[string]string{"tool": s.Call.Name, "call_id": s.Call.ID, "status": string(s.Outcome.Status)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"steps": steps, "final": res.Final, "stopped": res.Stopped})
}
