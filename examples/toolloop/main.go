package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

func main() {
	l := ledgerapi.InProcess(ledger.New(memory.New(nil), ledger.Options{}))
	if _, err := runDemo(context.Background(), l, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "toolloop:", err)
		os.Exit(1)
	}
}

// answer is the agent's JSON answer to one forwarded event.
type answer struct {
	Steps []struct {
		Tool   string `json:"tool"`
		CallID string `json:"call_id"`
		Status string `json:"status"`
	} `json:"steps"`
	Final   string `json:"final"`
	Stopped string `json:"stopped"`
}

// report is what the demo saw, for its test.
type report struct {
	First, Stale, Fresh answer
	StaleTurns          int // model turns the stale delivery's loop asked for
	Shop                *Shop
}

// deliver plays the gateway: it forwards an event to the agent with the
// run the gateway began.
func deliver(agent http.Handler, run ledgerapi.RunHandle, scope, runID string, token uint64) (answer, error) {
	req := httptest.NewRequest(http.MethodPost, "/events", nil)
	req.Header.Set(forward.HeaderScope, scope)
	req.Header.Set(forward.HeaderRunID, runID)
	req.Header.Set(forward.HeaderFencingToken, strconv.FormatUint(token, 10))
	rec := httptest.NewRecorder()
	agent.ServeHTTP(rec, req)
	var a answer
	if rec.Code != http.StatusOK {
		return a, fmt.Errorf("agent answered %d: %s", rec.Code, rec.Body)
	}
	return a, json.Unmarshal(rec.Body.Bytes(), &a)
}

func tokenOf(r ledgerapi.RunHandle) uint64 {
	switch x := r.(type) {
	case *ledger.Run:
		return x.Token
	case *ledgerapi.Run:
		return x.Token
	}
	return 0
}

// runDemo drives two customer messages through the agent on l.
func runDemo(ctx context.Context, l ledgerapi.Ledger, w io.Writer) (report, error) {
	shop := &Shop{}
	scripts := []*Script{
		// Message m1: the model refunds, retries the refund because its
		// first call "timed out" (new call id, new wording), then replies.
		{Turns: []Turn{
			{Calls: []ToolCall{{ID: "call_1", Name: "refund", Args: `{"order":"A-1001","cents":2500,"reason":"damaged on arrival"}`}}},
			{Calls: []ToolCall{{ID: "call_2", Name: "refund", Args: `{"order":"A-1001","cents":2500,"reason":"retrying: the first refund call timed out"}`}}},
			{Calls: []ToolCall{{ID: "call_3", Name: "reply", Args: `{"to":"m1","text":"We refunded 25.00 for order A-1001."}`}}},
			{Final: "Refunded and told the customer once."},
		}},
		// Message m2, first delivery: slow, so the gateway delivered it
		// again meanwhile. Its reply must be refused.
		{Turns: []Turn{
			{Calls: []ToolCall{{ID: "call_4", Name: "reply", Args: `{"to":"m2","text":"Let me look into that."}`}}},
			{Calls: []ToolCall{{ID: "call_5", Name: "refund", Args: `{"order":"A-1002","cents":900}`}}},
		}},
		// Message m2, second delivery: the one that may answer.
		{Turns: []Turn{
			{Calls: []ToolCall{{ID: "call_6", Name: "reply", Args: `{"to":"m2","text":"Your parcel ships tomorrow."}`}}},
			{Final: "Answered."},
		}},
	}
	next := 0
	agent := &Agent{Ledger: l, Tools: shop.Tools(), MaxTurns: 8, NewModel: func() Model { next++; return scripts[next-1] }}
	rep := report{Shop: shop}
	begin := func(runID string) (ledgerapi.RunHandle, error) {
		return l.Begin(ctx, "conv_42", ledger.RunOptions{RunID: runID})
	}

	run, err := begin("chat:evt_m1")
	if err != nil {
		return rep, err
	}
	if rep.First, err = deliver(agent, run, "conv_42", "chat:evt_m1", tokenOf(run)); err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "m1: %s\n", describe(rep.First))

	stale, err := begin("chat:evt_m2")
	if err != nil {
		return rep, err
	}
	fresh, err := begin("chat:evt_m2") // the gateway's redelivery takes the run over
	if err != nil {
		return rep, err
	}
	if rep.Stale, err = deliver(agent, stale, "conv_42", "chat:evt_m2", tokenOf(stale)); err != nil {
		return rep, err
	}
	rep.StaleTurns = scripts[1].Said()
	fmt.Fprintf(w, "m2, stale delivery: %s\n", describe(rep.Stale))
	if rep.Fresh, err = deliver(agent, fresh, "conv_42", "chat:evt_m2", tokenOf(fresh)); err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "m2, redelivery: %s\n", describe(rep.Fresh))
	fmt.Fprintf(w, "refunds issued: %d, replies sent: %d %q\n", len(shop.Refunds), len(shop.Replies), shop.Replies)
	return rep, nil
}

func describe(a answer) string {
	s := ""
	for _, st := range a.Steps {
		s += fmt.Sprintf("%s(%s)=%s ", st.Tool, st.CallID, st.Status)
	}
	if a.Stopped != "" {
		return s + "-> loop stopped: " + a.Stopped
	}
	return s + "-> " + a.Final
}
