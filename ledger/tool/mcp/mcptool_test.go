package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/ledger/tool"
	mcptool "github.com/replyonce/gateway/ledger/tool/mcp"
	"github.com/replyonce/gateway/ledger/tool/tooltest"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connect serves tools on an MCP server over the SDK's in-memory
// transport and returns a connected client session.
func connect(t *testing.T, runRef mcptool.RunRef, tools ...*tool.Tool) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0.0.1"}, nil)
	mcptool.AddTools(srv, runRef, tools...)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d contents", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T", res.Content[0])
	}
	return tc.Text
}

// The seed's race through MCP: each call names the run in _meta, as a
// client on a transport without headers does.
func TestRace(t *testing.T) {
	tooltest.Race(t, memoryStore, func(t *testing.T, b tooltest.Backend) (*tooltest.Refund, tooltest.Call) {
		refund := tooltest.NewRefund()
		cs := connect(t, b.Ref, refund.Tool)
		return refund, func(ctx context.Context, _ string, args json.RawMessage) (tool.Status, error) {
			run, _ := tool.RunFrom(ctx)
			scope, id, token := tooltest.RefOf(run)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args, Meta: mcp.Meta{
				mcptool.HeaderScope: scope, mcptool.HeaderRunID: id, mcptool.HeaderFencingToken: strconv.FormatUint(token, 10)}})
			if err != nil {
				return "", err
			}
			var tc *mcp.TextContent
			if len(res.Content) == 1 {
				tc, _ = res.Content[0].(*mcp.TextContent)
			}
			if tc == nil {
				return "", errors.New("no text content")
			}
			st, err := tooltest.StatusOf(tc.Text)
			if err == nil && res.IsError != (st != tool.StatusExecuted && st != tool.StatusReplayed) {
				err = errors.New("isError disagrees with " + string(st))
			}
			return st, err
		}
	})
}

// headers adds the gateway's forwarded run to every request, as an agent
// that got them from the gateway passes them on to its MCP server.
type headers struct {
	h    http.Header
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

// A client that times out waiting for a refund retries it. Over the SDK's
// streamable HTTP transport, with the run in the request headers: the
// refund runs once, the retry during the first attempt is told it is in
// progress, and the retry after it is told it was already done, with the
// refund's result.
func TestRetryAfterTimeoutOverStreamableHTTP(t *testing.T) {
	committed := make(chan struct{}, 1)
	l := ledger.New(memory.New(nil), ledger.Options{Observe: func(ev ledger.Event) {
		if ev.Type == "committed" {
			committed <- struct{}{}
		}
	}})
	ctx := context.Background()
	run, err := l.Begin(ctx, "order-A-1001", ledger.RunOptions{RunID: "support:evt_1"})
	if err != nil {
		t.Fatal(err)
	}
	refund := tooltest.NewRefund()
	check, err := tool.CheckTool(refund.Tool)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0.0.1"}, nil)
	mcptool.AddTools(srv, func(scope, id string, token uint64) tool.Run { return l.RunRef(scope, id, token) }, refund.Tool, check)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	hc := &http.Client{Transport: headers{next: http.DefaultTransport, h: http.Header{
		mcptool.HeaderScope:        {run.Scope},
		mcptool.HeaderRunID:        {run.ID},
		mcptool.HeaderFencingToken: {strconv.FormatUint(run.Token, 10)},
	}}}
	defer hc.CloseIdleConnections()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.Annotations == nil || !tl.Annotations.IdempotentHint || tl.Annotations.ReadOnlyHint != (tl.Name == tool.CheckName) {
			t.Errorf("tool %s annotations %+v: want idempotent, read-only only for %s", tl.Name, tl.Annotations, tool.CheckName)
		}
	}
	if len(list.Tools) != 2 {
		t.Fatalf("listed %d tools, want refund and %s", len(list.Tools), tool.CheckName)
	}

	args := map[string]any{"order": "A-1001", "cents": 2500, "reason": "the customer asked"}
	started, release := refund.Hold()
	defer release()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = cs.CallTool(short, &mcp.CallToolParams{Name: "refund", Arguments: args})
	cancel()
	if err == nil {
		t.Fatal("the first call answered while its refund was held")
	}
	<-started

	args["reason"] = "retrying: the first call timed out"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := tooltest.StatusOf(text(t, res)); st != tool.StatusInFlight || !res.IsError {
		t.Fatalf("retry during the first attempt: %s (isError %v), want in_flight", text(t, res), res.IsError)
	}

	release()
	select {
	case <-committed:
	case <-time.After(20 * time.Second):
		t.Fatal("the first attempt never recorded its refund: the client's timeout must not cancel it")
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	body := text(t, res)
	if st, _ := tooltest.StatusOf(body); st != tool.StatusReplayed || res.IsError || !strings.Contains(body, "re_A-1001") {
		t.Fatalf("retry after the first attempt: %s, want replayed with the refund id", body)
	}
	if meta, _ := res.Meta["replyonce"].(map[string]any); meta["status"] != "replayed" || meta["terminal"] != false {
		t.Fatalf("result _meta %v", res.Meta)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.CheckName, Arguments: map[string]any{"tool": "refund", "arguments": args}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := tooltest.StatusOf(text(t, res)); st != tool.StatusDone {
		t.Fatalf("check_already_done: %s", text(t, res))
	}
	if n := refund.Executions.Load(); n != 1 {
		t.Fatalf("the refund ran %d times, want once", n)
	}
}

func TestRunNaming(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{})
	ctx := context.Background()
	run, err := l.Begin(ctx, "conv", ledger.RunOptions{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	refund := tooltest.NewRefund()
	cs := connect(t, func(scope, id string, token uint64) tool.Run { return l.RunRef(scope, id, token) }, refund.Tool)
	args := map[string]any{"order": "A-1", "cents": 100}
	cases := []struct {
		meta mcp.Meta
		want string
	}{
		{nil, string(tool.StatusNoRun)},
		{mcp.Meta{mcptool.HeaderScope: "conv", mcptool.HeaderRunID: "r1", mcptool.HeaderFencingToken: "x"}, mcptool.HeaderFencingToken},
		{mcp.Meta{mcptool.HeaderScope: "conv", mcptool.HeaderFencingToken: "7"}, mcptool.HeaderRunID},
		{mcp.Meta{mcptool.HeaderScope: "conv", mcptool.HeaderRunID: "r1", mcptool.HeaderFencingToken: true}, mcptool.HeaderFencingToken},
		// A token older than the run's is stale and refused.
		{mcp.Meta{mcptool.HeaderScope: "conv", mcptool.HeaderRunID: "r1", mcptool.HeaderFencingToken: strconv.FormatUint(run.Token-1, 10)}, string(tool.StatusSuperseded)},
	}
	for _, c := range cases {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args, Meta: c.meta})
		if err != nil {
			t.Fatal(err)
		}
		if body := text(t, res); !res.IsError || !strings.Contains(body, c.want) {
			t.Errorf("_meta %v: %s (isError %v), want an error naming %s", c.meta, body, res.IsError, c.want)
		}
	}
	// A JSON number is accepted as a token too.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args, Meta: mcp.Meta{
		"replyonce-scope": "conv", "replyonce-run-id": "r1", "replyonce-fencing-token": run.Token}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := tooltest.StatusOf(text(t, res)); st != tool.StatusExecuted {
		t.Fatalf("numeric token: %s", text(t, res))
	}
	if n := refund.Executions.Load(); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

// Over streamable HTTP the gateway's headers name the run, and they come
// before _meta: a call whose _meta names another run writes under the
// headers' run. A malformed header is an error for the model naming it,
// and nothing runs.
func TestHeadersComeBeforeMeta(t *testing.T) {
	ctx := context.Background()
	l := ledger.New(memory.New(nil), ledger.Options{})
	run, err := l.Begin(ctx, "conv-h", ledger.RunOptions{RunID: "from-headers"})
	if err != nil {
		t.Fatal(err)
	}
	refund := tooltest.NewRefund()
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0.0.1"}, nil)
	mcptool.AddTools(srv, func(scope, id string, token uint64) tool.Run { return l.RunRef(scope, id, token) }, refund.Tool)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close) // after the sessions' own cleanups, which end them on the server
	session := func(token string) *mcp.ClientSession {
		hc := &http.Client{Transport: headers{next: http.DefaultTransport, h: http.Header{
			mcptool.HeaderScope: {run.Scope}, mcptool.HeaderRunID: {run.ID}, mcptool.HeaderFencingToken: {token}}}}
		t.Cleanup(hc.CloseIdleConnections)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	args := map[string]any{"order": "A-7", "cents": 700}

	bad := session("not-a-token")
	res, err := bad.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	if err != nil {
		t.Fatalf("malformed header token: a protocol error (%v), want a tool result", err)
	}
	body := text(t, res)
	if st, _ := tooltest.StatusOf(body); !res.IsError || st != tool.StatusInvalidRun || !strings.Contains(body, "header "+mcptool.HeaderFencingToken) || !strings.Contains(body, "Stop here") {
		t.Fatalf("malformed header token: %s (isError %v), want invalid_run naming the header and telling the model to stop", body, res.IsError)
	}
	if f := flags(t, res); f["status"] != string(tool.StatusInvalidRun) || f["terminal"] != true || f["escalate"] != true || f["retryable"] != false {
		t.Fatalf("malformed header token: flags %v, want invalid_run, terminal and escalated", f)
	}

	good := session(strconv.FormatUint(run.Token, 10))
	res, err = good.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args, Meta: mcp.Meta{
		mcptool.HeaderScope: "conv-h", mcptool.HeaderRunID: "from-meta", mcptool.HeaderFencingToken: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := tooltest.StatusOf(text(t, res)); st != tool.StatusExecuted {
		t.Fatalf("call with headers and a different _meta: %s, want executed under the headers' run", text(t, res))
	}
	hist, err := l.Views().History(ctx, "conv-h")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].RunID != "from-headers" || refund.Executions.Load() != 1 {
		t.Fatalf("history %+v, %d executions; want one refund under run from-headers", hist, refund.Executions.Load())
	}
}

// flags reads the result's _meta "replyonce" flags.
func flags(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.Meta["replyonce"].(map[string]any)
	if !ok {
		t.Fatalf("result has no _meta replyonce: %v", res.Meta)
	}
	return m
}

// A run named wrongly, in _meta or in the headers, is a tool result in the
// one shape every answer has: the JSON text with its status, the flags in
// _meta, and words telling the model to stop, since it cannot fix it.
func TestMalformedRunIsAResultThatStops(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{})
	refund := tooltest.NewRefund()
	cs := connect(t, func(scope, id string, token uint64) tool.Run { return l.RunRef(scope, id, token) }, refund.Tool)
	for _, meta := range []mcp.Meta{
		{mcptool.HeaderScope: "conv", mcptool.HeaderRunID: "r1", mcptool.HeaderFencingToken: "not-a-number"},
		{mcptool.HeaderScope: "conv", mcptool.HeaderFencingToken: "3"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order": "A-1", "cents": 100}, Meta: meta})
		if err != nil {
			t.Fatalf("_meta %v: a protocol error (%v), want a tool result", meta, err)
		}
		body := text(t, res)
		var out struct{ Status, Message string }
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("_meta %v: text %q is not the outcome's JSON: %v", meta, body, err)
		}
		f := flags(t, res)
		if !res.IsError || out.Status != string(tool.StatusInvalidRun) || f["status"] != out.Status || f["terminal"] != true || f["escalate"] != true || f["retryable"] != false {
			t.Errorf("_meta %v: %s isError=%v flags=%v, want invalid_run, terminal and escalated", meta, body, res.IsError, f)
		}
		if !strings.Contains(out.Message, "Stop here") || !strings.Contains(out.Message, "Replyonce-") {
			t.Errorf("_meta %v: message %q must name what is wrong and tell the model to stop", meta, out.Message)
		}
	}
	if n := refund.Executions.Load(); n != 0 {
		t.Fatalf("%d refunds under a malformed run", n)
	}
}

// A ledger that cannot be reached is the JSON-RPC internal error -32603
// with a short message, never the ledger's address or the dial error; the
// details go to the server's log.
func TestOutageIsAnInternalError(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	adminURL := down.URL
	down.Close() // nothing listens there now
	api, err := ledgerapi.NewClient(adminURL, "token", &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	refund := tooltest.NewRefund()
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0.0.1"}, nil)
	mcptool.AddToolsWith(srv, func(scope, id string, token uint64) tool.Run { return api.RunRef(scope, id, token) },
		mcptool.Options{Logger: logger}, refund.Tool)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close(); _ = ss.Wait() }()

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order": "A-1", "cents": 100},
		Meta: mcp.Meta{mcptool.HeaderScope: "conv", mcptool.HeaderRunID: "r1", mcptool.HeaderFencingToken: "1"}})
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) {
		t.Fatalf("outage: %v (%T), want a JSON-RPC error", err, err)
	}
	if rpc.Code != jsonrpc.CodeInternalError || rpc.Message != mcptool.OutageMessage {
		t.Fatalf("outage: code %d %q, want -32603 %q", rpc.Code, rpc.Message, mcptool.OutageMessage)
	}
	host := strings.TrimPrefix(adminURL, "http://")
	if strings.Contains(err.Error(), host) {
		t.Errorf("the client was told the ledger's address: %v", err)
	}
	if !strings.Contains(logs.String(), host) || !strings.Contains(logs.String(), "tool=refund") {
		t.Errorf("the server log lacks the outage's details:\n%s", logs.String())
	}
	if n := refund.Executions.Load(); n != 0 {
		t.Fatalf("%d refunds while the ledger was down", n)
	}
}

// _meta names the run under the documented namespaced keys as well as
// under the header names; a key in the replyonce namespace that the
// adapter does not know is refused, naming it, and nothing runs, while
// other vendors' keys are ignored.
func TestMetaNamespacedKeys(t *testing.T) {
	ctx := context.Background()
	l := ledger.New(memory.New(nil), ledger.Options{})
	run, err := l.Begin(ctx, "conv-ns", ledger.RunOptions{RunID: "r-ns"})
	if err != nil {
		t.Fatal(err)
	}
	refund := tooltest.NewRefund()
	cs := connect(t, func(scope, id string, token uint64) tool.Run { return l.RunRef(scope, id, token) }, refund.Tool)
	tok := strconv.FormatUint(run.Token, 10)
	call := func(order string, meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order": order, "cents": 100}, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call("A-ns", mcp.Meta{mcptool.MetaScope: "conv-ns", mcptool.MetaRunID: "r-ns", mcptool.MetaFencingToken: tok, "com.example/trace": "x"})
	if st, _ := tooltest.StatusOf(text(t, res)); st != tool.StatusExecuted {
		t.Fatalf("namespaced keys: %s, want executed", text(t, res))
	}
	for _, c := range []struct {
		meta mcp.Meta
		want string
	}{
		{mcp.Meta{"replyonce/scop": "conv-ns", mcptool.MetaRunID: "r-ns", mcptool.MetaFencingToken: tok}, `"replyonce/scop"`},
		{mcp.Meta{mcptool.MetaScope: "conv-ns", mcptool.MetaRunID: "r-ns", mcptool.MetaFencingToken: tok, "Replyonce-Delivery": "2"}, `"Replyonce-Delivery"`},
		{mcp.Meta{mcptool.MetaScope: "conv-ns", mcptool.HeaderScope: "other", mcptool.MetaRunID: "r-ns", mcptool.MetaFencingToken: tok}, "different values"},
	} {
		res := call("B-ns", c.meta)
		body := text(t, res)
		if st, _ := tooltest.StatusOf(body); st != tool.StatusInvalidRun || !strings.Contains(body, strings.ReplaceAll(c.want, `"`, `\"`)) {
			t.Errorf("_meta %v: %s, want invalid_run naming %s", c.meta, body, c.want)
		}
	}
	if n := refund.Executions.Load(); n != 1 {
		t.Fatalf("%d refunds, want only the first", n)
	}
}

// refundByOrder is a refund whose identity is its order alone
// (Definition.Identity); cents is required and at least 1 for the refund
// itself, not for asking about it.
func refundByOrder(t *testing.T, done *atomic.Int32) *tool.Tool {
	t.Helper()
	type args struct {
		Order string `json:"order"`
		Cents int    `json:"cents"`
	}
	tl, err := tool.Guard(tool.Definition{Name: "refund", Identity: []string{"order"},
		Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"cents":{"type":"integer","minimum":1}},"required":["order","cents"]}`)},
		nil, func(ctx context.Context, a args, c ledger.Call) (any, error) {
			done.Add(1)
			return map[string]string{"refund_id": "re_" + a.Order}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// Through the official SDK client: arguments that do not fit the tool's
// schema are a tool result (invalid_arguments, retryable, not terminal)
// naming the field, and the ledger is not asked: it is down, and asking it
// would have been the -32603 outage error.
func TestSchemaViolationIsAResultNamingTheField(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	api, err := ledgerapi.NewClient(down.URL, "token", down.Client())
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	var done atomic.Int32
	cs := connect(t, func(scope, id string, token uint64) tool.Run { return api.RunRef(scope, id, token) }, refundByOrder(t, &done))
	meta := mcp.Meta{mcptool.MetaScope: "conv", mcptool.MetaRunID: "r1", mcptool.MetaFencingToken: "1"}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"order": "A-1", "cents": "ten"}, `argument \"cents\" must be integer, not string`},
		{map[string]any{"order": "A-1"}, `argument \"cents\" is required`},
		{map[string]any{"order": 7, "cents": 5}, `argument \"order\" must be string, not number`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: c.args, Meta: meta})
		if err != nil {
			t.Fatalf("%v: a protocol error (%v), want a tool result", c.args, err)
		}
		body := text(t, res)
		if st, _ := tooltest.StatusOf(body); !res.IsError || st != tool.StatusInvalidArguments || !strings.Contains(body, c.want) {
			t.Errorf("%v: %s (isError %v), want invalid_arguments saying %s", c.args, body, res.IsError, c.want)
		}
		if f := flags(t, res); f["status"] != string(tool.StatusInvalidArguments) || f["retryable"] != true || f["terminal"] != false {
			t.Errorf("%v: flags %v, want invalid_arguments, retryable, not terminal", c.args, f)
		}
	}
	if n := done.Load(); n != 0 {
		t.Fatalf("%d refunds from arguments that do not fit", n)
	}
}

// Through the official SDK client: check_already_done about a refund asks
// for its identity alone, {order}, and answers not_done, then done with
// the refund's result, never a complaint about cents.
func TestCheckWithTheIdentityOnly(t *testing.T) {
	ctx := context.Background()
	l := ledger.New(memory.New(nil), ledger.Options{})
	run, err := l.Begin(ctx, "conv-id", ledger.RunOptions{RunID: "r-id"})
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	refund := refundByOrder(t, &done)
	check, err := tool.CheckTool(refund)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, func(scope, id string, token uint64) tool.Run { return l.RunRef(scope, id, token) }, refund, check)
	meta := mcp.Meta{mcptool.MetaScope: run.Scope, mcptool.MetaRunID: run.ID, mcptool.MetaFencingToken: strconv.FormatUint(run.Token, 10)}
	ask := func() (tool.Status, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.CheckName, Meta: meta,
			Arguments: map[string]any{"tool": "refund", "arguments": map[string]any{"order": "A-1"}}})
		if err != nil {
			t.Fatal(err)
		}
		body := text(t, res)
		st, err := tooltest.StatusOf(body)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("check: %s is an error", body)
		}
		return st, body
	}
	if st, body := ask(); st != tool.StatusNotDone {
		t.Fatalf("{order} alone before the refund: %s", body)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Meta: meta, Arguments: map[string]any{"order": "A-1", "cents": 2500}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := tooltest.StatusOf(text(t, res)); st != tool.StatusExecuted {
		t.Fatalf("refund: %s", text(t, res))
	}
	if st, body := ask(); st != tool.StatusDone || !strings.Contains(body, "re_A-1") {
		t.Fatalf("{order} alone after the refund: %s, want done with its result", body)
	}
	if n := done.Load(); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

// memoryStore is the store of the shared scenarios here: the race is about
// the adapter's types, and the store conformance suite covers the stores.
func memoryStore(*testing.T) ledger.Store { return memory.New(nil) }
