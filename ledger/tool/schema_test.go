package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/ledger/tool"
)

type refundArgs struct {
	Order  string `json:"order"`
	Cents  int    `json:"cents"`
	Reason string `json:"reason"`
}

const refundSchema = `{"type":"object","properties":{
	"order":{"type":"string","minLength":1},
	"cents":{"type":"integer","minimum":1},
	"reason":{"type":"string"},
	"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}},"required":["sku"]}}},
	"required":["order","cents"],"additionalProperties":false}`

// refundByOrder is a refund whose identity is the order alone, declared
// by Definition.Identity: one refund per order, whatever the amount.
func refundByOrder(t *testing.T, done *atomic.Int32) *tool.Tool {
	t.Helper()
	tl, err := tool.Guard(tool.Definition{Name: "refund", Parameters: json.RawMessage(refundSchema), Identity: []string{"order"}},
		nil, func(ctx context.Context, a refundArgs, c ledger.Call) (any, error) {
			done.Add(1)
			return map[string]any{"refund_id": "re_" + a.Order, "cents": a.Cents}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// downRun is a run behind a ledger API that no longer answers: any call
// that reaches the ledger is an outage (an error), so an outcome proves
// the ledger was not asked.
func downRun(t *testing.T) tool.Run {
	t.Helper()
	srv := httptest.NewServer(ledgerapi.NewHandler(newLedger(ledger.Options{}), "", nil))
	client, err := ledgerapi.NewClient(srv.URL, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	run, err := client.Begin(context.Background(), "conv", ledger.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	return run
}

// Arguments that do not fit the tool's schema are an invalid_arguments
// outcome naming the field and what is wrong with it, retryable, and the
// ledger is not asked (the run's ledger is down: asking it would be an
// error).
func TestArgumentsAreCheckedAgainstTheSchema(t *testing.T) {
	var done atomic.Int32
	tl := refundByOrder(t, &done)
	run := downRun(t)
	for _, c := range []struct{ args, want string }{
		{`{"order":"A-1","cents":"ten"}`, `argument "cents" must be integer, not string`},
		{`{"order":"A-1"}`, `argument "cents" is required`},
		{`{"order":"A-1","cents":0}`, `argument "cents": minimum: got 0, want 1`},
		{`{"order":"A-1","cents":5,"amount":5}`, `argument "amount" is not one this tool takes`},
		{`{"order":"A-1","cents":5,"lines":[{"sku":"s"},{"qty":1}]}`, `argument "lines.1.sku" is required`},
		{`{"order":"A-1","cents":5,"lines":[{"sku":7}]}`, `argument "lines.0.sku" must be string, not number`},
		{`["A-1",5]`, `argument "arguments" must be object, not array`},
		{`{"order":`, `not valid JSON`},
	} {
		out, err := tl.Call(tool.WithRun(context.Background(), run), json.RawMessage(c.args))
		if err != nil {
			t.Errorf("%s: the ledger was asked (%v)", c.args, err)
			continue
		}
		if out.Status != tool.StatusInvalidArguments || !out.Retryable || out.Terminal || !out.IsError {
			t.Errorf("%s: %s %+v, want a retryable invalid_arguments", c.args, out.Status, flagsOf(out))
		}
		var body struct{ Message string }
		if err := json.Unmarshal([]byte(out.Text), &body); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body.Message, c.want) || !strings.Contains(body.Message, "fix the arguments") {
			t.Errorf("%s: message %q, want it to say %q", c.args, body.Message, c.want)
		}
		if strings.Contains(body.Message, "json:") || strings.Contains(body.Message, "Go value") {
			t.Errorf("%s: message %q carries a Go decoding error", c.args, body.Message)
		}
	}
	if n := done.Load(); n != 0 {
		t.Fatalf("%d refunds from arguments that do not fit", n)
	}
}

// check_already_done asks for the identity fields alone: about a refund
// whose identity is the order, {order} is a full question, before and
// after the refund, whatever the other arguments' rules (cents is
// required and at least 1 for the refund itself). Other arguments given
// are ignored; a missing or mistyped identity field is named.
func TestCheckTakesTheIdentityOnly(t *testing.T) {
	var done atomic.Int32
	refund := refundByOrder(t, &done)
	chk, err := tool.CheckTool(refund)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chk.Definition().Parameters), "refund: order") {
		t.Errorf("check schema %s does not tell the model what names a refund", chk.Definition().Parameters)
	}
	run := begin(t, newLedger(ledger.Options{}), "conv", ledger.RunOptions{})
	tools := []*tool.Tool{refund, chk}
	ask := func(args string) tool.Outcome {
		t.Helper()
		out, err := tool.Dispatch(tool.WithRun(context.Background(), run), tools, tool.CheckName, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if o := ask(`{"tool":"refund","arguments":{"order":"A-1"}}`); o.Status != tool.StatusNotDone {
		t.Fatalf("{order} alone before the refund: %s", o.Text)
	}
	if o := call(t, refund, run, `{"order":"A-1","cents":2500,"reason":"asked"}`); o.Status != tool.StatusExecuted {
		t.Fatalf("refund: %s", o.Text)
	}
	for _, args := range []string{
		`{"tool":"refund","arguments":{"order":"A-1"}}`,
		`{"tool":"refund","arguments":{"order":"A-1","cents":0,"reason":"other words"}}`,
	} {
		if o := ask(args); o.Status != tool.StatusDone || !strings.Contains(o.Text, "re_A-1") {
			t.Errorf("%s after the refund: %s, want done with its result", args, o.Text)
		}
	}
	// A refund of the same order for another amount is the same action.
	if o := call(t, refund, run, `{"order":"A-1","cents":100}`); o.Status != tool.StatusReplayed {
		t.Errorf("second refund of A-1: %s, want replayed", o.Text)
	}
	for _, c := range []struct{ args, want string }{
		{`{"tool":"refund","arguments":{"cents":5}}`, `argument \"arguments.order\" is required`},
		{`{"tool":"refund","arguments":{"order":12}}`, `argument \"arguments.order\" must be string, not number`},
		{`{"tool":"refund"}`, `argument \"arguments\" is required`},
		{`{"tool":"refnud","arguments":{}}`, `argument \"tool\"`},
	} {
		if o := ask(c.args); o.Status != tool.StatusInvalidArguments || !strings.Contains(o.Text, c.want) {
			t.Errorf("%s: %s, want invalid_arguments naming %s", c.args, o.Text, c.want)
		}
	}
	if n := done.Load(); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

// A tool whose identity is a function gets the check with nothing
// required: the model gives what it would call the tool with, and a field
// it gives is still type-checked.
func TestCheckWithAnIdentityFunction(t *testing.T) {
	var done atomic.Int32
	tl, err := tool.Guard(tool.Definition{Name: "reply", Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"text":{"type":"string","minLength":1}},"required":["to","text"]}`)},
		func(a replyArgs) (any, error) {
			if a.To == "" {
				return nil, errors.New("to is required")
			}
			return map[string]string{"to": a.To}, nil
		},
		func(ctx context.Context, a replyArgs, c ledger.Call) (any, error) { done.Add(1); return "sent", nil })
	if err != nil {
		t.Fatal(err)
	}
	chk, err := tool.CheckTool(tl)
	if err != nil {
		t.Fatal(err)
	}
	run := begin(t, newLedger(ledger.Options{}), "conv", ledger.RunOptions{})
	ask := func(args string) tool.Outcome {
		t.Helper()
		out, err := chk.Call(tool.WithRun(context.Background(), run), json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if o := ask(`{"tool":"reply","arguments":{"to":"m1"}}`); o.Status != tool.StatusNotDone {
		t.Fatalf("without text: %s", o.Text)
	}
	if o := ask(`{"tool":"reply","arguments":{"to":1}}`); o.Status != tool.StatusInvalidArguments || !strings.Contains(o.Text, `argument \"arguments.to\" must be string`) {
		t.Fatalf("mistyped to: %s", o.Text)
	}
}

func TestIdentityDefinitionValidation(t *testing.T) {
	eff := func(context.Context, refundArgs, ledger.Call) (any, error) { return nil, nil }
	id := func(refundArgs) (any, error) { return "x", nil }
	schema := json.RawMessage(refundSchema)
	for _, c := range []struct {
		def  tool.Definition
		id   func(refundArgs) (any, error)
		want string
	}{
		{tool.Definition{Name: "r", Parameters: schema, Identity: []string{"amount"}}, nil, `"amount" is not a property`},
		{tool.Definition{Name: "r", Parameters: schema, Identity: []string{"order", "order"}}, nil, "twice"},
		{tool.Definition{Name: "r", Parameters: schema, Identity: []string{"order"}}, id, "not both"},
		{tool.Definition{Name: "r", Parameters: schema}, nil, "identity is required"},
		{tool.Definition{Name: "r", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"strin"}}}`)}, id, "not a valid JSON Schema"},
		{tool.Definition{Name: "r", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`)}, id, "self-contained"},
	} {
		_, err := tool.Guard(c.def, c.id, eff)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.def, err, c.want)
		}
	}
}

// Every outcome that stops the loop says so in its text, since a generic
// host sees only the text; none that invites a retry tells the model not
// to repeat it.
func TestTheTextSaysWhenToStop(t *testing.T) {
	var outs []tool.Outcome
	for _, st := range []ledger.Status{ledger.StatusExecuted, ledger.StatusReplayed, ledger.StatusInFlight, ledger.StatusFailed, ledger.StatusAmbiguous, "new"} {
		outs = append(outs, tool.FromResult(ledger.Result{Status: st, Err: errors.New("boom")}))
	}
	for _, r := range []ledger.Reason{ledger.ReasonConversationChanged, ledger.ReasonBusy, ledger.ReasonSuperseded, ledger.ReasonRunCancelled,
		ledger.ReasonRunEnded, ledger.ReasonExhausted, ledger.ReasonRateLimited, "new"} {
		outs = append(outs, tool.FromResult(ledger.Result{Status: ledger.StatusRefused, Reason: r}))
	}
	outs = append(outs, tool.InvalidRun(errors.New("header Replyonce-Run-Id is missing")))
	noRun, err := refundByOrder(t, new(atomic.Int32)).Call(context.Background(), json.RawMessage(`{"order":"A","cents":1}`))
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, noRun)
	for _, o := range outs {
		var body struct{ Message string }
		if err := json.Unmarshal([]byte(o.Text), &body); err != nil {
			t.Fatal(err)
		}
		if says := strings.Contains(body.Message, "Stop"); says != o.Terminal {
			t.Errorf("%s (terminal %v): %q says stop: %v", o.Status, o.Terminal, body.Message, says)
		}
		if lower := strings.ToLower(body.Message); o.Retryable && (strings.Contains(lower, "do not repeat") || strings.Contains(lower, "do not try again")) {
			t.Errorf("%s is retryable but says %q", o.Status, body.Message)
		}
	}
}
