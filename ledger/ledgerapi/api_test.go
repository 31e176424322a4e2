package ledgerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	)
}

const token = "s3cret-admin-token"

type clock = storetest.Clock

func newClock() *clock { return storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

// env is a ledger served over HTTP.
type env struct {
	clock  *clock
	store  *memory.Store
	ledger *ledger.Ledger
	srv    *httptest.Server
	client *ledgerapi.Client
}

func newEnv(t *testing.T, store ledger.Store, opts ...ledgerapi.Option) *env {
	t.Helper()
	e := &env{clock: newClock()}
	if store == nil {
		e.store = memory.New(e.clock.Now)
		store = e.store
	}
	e.ledger = ledger.New(store, ledger.Options{Clock: e.clock.Now})
	e.srv = httptest.NewServer(ledgerapi.NewHandler(e.ledger, token, zaptest.NewLogger(t), opts...))
	t.Cleanup(func() {
		e.srv.Close()
		e.srv.Client().CloseIdleConnections()
	})
	c, err := ledgerapi.NewClient(e.srv.URL, token, e.srv.Client(), ledgerapi.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	e.client = c
	return e
}

// call sends a raw request and returns the status and decoded body.
func (e *env) call(t *testing.T, method, path, auth, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json (body %s)", method, path, ct, data)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %s", method, path, data)
	}
	return resp.StatusCode, out
}

const bearer = "Bearer " + token

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestEndpointsOverRawHTTP(t *testing.T) {
	e := newEnv(t, nil)

	status, run := e.call(t, "POST", "/v1/runs", bearer, `{"scope":"conv-1","run_id":"job-1","mode":"supersede"}`)
	if status != 200 || run["run_id"] != "job-1" || run["scope"] != "conv-1" || run["can_write"] != true || run["delivery"] != 1.0 {
		t.Fatalf("begin: %d %v", status, run)
	}
	tok := run["token"].(float64)

	body := `{"scope":"conv-1","intent":"reply","payload":{"to":"m1"},"run_id":"job-1","token":` + jsonNum(tok) + `,"summary":"hello"}`
	status, claim := e.call(t, "POST", "/v1/claims", bearer, body)
	if status != 200 || claim["status"] != "claimed" || claim["attempt"] != 1.0 || claim["fencing_token"] != tok {
		t.Fatalf("claim: %d %v", status, claim)
	}
	if !strings.HasPrefix(claim["idempotency_key"].(string), "ro_") || claim["deadline"] == nil {
		t.Fatalf("claim lacks idempotency key or deadline: %v", claim)
	}
	entryID := claim["entry_id"].(string)

	status, settled := e.call(t, "POST", "/v1/claims/settle", bearer,
		`{"scope":"conv-1","entry_id":"`+entryID+`","attempt":1,"outcome":"committed","value":{"message_id":"r1"}}`)
	if status != 200 || settled["status"] != "executed" || settled["value"].(map[string]any)["message_id"] != "r1" {
		t.Fatalf("settle: %d %v", status, settled)
	}

	status, again := e.call(t, "POST", "/v1/claims", bearer, body)
	if status != 200 || again["status"] != "replayed" || again["value"].(map[string]any)["message_id"] != "r1" {
		t.Fatalf("claim again: %d %v", status, again)
	}

	status, check := e.call(t, "POST", "/v1/check", bearer, `{"scope":"conv-1","intent":"reply","payload":{"to":"m1"}}`)
	if status != 200 || check["done"] != true || check["status"] != "replayed" {
		t.Fatalf("check: %d %v", status, check)
	}
	status, check = e.call(t, "POST", "/v1/check", bearer, `{"scope":"conv-1","intent":"reply","payload":{"to":"m2"}}`)
	if status != 200 || check["done"] != false || check["entry"] != nil {
		t.Fatalf("check of a new key: %d %v", status, check)
	}

	status, hist := e.call(t, "GET", "/v1/scopes/conv-1/history", bearer, "")
	entries, _ := hist["entries"].([]any)
	if status != 200 || len(entries) != 1 {
		t.Fatalf("history: %d %v", status, hist)
	}
	first := entries[0].(map[string]any)
	if first["state"] != "committed" || first["intent"] != "reply" || first["run_id"] != "job-1" || first["summary"] != "hello" || first["id"] != entryID {
		t.Fatalf("history entry: %v", first)
	}

	status, hb := e.call(t, "POST", "/v1/runs/heartbeat", bearer, `{"scope":"conv-1","run_id":"job-1","token":`+jsonNum(tok)+`}`)
	if status != 200 || hb["alive"] != true {
		t.Fatalf("heartbeat: %d %v", status, hb)
	}
	status, hb = e.call(t, "POST", "/v1/runs/heartbeat", bearer, `{"scope":"conv-1","run_id":"job-1","token":1}`)
	if status != 200 || hb["alive"] != false {
		t.Fatalf("heartbeat with a stale token: %d %v", status, hb)
	}

	status, ended := e.call(t, "POST", "/v1/runs/end", bearer, `{"scope":"conv-1","run_id":"job-1","reason":"answered"}`)
	if status != 200 || ended["state"] != "ended" {
		t.Fatalf("end: %d %v", status, ended)
	}
	status, refused := e.call(t, "POST", "/v1/claims", bearer,
		`{"scope":"conv-1","intent":"tag","payload":"vip","run_id":"job-1","token":`+jsonNum(tok)+`}`)
	if status != 200 || refused["status"] != "refused" || refused["reason"] != "run_ended" {
		t.Fatalf("claim after end: %d %v", status, refused)
	}

	_, run2 := e.call(t, "POST", "/v1/runs", bearer, `{"scope":"conv-1","run_id":"job-2"}`)
	status, cancelled := e.call(t, "POST", "/v1/runs/cancel", bearer, `{"scope":"conv-1","run_id":"job-2"}`)
	if status != 200 || cancelled["state"] != "cancelled" {
		t.Fatalf("cancel: %d %v", status, cancelled)
	}
	status, refused = e.call(t, "POST", "/v1/claims", bearer,
		`{"scope":"conv-1","intent":"tag","payload":"vip","run_id":"job-2","token":`+jsonNum(run2["token"].(float64))+`}`)
	if status != 200 || refused["reason"] != "run_cancelled" {
		t.Fatalf("claim after cancel: %d %v", status, refused)
	}

	// An effect whose outcome is unknown is listed and resolved.
	_, c := e.call(t, "POST", "/v1/claims", bearer, `{"scope":"order-7","intent":"refund","payload":{"cents":500}}`)
	status, amb := e.call(t, "POST", "/v1/claims/settle", bearer,
		`{"scope":"order-7","entry_id":"`+c["entry_id"].(string)+`","attempt":1,"outcome":"unknown","error":"timeout after send"}`)
	if status != 200 || amb["status"] != "ambiguous" || amb["error"] != "timeout after send" {
		t.Fatalf("settle unknown: %d %v", status, amb)
	}
	status, list := e.call(t, "GET", "/v1/ambiguous?limit=10", bearer, "")
	listed, _ := list["entries"].([]any)
	if status != 200 || len(listed) != 1 || listed[0].(map[string]any)["id"] != c["entry_id"] {
		t.Fatalf("ambiguous: %d %v", status, list)
	}
	status, res := e.call(t, "POST", "/v1/entries/resolve", bearer,
		`{"scope":"order-7","entry_id":"`+c["entry_id"].(string)+`","outcome":"committed"}`)
	if status != 200 || res["entry"].(map[string]any)["state"] != "committed" || res["entry"].(map[string]any)["resolved_by"] != "operator" {
		t.Fatalf("resolve: %d %v", status, res)
	}
	_, list = e.call(t, "GET", "/v1/ambiguous", bearer, "")
	if listed, _ := list["entries"].([]any); len(listed) != 0 {
		t.Fatalf("ambiguous after resolve: %v", list)
	}
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(uint64(f))
	return string(b)
}

func TestClientMirrorsTheLedger(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c := e.client

	run, err := c.Begin(ctx, "conv-9", ledger.RunOptions{RunID: "msg-1", Mode: ledger.ModeSupersede})
	if err != nil || !run.CanWrite || run.Delivery != 1 || run.Token == 0 || run.Mode != ledger.ModeSupersede {
		t.Fatalf("begin: %+v %v", run, err)
	}
	sent := 0
	send := func(ctx context.Context, call ledger.Call) (any, error) {
		if call.IdempotencyKey == "" || call.FencingToken != run.Token || call.Attempt != 1 {
			t.Errorf("call: %+v", call)
		}
		sent++
		return map[string]string{"id": "r1"}, nil
	}
	res, err := run.Once(ctx, "reply", map[string]any{"to": "m1"}, send)
	if err != nil || res.Status != ledger.StatusExecuted || string(res.Value) != `{"id":"r1"}` {
		t.Fatalf("once: %+v %v", res, err)
	}
	res, err = run.Once(ctx, "reply", map[string]any{"to": "m1"}, send)
	if err != nil || res.Status != ledger.StatusReplayed || sent != 1 {
		t.Fatalf("once again: %+v %v (sent %d)", res, err, sent)
	}
	chk, err := run.Check(ctx, "reply", map[string]any{"to": "m1"})
	if err != nil || !chk.Done || chk.Entry == nil || chk.Entry.State != ledger.StateCommitted {
		t.Fatalf("check: %+v %v", chk, err)
	}
	if alive, err := run.Heartbeat(ctx); err != nil || !alive {
		t.Fatalf("heartbeat: %v %v", alive, err)
	}

	// Two-phase, with a not-applied failure and a retry.
	cl, err := run.Claim(ctx, "tag", "vip", ledger.OnceOptions{})
	if err != nil || !cl.Acquired() {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	r, err := c.Settle(ctx, cl.Ref(), ledger.OutcomeNotApplied, nil, errors.New("crm said 400"))
	if err != nil || r.Status != ledger.StatusFailed || r.Err == nil {
		t.Fatalf("settle not applied: %+v %v", r, err)
	}
	res, err = run.Once(ctx, "tag", "vip", func(context.Context, ledger.Call) (any, error) { return "ok", nil })
	if err != nil || res.Status != ledger.StatusExecuted || res.Entry.Attempt != 2 {
		t.Fatalf("retry after not applied: %+v %v", res, err)
	}

	// An effect error is classified locally: NotApplied → failed, else ambiguous.
	res, err = c.Once(ctx, ledger.Key{Scope: "order-1", Intent: "refund", Payload: 1},
		func(context.Context, ledger.Call) (any, error) {
			return nil, ledger.NotApplied(errors.New("card declined"))
		})
	if err != nil || res.Status != ledger.StatusFailed || !errors.Is(res.Err, ledger.ErrNotApplied) {
		t.Fatalf("not applied: %+v %v", res, err)
	}
	res, err = c.Once(ctx, ledger.Key{Scope: "order-2", Intent: "refund", Payload: 1},
		func(context.Context, ledger.Call) (any, error) { return nil, errors.New("connection reset") })
	if err != nil || res.Status != ledger.StatusAmbiguous {
		t.Fatalf("ambiguous: %+v %v", res, err)
	}
	amb, err := c.Ambiguous(ctx, 0)
	if err != nil || len(amb) != 1 || amb[0].Scope != "order-2" || amb[0].Error != "connection reset" {
		t.Fatalf("ambiguous list: %+v %v", amb, err)
	}
	ent, err := c.Resolve(ctx, ledger.Resolution{Scope: "order-2", Intent: "refund", Payload: 1, Outcome: ledger.OutcomeNotApplied})
	if err != nil || ent.State != ledger.StateFailed {
		t.Fatalf("resolve by key: %+v %v", ent, err)
	}

	hist, err := c.History(ctx, "conv-9")
	if err != nil || len(hist) != 2 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	local, _ := e.ledger.Views().History(ctx, "conv-9")
	for i := range hist {
		if hist[i].ID != local[i].ID || hist[i].State != local[i].State || hist[i].Attempt != local[i].Attempt ||
			hist[i].IdempotencyKey() != local[i].IdempotencyKey() || !hist[i].ClaimedAt.Equal(local[i].ClaimedAt) ||
			hist[i].PendingTTL != local[i].PendingTTL || string(hist[i].Payload) != string(local[i].Payload) {
			t.Errorf("entry %d over HTTP %+v, in process %+v", i, hist[i], local[i])
		}
	}

	if err := run.End(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	res, err = run.Once(ctx, "reply", map[string]any{"to": "m2"}, send)
	if err != nil || res.Status != ledger.StatusRefused || res.Reason != ledger.ReasonRunEnded {
		t.Fatalf("after end: %+v %v", res, err)
	}
	run2, _ := c.Begin(ctx, "conv-9", ledger.RunOptions{RunID: "msg-2"})
	if err := c.Cancel(ctx, "conv-9", "msg-2"); err != nil {
		t.Fatal(err)
	}
	if res, _ := run2.Once(ctx, "x", nil, send); res.Reason != ledger.ReasonRunCancelled {
		t.Fatalf("after cancel: %+v", res)
	}
	// Client errors match the ledger's sentinels.
	_, err = c.Heartbeat(ctx, "conv-9", "no-such-run", 1)
	if !errors.Is(err, ledger.ErrUnknownRun) {
		t.Fatalf("unknown run: %v", err)
	}
	var apiErr *ledgerapi.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("not an *Error: %T", err)
	}
}

func TestWaitPollsUntilTheOtherAttemptSettles(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	key := ledger.Key{Scope: "s", Intent: "send", Payload: 1}
	cl, err := e.client.Claim(ctx, ledger.ClaimRequest{Key: key})
	if err != nil || !cl.Acquired() {
		t.Fatal(cl, err)
	}
	c, _ := ledgerapi.NewClient(e.srv.URL, token, e.srv.Client(), ledgerapi.WithWaitInterval(5*time.Millisecond))
	done := make(chan ledger.Result, 1)
	go func() {
		res, _ := c.Once(ctx, key, func(context.Context, ledger.Call) (any, error) { return "second", nil }, ledger.OnceOptions{Wait: 5 * time.Second})
		done <- res
	}()
	time.Sleep(30 * time.Millisecond)
	if _, err := e.client.Settle(ctx, cl.Ref(), ledger.OutcomeCommitted, "first", nil); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Status != ledger.StatusReplayed || string(res.Value) != `"first"` {
		t.Fatalf("waited once: %+v", res)
	}
}

// Two deliveries of one run race over HTTP: whichever began last holds the
// run, and the other one's claims are refused superseded.
func TestStaleDeliveryIsSupersededOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for round := range 20 {
		scope := "conv-race-" + string(rune('a'+round))
		var runs [2]*ledgerapi.Run
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range runs {
			wg.Go(func() {
				<-start
				r, err := e.client.Begin(ctx, scope, ledger.RunOptions{RunID: "evt-1", Mode: ledger.ModeIndependent})
				if err != nil {
					t.Error(err)
					return
				}
				runs[i] = r
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		stale, fresh := runs[0], runs[1]
		if stale.Token > fresh.Token {
			stale, fresh = fresh, stale
		}
		if stale.Token == fresh.Token || fresh.Delivery != 2 || stale.Delivery != 1 {
			t.Fatalf("deliveries %+v and %+v", stale, fresh)
		}

		// Both now try to send the reply at once.
		var results [2]ledger.Result
		var sends sync.Map
		for i, r := range []*ledgerapi.Run{stale, fresh} {
			wg.Go(func() {
				res, err := r.Once(ctx, "reply", map[string]string{"to": "m1"}, func(context.Context, ledger.Call) (any, error) {
					sends.Store(i, true)
					return "sent", nil
				})
				if err != nil {
					t.Error(err)
				}
				results[i] = res
			})
		}
		wg.Wait()
		if _, ok := sends.Load(0); ok {
			t.Fatalf("round %d: the stale delivery sent a reply: %+v", round, results[0])
		}
		if results[1].Status != ledger.StatusExecuted {
			t.Fatalf("round %d: the current delivery got %+v", round, results[1])
		}
		// Whether it came first (superseded) or second (the key is done or
		// in flight), the stale delivery never writes; asked afresh, it is
		// told why.
		switch r := results[0]; {
		case r.Status == ledger.StatusRefused && r.Reason == ledger.ReasonSuperseded:
		case r.Status == ledger.StatusReplayed, r.Status == ledger.StatusInFlight:
		default:
			t.Fatalf("round %d: stale delivery got %+v", round, results[0])
		}
		res, err := stale.Once(ctx, "add_tag", "answered", func(context.Context, ledger.Call) (any, error) { return nil, nil })
		if err != nil || res.Status != ledger.StatusRefused || res.Reason != ledger.ReasonSuperseded {
			t.Fatalf("round %d: stale claim: %+v %v", round, res, err)
		}
	}
}

// Bad input is answered 4xx with a stable code and changes nothing: the
// scope's stored document is byte for byte the same afterwards.
func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	run, err := e.client.Begin(ctx, "conv-1", ledger.RunOptions{RunID: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Once(ctx, "reply", "m1", func(context.Context, ledger.Call) (any, error) { return "r1", nil })
	if err != nil || res.Status != ledger.StatusExecuted {
		t.Fatal(res, err)
	}
	done := res.Entry
	tok := jsonNum(float64(run.Token))
	validClaim := `{"scope":"conv-1","intent":"tag","payload":"vip","run_id":"job-1","token":` + tok + `}`

	cases := []struct {
		name, method, path, auth, body string
		status                         int
		code                           string
	}{
		{"unknown run", "POST", "/v1/claims", bearer, `{"scope":"conv-1","intent":"tag","payload":"vip","run_id":"ghost","token":1}`, 404, "unknown_run"},
		{"heartbeat of an unknown run", "POST", "/v1/runs/heartbeat", bearer, `{"scope":"conv-1","run_id":"ghost","token":1}`, 404, "unknown_run"},
		{"end of an unknown run", "POST", "/v1/runs/end", bearer, `{"scope":"conv-1","run_id":"ghost"}`, 404, "unknown_run"},
		{"cancel of an unknown run", "POST", "/v1/runs/cancel", bearer, `{"scope":"conv-1","run_id":"ghost"}`, 404, "unknown_run"},
		{"malformed JSON", "POST", "/v1/claims", bearer, `{"scope":"conv-1",`, 400, "invalid_request"},
		{"trailing data", "POST", "/v1/claims", bearer, validClaim + `{}`, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/claims", bearer, `{"scope":"conv-1","intent":"tag","run":"job-1"}`, 400, "invalid_request"},
		{"empty intent", "POST", "/v1/claims", bearer, `{"scope":"conv-1","payload":1}`, 400, "invalid_request"},
		{"bad conflict mode", "POST", "/v1/claims", bearer, `{"scope":"conv-1","intent":"tag","conflict":"some"}`, 400, "invalid_request"},
		{"begin with a bad mode", "POST", "/v1/runs", bearer, `{"scope":"conv-1","run_id":"job-1","mode":"greedy"}`, 400, "invalid_request"},
		{"wrong token", "POST", "/v1/claims", "Bearer s3cret-admin-tokem", validClaim, 401, "unauthorized"},
		{"token prefix", "POST", "/v1/claims", "Bearer s3cret", validClaim, 401, "unauthorized"},
		{"token with more", "POST", "/v1/claims", bearer + "x", validClaim, 401, "unauthorized"},
		{"missing token", "POST", "/v1/claims", "", validClaim, 401, "unauthorized"},
		{"basic auth", "POST", "/v1/claims", "Basic " + token, validClaim, 401, "unauthorized"},
		{"wrong token on begin", "POST", "/v1/runs", "Bearer nope", `{"scope":"conv-1","run_id":"job-1"}`, 401, "unauthorized"},
		{"settle of an unknown claim", "POST", "/v1/claims/settle", bearer, `{"scope":"conv-1","entry_id":"0123abcd","attempt":1,"outcome":"committed"}`, 404, "unknown_claim"},
		{"settle of an attempt never made", "POST", "/v1/claims/settle", bearer, `{"scope":"conv-1","entry_id":"` + done.ID + `","attempt":2,"outcome":"committed"}`, 404, "unknown_claim"},
		{"settle twice", "POST", "/v1/claims/settle", bearer, `{"scope":"conv-1","entry_id":"` + done.ID + `","attempt":1,"outcome":"unknown"}`, 409, "already_settled"},
		{"settle with a bad outcome", "POST", "/v1/claims/settle", bearer, `{"scope":"conv-1","entry_id":"` + done.ID + `","attempt":1,"outcome":"maybe"}`, 400, "invalid_request"},
		{"settle of attempt 0", "POST", "/v1/claims/settle", bearer, `{"scope":"conv-1","entry_id":"` + done.ID + `","attempt":0,"outcome":"committed"}`, 400, "invalid_request"},
		{"resolve of a committed entry", "POST", "/v1/entries/resolve", bearer, `{"scope":"conv-1","entry_id":"` + done.ID + `","outcome":"not_applied"}`, 409, "not_ambiguous"},
		{"resolve by key of a committed entry", "POST", "/v1/entries/resolve", bearer, `{"scope":"conv-1","intent":"reply","payload":"m1","outcome":"committed"}`, 409, "not_ambiguous"},
		{"resolve of an unknown entry", "POST", "/v1/entries/resolve", bearer, `{"scope":"conv-1","entry_id":"0123abcd","outcome":"committed"}`, 404, "unknown_claim"},
		{"resolve as unknown", "POST", "/v1/entries/resolve", bearer, `{"scope":"conv-1","entry_id":"` + done.ID + `","outcome":"unknown"}`, 400, "invalid_request"},
		{"resolve naming both", "POST", "/v1/entries/resolve", bearer, `{"scope":"conv-1","entry_id":"` + done.ID + `","intent":"reply","outcome":"committed"}`, 400, "invalid_request"},
		{"ambiguous with a bad limit", "GET", "/v1/ambiguous?limit=-3", bearer, "", 400, "invalid_request"},
		// The gateway's own records: no agent reads or writes there.
		{"begin on a reserved scope", "POST", "/v1/runs", bearer, `{"scope":"replyonce:control:paused-sources","run_id":"job-1"}`, 400, "invalid_request"},
		{"claim on a reserved scope", "POST", "/v1/claims", bearer, `{"scope":"REPLYONCE:control:x","intent":"tag","payload":1}`, 400, "invalid_request"},
		{"check on a reserved scope", "POST", "/v1/check", bearer, `{"scope":"replyonce:x","intent":"tag","payload":1}`, 400, "invalid_request"},
		{"history of a reserved scope", "GET", "/v1/scopes/replyonce:control:paused-sources/history", bearer, "", 400, "invalid_request"},
		{"deliveries of a reserved scope", "GET", "/v1/deliveries?scope=replyonce:control:paused-sources", bearer, "", 400, "invalid_request"},
		{"unknown route", "GET", "/v1/nope", bearer, "", 404, "not_found"},
		{"wrong method", "GET", "/v1/claims", bearer, "", 405, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snapshot(t, "conv-1")
			status, body := e.call(t, tc.method, tc.path, tc.auth, tc.body)
			if status != tc.status || errorCode(body) != tc.code {
				t.Errorf("got %d %v, want %d %s", status, body, tc.status, tc.code)
			}
			if msg := body["error"].(map[string]any)["message"]; msg == "" {
				t.Errorf("no message: %v", body)
			}
			if after := e.snapshot(t, "conv-1"); !bytes.Equal(before.doc, after.doc) || before.history != after.history {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before.doc, after.doc)
			}
		})
	}

	t.Run("wrong content type", func(t *testing.T) {
		before := e.snapshot(t, "conv-1")
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/claims", strings.NewReader(validClaim))
		req.Header.Set("Authorization", bearer)
		req.Header.Set("Content-Type", "text/plain")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("status %d", resp.StatusCode)
		}
		if after := e.snapshot(t, "conv-1"); !bytes.Equal(before.doc, after.doc) {
			t.Error("state changed")
		}
	})
	t.Run("body too large", func(t *testing.T) {
		big := `{"scope":"conv-1","intent":"tag","payload":"` + strings.Repeat("x", ledgerapi.MaxBodyBytes) + `"}`
		status, body := e.call(t, "POST", "/v1/claims", bearer, big)
		if status != http.StatusRequestEntityTooLarge || errorCode(body) != "body_too_large" {
			t.Errorf("got %d %v", status, body)
		}
	})
	t.Run("missing token has a challenge", func(t *testing.T) {
		resp, err := e.srv.Client().Get(e.srv.URL + "/v1/ambiguous")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%d %v", resp.StatusCode, resp.Header)
		}
	})

	// The run is still the one that began: the valid claim goes through.
	status, body := e.call(t, "POST", "/v1/claims", "bearer "+token, validClaim)
	if status != 200 || body["status"] != "claimed" {
		t.Fatalf("valid claim after the bad ones: %d %v", status, body)
	}
}

type snap struct {
	doc     []byte
	history string
}

func (e *env) snapshot(t *testing.T, scope string) snap {
	t.Helper()
	doc, err := e.store.Read(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := e.client.History(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(hist)
	return snap{doc: doc, history: string(b)}
}

// failingStore is a store that cannot be reached.
type failingStore struct{}

var errDown = errors.New("dial tcp 10.0.0.5:5432: connection refused (password=hunter2)")

func (failingStore) Transact(context.Context, string, func([]byte) (*ledger.Write, error)) error {
	return errDown
}
func (failingStore) Read(context.Context, string) ([]byte, error) { return nil, errDown }
func (failingStore) ScopesToReview(context.Context, time.Time, int) ([]string, error) {
	return nil, errDown
}
func (failingStore) ScopesDue(context.Context, time.Time, int) ([]string, error) {
	return nil, errDown
}
func (failingStore) ScopesDueBetween(context.Context, time.Time, time.Time, int) ([]string, error) {
	return nil, errDown
}
func (failingStore) CountDue(context.Context, time.Time) (int, error) { return 0, errDown }
func (failingStore) ScopesReceived(context.Context, ledger.ScopeAt, int) ([]ledger.ScopeAt, error) {
	return nil, errDown
}
func (failingStore) ReadBlob(context.Context, string, string) ([]byte, error) { return nil, errDown }
func (failingStore) ReadBlobs(context.Context, string, []string) ([][]byte, error) {
	return nil, errDown
}
func (failingStore) ReadControl(context.Context, string) ([]byte, error) { return nil, errDown }
func (failingStore) TransactControl(context.Context, string, func([]byte) ([]byte, error)) error {
	return errDown
}

func TestStoreFailureIs503(t *testing.T) {
	e := newEnv(t, failingStore{})
	status, body := e.call(t, "POST", "/v1/runs", bearer, `{"scope":"conv-1"}`)
	if status != 503 || errorCode(body) != "store_unavailable" {
		t.Fatalf("%d %v", status, body)
	}
	if msg := body["error"].(map[string]any)["message"].(string); strings.Contains(msg, "hunter2") {
		t.Fatalf("store error leaked to the caller: %s", msg)
	}
	_, err := e.client.History(context.Background(), "conv-1")
	if !errors.Is(err, ledgerapi.ErrUnavailable) {
		t.Fatalf("client error %v", err)
	}
}

func TestNoTokenMeansNoAuth(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{})
	srv := httptest.NewServer(ledgerapi.NewHandler(l, "", nil))
	defer srv.Close()
	c, err := ledgerapi.NewClient(srv.URL, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(context.Background(), "s", ledger.RunOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestScopesWithSlashesAreAddressable(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, scope := range []string{"slack:T1/C2", "a//b", "../etc", "with space%"} {
		if _, err := e.client.Once(ctx, ledger.Key{Scope: scope, Intent: "x", Payload: 1}, func(context.Context, ledger.Call) (any, error) { return 1, nil }); err != nil {
			t.Fatal(err)
		}
		h, err := e.client.History(ctx, scope)
		if err != nil || len(h) != 1 || h[0].Scope != scope {
			t.Fatalf("%q: %+v %v", scope, h, err)
		}
	}
}

func TestNewClientRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8081", "ftp://x", "http://"} {
		if _, err := ledgerapi.NewClient(u, "", nil); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

// The queued-delivery endpoints: shown, listed and replayed on the wire in
// the API's snake_case, with bad input a 400 naming the field.
func TestDeliveryEndpoints(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	key := ledger.Key{Scope: "gh:d-1", Intent: "deliver", Payload: map[string]string{"source": "gh", "eventId": "d-1"}}
	res, err := e.ledger.Queue().Enqueue(ctx, ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: "gh", EventID: "d-1", Scope: "gh:d-1", ContentType: "application/json", Body: []byte(`{"a":1}`)},
		Run:   ledger.RunOptions{RunID: "gh:d-1", Mode: ledger.ModeIndependent},
		Claim: ledger.ClaimRequest{Key: key, PendingTTL: time.Minute},
		Hold:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.ledger.Queue().FinishDelivery(ctx, ledger.Finish{Taken: ledger.Taken{OK: true, Item: res.Item, Run: res.Run, Claim: res.Claim},
		Status: ledger.DeliveryDead, Record: ledger.AttemptRecord{AgentStatus: 500, Answer: []byte("oops")}})
	if err != nil {
		t.Fatal(err)
	}
	status, body := e.call(t, "GET", "/v1/deliveries/show?source=gh&event_id=d-1", bearer, "")
	if status != 200 {
		t.Fatalf("show: %d %v", status, body)
	}
	d := body["delivery"].(map[string]any)
	att := body["attempts"].([]any)
	ev := body["event"].(map[string]any)
	if d["status"] != "dead" || d["run_id"] != "gh:d-1" || len(att) != 1 || att[0].(map[string]any)["answer"] != "oops" || ev["body"] != `{"a":1}` {
		t.Fatalf("show: %v", body)
	}
	if status, body := e.call(t, "GET", "/v1/deliveries?status=dead", bearer, ""); status != 200 || len(body["deliveries"].([]any)) != 1 {
		t.Fatalf("list dead: %d %v", status, body)
	}
	if status, body := e.call(t, "GET", "/v1/deliveries?status=lost", bearer, ""); status != 400 || !strings.Contains(fmt.Sprint(body), "status") {
		t.Fatalf("bad status: %d %v", status, body)
	}
	if status, body := e.call(t, "POST", "/v1/deliveries/replay", bearer, `{"filter":{"status":"dead"}}`); status != 200 || len(body["deliveries"].([]any)) != 1 {
		t.Fatalf("bulk replay: %d %v", status, body)
	}
	if status, _ := e.call(t, "GET", "/v1/deliveries/show?source=gh&event_id=nope", bearer, ""); status != 404 {
		t.Fatalf("unknown event: %d", status)
	}
	if status, _ := e.call(t, "GET", "/v1/deliveries", "", ""); status != 401 {
		t.Fatalf("without the token: %d", status)
	}
	paused, err := e.client.PauseSource(ctx, "gh", true)
	if err != nil || len(paused.Paused) != 1 || paused.Paused[0] != "gh" {
		t.Fatalf("pause: %v %v", paused, err)
	}
}

// A long scope's history over HTTP, a page at a time: the pages, newest
// first, list what the whole history lists, each entry once; the
// timeline lists a page of entries, oldest first, and the cursor of the
// older ones.
func TestHistoryPages(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	const n = 70 // enough that most leave the scope's document
	for i := range n {
		if _, err := e.ledger.Once(ctx, ledger.Key{Scope: "long", Intent: "reply", Payload: i},
			func(context.Context, ledger.Call) (any, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
	}
	whole, err := e.client.History(ctx, "long")
	if err != nil || len(whole) != n {
		t.Fatalf("whole history: %d entries, %v", len(whole), err)
	}
	var got []ledger.Entry
	q := ledger.HistoryQuery{Scope: "long", Limit: 30}
	for pages := 1; ; pages++ {
		p, err := e.client.HistoryPage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > 30 || pages > 3 {
			t.Fatalf("page %d: %d entries", pages, len(p.Entries))
		}
		got = append(got, p.Entries...)
		if p.Next == "" {
			break
		}
		q.Before = p.Next
	}
	if len(got) != n {
		t.Fatalf("pages list %d entries, want %d", len(got), n)
	}
	for i := range got {
		if w := whole[n-1-i]; got[i].ID != w.ID || string(got[i].Value) != string(w.Value) {
			t.Fatalf("page entry %d: %s %s, want %s %s", i, got[i].ID, got[i].Value, w.ID, w.Value)
		}
	}
	tl, err := e.client.TimelinePage(ctx, ledgerapi.TimelineRequest{Scope: "long", Entries: 10})
	if err != nil || len(tl.Entries) != 10 || tl.EntriesNext == "" || tl.Entries[9].ID != whole[n-1].ID || tl.Entries[0].ID != whole[n-10].ID {
		t.Fatalf("timeline page: %d entries, next %q, %v", len(tl.Entries), tl.EntriesNext, err)
	}
	older, err := e.client.TimelinePage(ctx, ledgerapi.TimelineRequest{Scope: "long", Entries: 10, Before: tl.EntriesNext})
	if err != nil || len(older.Entries) != 10 || older.Entries[9].ID != whole[n-11].ID {
		t.Fatalf("older timeline page: %d entries, %v", len(older.Entries), err)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "before=nope"} {
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/scopes/long/history?"+bad, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", bearer)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("history?%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}
