package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/ledger/tool"
	"github.com/replyonce/gateway/ledger/tool/tooltest"
	"github.com/replyonce/gateway/stores/memory"
)

// Both kinds of run work with a guarded tool as they are.
var (
	_ tool.Run = (*ledger.Run)(nil)
	_ tool.Run = (*ledgerapi.Run)(nil)
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRace(t *testing.T) {
	tooltest.Race(t, memoryStore, func(*testing.T, tooltest.Backend) (*tooltest.Refund, tooltest.Call) {
		r := tooltest.NewRefund()
		return r, func(ctx context.Context, _ string, args json.RawMessage) (tool.Status, error) {
			out, err := r.Tool.Call(ctx, args)
			if err != nil {
				return "", err
			}
			return tooltest.StatusOf(out.Text)
		}
	})
}

type replyArgs struct {
	To   string `json:"to"`
	Text string `json:"text"`
}

// replyTool answers a customer message; its identity is the message
// answered, never the text.
func replyTool(t *testing.T, sent *atomic.Int32, fail func() error) *tool.Tool {
	t.Helper()
	tl, err := tool.Guard(tool.Definition{Name: "reply", Description: "Reply to the customer."},
		func(a replyArgs) (any, error) {
			if a.To == "" {
				return nil, errors.New("to is required")
			}
			return map[string]string{"to": a.To}, nil
		},
		func(ctx context.Context, a replyArgs, c ledger.Call) (any, error) {
			if fail != nil {
				if err := fail(); err != nil {
					return nil, err
				}
			}
			sent.Add(1)
			return map[string]string{"message_id": "r_" + a.To}, nil
		},
		tool.Options[replyArgs]{Summary: func(a replyArgs) string { return a.Text }})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func newLedger(opts ledger.Options) *ledger.Ledger { return ledger.New(memory.New(nil), opts) }

func begin(t *testing.T, l *ledger.Ledger, scope string, o ledger.RunOptions) *ledger.Run {
	t.Helper()
	r, err := l.Begin(context.Background(), scope, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func call(t *testing.T, tl *tool.Tool, run tool.Run, args string) tool.Outcome {
	t.Helper()
	out, err := tl.Call(tool.WithRun(context.Background(), run), json.RawMessage(args))
	if err != nil {
		t.Fatalf("call %s: %v", args, err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(out.Text), &body); err != nil || body["status"] != string(out.Status) {
		t.Fatalf("text %q does not carry status %s", out.Text, out.Status)
	}
	return out
}

type flags struct{ isError, terminal, retryable, escalate bool }

func flagsOf(o tool.Outcome) flags { return flags{o.IsError, o.Terminal, o.Retryable, o.Escalate} }

func TestFromResultMapping(t *testing.T) {
	cases := []struct {
		res    ledger.Result
		status tool.Status
		want   flags
	}{
		{ledger.Result{Status: ledger.StatusExecuted}, tool.StatusExecuted, flags{}},
		{ledger.Result{Status: ledger.StatusReplayed}, tool.StatusReplayed, flags{}},
		{ledger.Result{Status: ledger.StatusInFlight}, tool.StatusInFlight, flags{isError: true, retryable: true}},
		{ledger.Result{Status: ledger.StatusFailed}, tool.StatusFailed, flags{isError: true, retryable: true}},
		{ledger.Result{Status: ledger.StatusAmbiguous}, tool.StatusAmbiguous, flags{isError: true, terminal: true, escalate: true}},
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.ReasonConversationChanged}, tool.StatusConversationChanged, flags{isError: true, retryable: true}},
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.ReasonBusy}, tool.StatusBusy, flags{isError: true, retryable: true}},
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.ReasonSuperseded}, tool.StatusSuperseded, flags{isError: true, terminal: true}},
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.ReasonRunCancelled}, tool.StatusRunCancelled, flags{isError: true, terminal: true}},
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.ReasonRunEnded}, tool.StatusRunEnded, flags{isError: true, terminal: true}},
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.ReasonExhausted}, tool.StatusExhausted, flags{isError: true, terminal: true, escalate: true}},
		// The loop breaker's reason (TestRateLimitedFromARealCap gets it from a real cap).
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.ReasonRateLimited}, tool.StatusRateLimited, flags{isError: true, terminal: true, escalate: true}},
		// A reason this package has never heard of stops the loop.
		{ledger.Result{Status: ledger.StatusRefused, Reason: ledger.Reason("something_new")}, tool.Status("something_new"), flags{isError: true, terminal: true, escalate: true}},
	}
	for _, c := range cases {
		o := tool.FromResult(c.res)
		if o.Status != c.status || flagsOf(o) != c.want {
			t.Errorf("%s/%s: got %s %+v, want %s %+v", c.res.Status, c.res.Reason, o.Status, flagsOf(o), c.status, c.want)
		}
	}
	if o := tool.FromResult(ledger.Result{Status: ledger.StatusReplayed, Value: json.RawMessage(`{"id":1}`)}); !strings.Contains(o.Text, "do not tell the customer again") && !strings.Contains(o.Text, "Do not tell the customer again") {
		t.Errorf("replayed text %q does not tell the model to stay quiet", o.Text)
	} else if !strings.Contains(o.Text, `"result":{"id":1}`) {
		t.Errorf("replayed text %q lacks the stored result", o.Text)
	}
}

func TestIdentityIgnoresWording(t *testing.T) {
	var sent atomic.Int32
	tl := replyTool(t, &sent, nil)
	run := begin(t, newLedger(ledger.Options{}), "conv", ledger.RunOptions{})
	if o := call(t, tl, run, `{"to":"m1","text":"Thanks!"}`); o.Status != tool.StatusExecuted {
		t.Fatalf("first reply: %s", o.Text)
	}
	o := call(t, tl, run, `{"to":"m1","text":"Thank you so much, we got it."}`)
	if o.Status != tool.StatusReplayed || o.IsError || o.Terminal {
		t.Fatalf("reworded reply: %s", o.Text)
	}
	if !strings.Contains(o.Text, `"message_id":"r_m1"`) {
		t.Fatalf("replay %q lacks the first reply's result", o.Text)
	}
	if o := call(t, tl, run, `{"to":"m2","text":"Thanks!"}`); o.Status != tool.StatusExecuted {
		t.Fatalf("reply to another message: %s", o.Text)
	}
	if n := sent.Load(); n != 2 {
		t.Fatalf("%d replies sent, want 2", n)
	}
}

func TestStaleRunIsTerminal(t *testing.T) {
	var sent atomic.Int32
	tl := replyTool(t, &sent, nil)
	l := newLedger(ledger.Options{})
	first := begin(t, l, "conv", ledger.RunOptions{RunID: "job-1"})
	begin(t, l, "conv", ledger.RunOptions{RunID: "job-1"}) // a redelivery takes the run over
	o := call(t, tl, first, `{"to":"m1"}`)
	if o.Status != tool.StatusSuperseded || !o.Terminal || o.Escalate {
		t.Fatalf("stale delivery: %s %+v", o.Text, flagsOf(o))
	}
	ended := begin(t, l, "conv2", ledger.RunOptions{})
	if err := ended.End(context.Background(), "done"); err != nil {
		t.Fatal(err)
	}
	if o := call(t, tl, ended, `{"to":"m1"}`); o.Status != tool.StatusRunEnded || !o.Terminal {
		t.Fatalf("ended run: %s", o.Text)
	}
	cancelled := begin(t, l, "conv3", ledger.RunOptions{})
	if err := l.Cancel(context.Background(), "conv3", cancelled.ID); err != nil {
		t.Fatal(err)
	}
	if o := call(t, tl, cancelled, `{"to":"m1"}`); o.Status != tool.StatusRunCancelled || !o.Terminal {
		t.Fatalf("cancelled run: %s", o.Text)
	}
	if sent.Load() != 0 {
		t.Fatalf("%d replies sent by runs that may not write", sent.Load())
	}
}

func TestConversationChangedCarriesConflictsThenProceeds(t *testing.T) {
	var sent atomic.Int32
	tl := replyTool(t, &sent, nil)
	l := newLedger(ledger.Options{})
	slow := begin(t, l, "conv", ledger.RunOptions{Mode: ledger.ModeIndependent})
	fast := begin(t, l, "conv", ledger.RunOptions{Mode: ledger.ModeIndependent})
	if o := call(t, tl, fast, `{"to":"m2","text":"Your refund is on its way"}`); o.Status != tool.StatusExecuted {
		t.Fatalf("fast run: %s", o.Text)
	}
	o := call(t, tl, slow, `{"to":"m1","text":"Let me check"}`)
	if o.Status != tool.StatusConversationChanged || !o.Retryable || o.Terminal {
		t.Fatalf("slow run: %s %+v", o.Text, flagsOf(o))
	}
	if len(o.Conflicts) != 1 || o.Conflicts[0].Summary != "Your refund is on its way" || !strings.Contains(o.Text, "Your refund is on its way") {
		t.Fatalf("conflicts %+v in %q: want the other run's reply", o.Conflicts, o.Text)
	}
	// Having been told, the model re-reads and decides to answer anyway.
	if o := call(t, tl, slow, `{"to":"m1","text":"Let me check"}`); o.Status != tool.StatusExecuted {
		t.Fatalf("after re-reading: %s", o.Text)
	}
}

func TestEffectFailures(t *testing.T) {
	l := newLedger(ledger.Options{MaxAttempts: 2})
	run := begin(t, l, "conv", ledger.RunOptions{})
	var sent atomic.Int32
	var failWith error
	tl := replyTool(t, &sent, func() error { return failWith })

	failWith = ledger.NotApplied(errors.New("provider said 400"))
	if o := call(t, tl, run, `{"to":"m1"}`); o.Status != tool.StatusFailed || !o.Retryable || o.Terminal || !strings.Contains(o.Text, "provider said 400") {
		t.Fatalf("not applied: %s %+v", o.Text, flagsOf(o))
	}
	if o := call(t, tl, run, `{"to":"m1"}`); o.Status != tool.StatusFailed {
		t.Fatalf("second not applied: %s", o.Text)
	}
	if o := call(t, tl, run, `{"to":"m1"}`); o.Status != tool.StatusExhausted || !o.Terminal || !o.Escalate {
		t.Fatalf("after max attempts: %s %+v", o.Text, flagsOf(o))
	}

	failWith = errors.New("timeout after sending")
	if o := call(t, tl, run, `{"to":"m2"}`); o.Status != tool.StatusAmbiguous || !o.Terminal || !o.Escalate {
		t.Fatalf("ambiguous: %s %+v", o.Text, flagsOf(o))
	}
	failWith = nil
	if o := call(t, tl, run, `{"to":"m2"}`); o.Status != tool.StatusAmbiguous {
		t.Fatalf("a retry of an ambiguous reply must not send: %s", o.Text)
	}
	if sent.Load() != 0 {
		t.Fatalf("%d replies sent", sent.Load())
	}
}

func TestModelMistakesAreOutcomes(t *testing.T) {
	var sent atomic.Int32
	tl := replyTool(t, &sent, nil)
	run := begin(t, newLedger(ledger.Options{}), "conv", ledger.RunOptions{})
	for _, args := range []string{`{"to":`, `{"to":42}`, `{"text":"no recipient"}`} {
		if o := call(t, tl, run, args); o.Status != tool.StatusInvalidArguments || !o.Retryable || o.Terminal {
			t.Errorf("%s: %s", args, o.Text)
		}
	}
	out, err := tl.Call(context.Background(), json.RawMessage(`{"to":"m1"}`))
	if err != nil || out.Status != tool.StatusNoRun || !out.Terminal {
		t.Errorf("no run in context: %s, %v", out.Text, err)
	}
	out, err = tool.Dispatch(tool.WithRun(context.Background(), run), []*tool.Tool{tl}, "refnud", json.RawMessage(`{}`))
	if err != nil || out.Status != tool.StatusUnknownTool || !strings.Contains(out.Text, "reply") {
		t.Errorf("unknown tool: %s, %v", out.Text, err)
	}
	out, err = tool.Dispatch(tool.WithRun(context.Background(), run), []*tool.Tool{tl}, "reply", json.RawMessage(`{"to":"m1"}`))
	if err != nil || out.Status != tool.StatusExecuted {
		t.Errorf("dispatch to reply: %s, %v", out.Text, err)
	}
	if sent.Load() != 1 {
		t.Fatalf("%d replies sent, want only the dispatched one", sent.Load())
	}
}

func TestOutageIsAnError(t *testing.T) {
	l := newLedger(ledger.Options{})
	srv := httptest.NewServer(ledgerapi.NewHandler(l, "", nil))
	client, err := ledgerapi.NewClient(srv.URL, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	run, err := client.Begin(context.Background(), "conv", ledger.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var sent atomic.Int32
	out, err := replyTool(t, &sent, nil).Call(tool.WithRun(context.Background(), run), json.RawMessage(`{"to":"m1"}`))
	if !errors.Is(err, ledgerapi.ErrUnavailable) {
		t.Fatalf("outage: got %+v, %v; want an error wrapping ErrUnavailable", out, err)
	}
	if sent.Load() != 0 {
		t.Fatal("the effect ran without a claim")
	}
	chk, err := tool.CheckTool(replyTool(t, &sent, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chk.Call(tool.WithRun(context.Background(), run), json.RawMessage(`{"tool":"reply","arguments":{"to":"m1"}}`)); !errors.Is(err, ledgerapi.ErrUnavailable) {
		t.Fatalf("check during outage: %v", err)
	}
}

func TestCheckAlreadyDone(t *testing.T) {
	var sent atomic.Int32
	reply := replyTool(t, &sent, nil)
	chk, err := tool.CheckTool(reply)
	if err != nil {
		t.Fatal(err)
	}
	if !chk.ReadOnly() || reply.ReadOnly() || chk.Definition().Name != tool.CheckName {
		t.Fatalf("check tool: %+v", chk.Definition())
	}
	if !strings.Contains(string(chk.Definition().Parameters), `"enum":["reply"]`) {
		t.Fatalf("check schema %s does not list the guarded tools", chk.Definition().Parameters)
	}
	l := newLedger(ledger.Options{})
	run := begin(t, l, "conv", ledger.RunOptions{})
	tools := []*tool.Tool{reply, chk}
	ask := func(args string) tool.Outcome {
		t.Helper()
		out, err := tool.Dispatch(tool.WithRun(context.Background(), run), tools, tool.CheckName, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if o := ask(`{"tool":"reply","arguments":{"to":"m1","text":"hi"}}`); o.Status != tool.StatusNotDone || o.IsError {
		t.Fatalf("before: %s", o.Text)
	}
	hist, err := l.Views().History(context.Background(), "conv")
	if err != nil || len(hist) != 0 {
		t.Fatalf("check wrote to the ledger: %v, %v", hist, err)
	}
	call(t, reply, run, `{"to":"m1","text":"hi"}`)
	o := ask(`{"tool":"reply","arguments":{"to":"m1","text":"a different wording"}}`)
	if o.Status != tool.StatusDone || !strings.Contains(o.Text, "r_m1") {
		t.Fatalf("after: %s", o.Text)
	}
	if o := ask(`{"tool":"refund","arguments":{}}`); o.Status != tool.StatusInvalidArguments {
		t.Fatalf("check of an unknown tool: %s", o.Text)
	}
	if sent.Load() != 1 {
		t.Fatalf("%d replies, want 1", sent.Load())
	}
}

func TestDefinitionValidation(t *testing.T) {
	id := func(replyArgs) (any, error) { return "x", nil }
	eff := func(context.Context, replyArgs, ledger.Call) (any, error) { return nil, nil }
	for _, d := range []tool.Definition{
		{Name: ""},
		{Name: "has space"},
		{Name: "ok", Parameters: json.RawMessage(`[1]`)},
		{Name: "ok", Parameters: json.RawMessage(`{"type":"string"}`)},
	} {
		if _, err := tool.Guard(d, id, eff); err == nil {
			t.Errorf("%+v was accepted", d)
		}
	}
	tl, err := tool.Guard(tool.Definition{Name: "send_reply"}, id, eff)
	if err != nil {
		t.Fatal(err)
	}
	if d := tl.Definition(); d.Intent != "send_reply" || !json.Valid(d.Parameters) {
		t.Fatalf("defaults: %+v", d)
	}
	if _, err := tool.CheckTool(); err == nil {
		t.Fatal("a check tool with nothing to check was accepted")
	}
	if _, err := tool.CheckTool(tl, tl); err == nil {
		t.Fatal("a check tool with a duplicate was accepted")
	}
}

// memoryStore is the store of the shared scenarios here: the race is about
// the guard, and the store conformance suite covers the other adapters.
func memoryStore(*testing.T) ledger.Store { return memory.New(nil) }
