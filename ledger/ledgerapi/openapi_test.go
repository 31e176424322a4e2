package ledgerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

// The tests in this file hold openapi.yaml to the server: its routes, the
// Go types its bodies are made of, and the answers a real handler gives.
// Removing a route or a field on either side fails one of them.

const openAPIBase = "https://replyonce.invalid/openapi.json"

// openAPI is the parsed document and a schema compiler over it.
type openAPI struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	raw, err := ledgerapi.OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.(map[string]any)["openapi"]; v != "3.1.0" {
		t.Fatalf("openapi version %v, want 3.1.0", v)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIBase, doc); err != nil {
		t.Fatal(err)
	}
	return &openAPI{doc: doc.(map[string]any), compiler: c, compiled: map[string]*jsonschema.Schema{}}
}

// pointer escapes JSON pointer tokens into a URL fragment.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		tok = strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
		tok = strings.NewReplacer("{", "%7B", "}", "%7D").Replace(tok)
		b.WriteString("/" + tok)
	}
	return b.String()
}

func (o *openAPI) schema(t *testing.T, tokens ...string) *jsonschema.Schema {
	t.Helper()
	ptr := pointer(tokens...)
	if s := o.compiled[ptr]; s != nil {
		return s
	}
	s, err := o.compiler.Compile(openAPIBase + "#" + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	o.compiled[ptr] = s
	return s
}

// at walks the document; a "$ref" on the way is followed.
func (o *openAPI) at(tokens ...string) map[string]any {
	var cur any = o.doc
	for _, tok := range tokens {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
		if m2, ok := cur.(map[string]any); ok {
			if ref, ok := m2["$ref"].(string); ok {
				cur = o.at(strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
			}
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

// operations lists "METHOD /path" for every operation the document has.
func (o *openAPI) operations() []string {
	var out []string
	for path, item := range o.doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "post", "put", "patch", "delete":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestOpenAPIRoutesMatchServer(t *testing.T) {
	o := loadOpenAPI(t)
	served := ledgerapi.RegisteredRoutes()
	sort.Strings(served)
	documented := o.operations()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("the server serves %s, which openapi.yaml does not describe", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.yaml describes %s, which the server does not serve", r)
		}
	}
}

// wireTypes are the Go types the API's bodies are made of, by the name of
// their schema in components/schemas.
var wireTypes = map[string]any{
	"ConversationsPage": ledgerapi.ConversationsPageJSON{}, "Conversation": ledgerapi.ConversationJSON{},
	"BeginRequest": ledgerapi.BeginRequest{}, "Run": ledgerapi.RunJSON{}, "RunRequest": ledgerapi.RunRequest{},
	"Heartbeat": ledgerapi.HeartbeatJSON{}, "RunState": ledgerapi.RunStateJSON{}, "ClaimRequest": ledgerapi.ClaimRequest{},
	"Claim": ledgerapi.ClaimJSON{}, "SettleRequest": ledgerapi.SettleRequest{}, "Result": ledgerapi.ResultJSON{},
	"KeyRequest": ledgerapi.KeyRequest{}, "Check": ledgerapi.CheckJSON{}, "Entries": ledgerapi.EntriesJSON{},
	"ResolveRequest": ledgerapi.ResolveRequest{}, "EntryOnly": ledgerapi.EntryOnlyJSON{}, "Entry": ledgerapi.EntryJSON{},
	"Error": ledgerapi.ErrorJSON{}, "ErrorDetail": ledgerapi.ErrorDetail{}, "Caps": ledgerapi.CapsJSON{}, "Cap": ledgerapi.CapJSON{},
	"Escalation": ledgerapi.EscalationJSON{}, "Escalations": ledgerapi.EscalationsJSON{}, "DismissRequest": ledgerapi.DismissRequest{},
	"EscalationOnly": ledgerapi.EscalationOnlyJSON{}, "DeliveryItem": ledgerapi.DeliveryItemJSON{}, "Deliveries": ledgerapi.DeliveriesJSON{},
	"DeliveryPage": ledgerapi.PageJSON{}, "DeliveryShow": ledgerapi.DeliveryJSON{}, "Event": ledgerapi.EventJSON{},
	"Attempt": ledgerapi.AttemptJSON{}, "ReplayRequest": ledgerapi.ReplayRequest{}, "TrialRequest": ledgerapi.TrialRequest{}, "DeliveryFilter": ledgerapi.DeliveryFilter{},
	"SourceRequest": ledgerapi.SourceRequest{}, "Paused": ledgerapi.PausedJSON{}, "Timeline": ledgerapi.TimelineJSON{},
	"RunInfo": ledgerapi.RunInfoJSON{}, "Refusal": ledgerapi.RefusalJSON{},
}

// jsonType is the JSON Schema type a Go field encodes as; "" for any JSON.
func jsonType(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(time.Time{}):
		return "string"
	case t == reflect.TypeOf(json.RawMessage{}):
		return ""
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "?" + t.String()
}

// Every object schema is a Go wire type, field for field: the same names,
// the fields that are always present required, the same JSON types.
func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	o := loadOpenAPI(t)
	schemas := o.at("components", "schemas")
	for name, s := range schemas {
		if s.(map[string]any)["type"] == "object" {
			if _, ok := wireTypes[name]; !ok {
				t.Errorf("components/schemas/%s has no Go type in wireTypes", name)
			}
		}
	}
	for name, v := range wireTypes {
		s := o.at("components", "schemas", name)
		if s == nil {
			t.Errorf("%T has no schema %s", v, name)
			continue
		}
		rt := reflect.TypeOf(v)
		if got := s["x-go-type"]; got != rt.Name() {
			t.Errorf("%s: x-go-type %v, want %s", name, got, rt.Name())
		}
		props, _ := s["properties"].(map[string]any)
		var required []string
		for _, r := range asSlice(s["required"]) {
			required = append(required, r.(string))
		}
		fields := map[string]bool{}
		for i := range rt.NumField() {
			f := rt.Field(i)
			tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = true
			p, ok := props[tag].(map[string]any)
			if !ok {
				t.Errorf("%s: %s.%s (json %q) is not in the schema", name, rt.Name(), f.Name, tag)
				continue
			}
			always := !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero")
			if always != slices.Contains(required, tag) {
				t.Errorf("%s.%s: required is %v, but the Go field is always sent: %v", name, tag, !always, always)
			}
			if want, got := jsonType(f.Type), o.propType(p); want != got {
				t.Errorf("%s.%s: schema type %q, Go type %s encodes as %q", name, tag, got, f.Type, want)
			}
		}
		for p := range props {
			if !fields[p] {
				t.Errorf("%s: property %q has no field in %s", name, p, rt.Name())
			}
		}
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties must be false (the server refuses unknown fields and sends none)", name)
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// propType is the JSON type a property schema says, through a $ref.
func (o *openAPI) propType(p map[string]any) string {
	if ref, ok := p["$ref"].(string); ok {
		return o.propType(o.at(strings.Split(strings.TrimPrefix(ref, "#/"), "/")...))
	}
	s, _ := p["type"].(string)
	return s
}

// The error codes the document lists are the server's Code constants.
func TestOpenAPIErrorCodesMatchServer(t *testing.T) {
	o := loadOpenAPI(t)
	var documented []string
	for _, c := range asSlice(o.at("components", "schemas", "ErrorDetail", "properties", "code")["enum"]) {
		documented = append(documented, c.(string))
	}
	served := []string{ledgerapi.CodeInvalidRequest, ledgerapi.CodeUnauthorized, ledgerapi.CodeNotFound, ledgerapi.CodeMethodNotAllowed,
		ledgerapi.CodeTooLarge, ledgerapi.CodeMediaType, ledgerapi.CodeUnknownRun, ledgerapi.CodeUnknownClaim, ledgerapi.CodeAlreadySettled,
		ledgerapi.CodeNotAmbiguous, ledgerapi.CodeStoreUnavailable, ledgerapi.CodeDeliveryInFlight, ledgerapi.CodeUnknownEscalation}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("error codes: openapi.yaml %v, server %v", documented, served)
	}
}

// liveAPI sends requests to a real handler and checks each request body
// and answer against the operation the document gives for it.
type liveAPI struct {
	t         *testing.T
	o         *openAPI
	srv       *httptest.Server
	exercised map[string]bool // "METHOD /template status"
	// invalid marks the next request body as one the document refuses on
	// purpose, to see the server refuse it too.
	invalid bool
}

// codeInDescription reads the error codes a response's description names
// in backquotes.
var codeInDescription = regexp.MustCompile("`([a-z_]+)`")

func (a *liveAPI) call(method, template, path, body string, opts ...func(*http.Request)) (int, map[string]any) {
	t := a.t
	t.Helper()
	op := a.o.at("paths", template, strings.ToLower(method))
	if op == nil {
		t.Fatalf("%s %s is not in openapi.yaml", method, template)
	}
	if body != "" && method == http.MethodPost {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		reqTokens := []string{"paths", template, strings.ToLower(method), "requestBody"}
		if ref, ok := a.o.at("paths", template, strings.ToLower(method))["requestBody"].(map[string]any)["$ref"].(string); ok {
			reqTokens = strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		}
		reqTokens = append(reqTokens, "content", "application/json", "schema")
		err = a.o.schema(t, reqTokens...).Validate(inst)
		switch {
		case err != nil && !a.invalid:
			t.Errorf("%s %s: request %s does not match the document: %v", method, template, body, err)
		case err == nil && a.invalid:
			t.Errorf("%s %s: request %s is meant to be invalid, but the document allows it", method, template, body)
		}
		a.invalid = false
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bearer)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, f := range opts {
		f(req)
	}
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	status := fmt.Sprint(resp.StatusCode)
	a.exercised[method+" "+template+" "+status] = true
	answer := a.o.at("paths", template, strings.ToLower(method), "responses", status)
	if answer == nil {
		t.Fatalf("%s %s answered %s, which openapi.yaml does not list: %s", method, path, status, raw)
	}
	var decoded map[string]any
	if _, ok := answer["content"].(map[string]any)["application/json"]; !ok {
		return resp.StatusCode, nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v: %s", method, path, err, raw)
	}
	respTokens := []string{"paths", template, strings.ToLower(method), "responses", status}
	if ref, ok := a.o.at("paths", template, strings.ToLower(method))["responses"].(map[string]any)[status].(map[string]any)["$ref"].(string); ok {
		respTokens = strings.Split(strings.TrimPrefix(ref, "#/"), "/")
	}
	respTokens = append(respTokens, "content", "application/json", "schema")
	if err := a.o.schema(t, respTokens...).Validate(inst); err != nil {
		t.Errorf("%s %s answered %s with %s, which does not match openapi.yaml: %v", method, path, status, raw, err)
	}
	_ = json.Unmarshal(raw, &decoded)
	if resp.StatusCode != http.StatusOK {
		code := decoded["error"].(map[string]any)["code"].(string)
		var named []string
		for _, m := range codeInDescription.FindAllStringSubmatch(answer["description"].(string), -1) {
			named = append(named, m[1])
		}
		if !slices.Contains(named, code) {
			t.Errorf("%s %s answered %s %s; openapi.yaml's %s answer names %v", method, path, status, code, status, named)
		}
	}
	return resp.StatusCode, decoded
}

func (a *liveAPI) want(status, wantStatus int, what string, body map[string]any) {
	a.t.Helper()
	if status != wantStatus {
		a.t.Fatalf("%s: %d %v, want %d", what, status, body, wantStatus)
	}
}

// TestOpenAPIDescribesLiveAnswers drives every documented operation on a
// real handler through the cases an agent and an operator meet, and checks
// every request and answer against the document: its schemas (required
// fields, no undocumented ones, enums, RFC 3339 times) and the statuses and
// error codes it lists.
func TestOpenAPIDescribesLiveAnswers(t *testing.T) {
	clk := newClock()
	l := ledger.New(memory.New(clk.Now), ledger.Options{Clock: clk.Now, Caps: map[string]ledger.Cap{"tag": {Max: 1, Window: time.Hour}}})
	// Trials are sent by the gateway's dispatcher (tested in
	// ingress/dispatch); here one stands in that records what the
	// staging agent would have answered.
	trials := ledgerapi.WithTrials(func(ctx context.Context, q ledger.QueueItem, to string) (ledger.AttemptRecord, error) {
		return l.Queue().RecordTrial(ctx, q.Scope, q.EntryID, ledger.AttemptRecord{To: to, Outcome: "delivered", AgentStatus: 200})
	})
	srv := httptest.NewServer(ledgerapi.NewHandler(l, token, zap.NewNop(), trials))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	a := &liveAPI{t: t, o: loadOpenAPI(t), srv: srv, exercised: map[string]bool{}}
	ctx := context.Background()

	// Runs and a fenced conversation.
	st, run1 := a.call("POST", "/v1/runs", "/v1/runs", `{"scope":"conv_42","run_id":"chat:m1","mode":"supersede","context_at":"2026-03-01T11:59:59.500Z"}`)
	a.want(st, 200, "begin", run1)
	tok1 := run1["token"].(float64)
	st, body := a.call("POST", "/v1/runs/heartbeat", "/v1/runs/heartbeat", fmt.Sprintf(`{"scope":"conv_42","run_id":"chat:m1","token":%.0f}`, tok1))
	a.want(st, 200, "heartbeat", body)
	st, body = a.call("POST", "/v1/runs/heartbeat", "/v1/runs/heartbeat", `{"scope":"conv_42","run_id":"nope","token":1}`)
	a.want(st, 404, "heartbeat of an unknown run", body)
	st, claim := a.call("POST", "/v1/claims", "/v1/claims", fmt.Sprintf(`{"scope":"conv_42","intent":"reply","payload":{"answers":["m1"]},"run_id":"chat:m1","token":%.0f,"summary":"Thanks","conflict":"same-intent"}`, tok1))
	a.want(st, 200, "claim", claim)
	if claim["status"] != "claimed" {
		t.Fatalf("claim: %v", claim)
	}
	clk.Advance(time.Second)
	st, run2 := a.call("POST", "/v1/runs", "/v1/runs", `{"scope":"conv_42","run_id":"chat:m2","mode":"supersede","context_at":"2026-03-01T12:00:00.500Z"}`)
	a.want(st, 200, "begin a newer run", run2)
	tok2 := run2["token"].(float64)
	st, body = a.call("POST", "/v1/claims", "/v1/claims", fmt.Sprintf(`{"scope":"conv_42","intent":"reply","payload":{"answers":["m1","m2"]},"run_id":"chat:m2","token":%.0f,"conflict":"same-intent"}`, tok2))
	if a.want(st, 200, "claim under a pending reply", body); body["reason"] != "conversation_changed" || len(asSlice(body["conflicts"])) != 1 {
		t.Fatalf("claim under a pending reply: %v", body)
	}
	settle := fmt.Sprintf(`{"scope":"conv_42","entry_id":%q,"attempt":1,"outcome":"committed","value":{"message_id":"r7"}}`, claim["entry_id"])
	st, body = a.call("POST", "/v1/claims/settle", "/v1/claims/settle", settle)
	a.want(st, 200, "settle", body)
	st, body = a.call("POST", "/v1/claims/settle", "/v1/claims/settle", settle)
	a.want(st, 409, "settle twice", body)
	st, body = a.call("POST", "/v1/claims/settle", "/v1/claims/settle", `{"scope":"conv_42","entry_id":"0000","attempt":1,"outcome":"committed"}`)
	a.want(st, 404, "settle of nothing", body)
	st, body = a.call("POST", "/v1/claims", "/v1/claims", fmt.Sprintf(`{"scope":"conv_42","intent":"tag","payload":"billing","run_id":"chat:m1","token":%.0f}`, tok1))
	if a.want(st, 200, "stale run", body); body["reason"] != "superseded" {
		t.Fatalf("stale run: %v", body)
	}
	st, body = a.call("POST", "/v1/claims", "/v1/claims", fmt.Sprintf(`{"scope":"conv_42","intent":"reply","payload":{"answers":["m1"]},"run_id":"chat:m1","token":%.0f}`, tok1))
	if a.want(st, 200, "replay", body); body["status"] != "replayed" {
		t.Fatalf("replay: %v", body)
	}
	st, body = a.call("POST", "/v1/claims", "/v1/claims", `{"scope":"conv_42","intent":"reply","run_id":"nope","token":1}`)
	a.want(st, 404, "claim on an unknown run", body)
	st, body = a.call("POST", "/v1/check", "/v1/check", `{"scope":"conv_42","intent":"reply","payload":{"answers":["m1"]}}`)
	if a.want(st, 200, "check", body); body["done"] != true {
		t.Fatalf("check: %v", body)
	}
	st, body = a.call("POST", "/v1/check", "/v1/check", `{"scope":"conv_42","intent":"reply","payload":{"answers":["never"]}}`)
	a.want(st, 200, "check of nothing", body)

	// The loop breaker: a second tag in the hour trips the cap.
	for i, p := range []string{"a", "b"} {
		st, body = a.call("POST", "/v1/claims", "/v1/claims", fmt.Sprintf(`{"scope":"conv_42","intent":"tag","payload":%q,"run_id":"chat:m2","token":%.0f,"conflict":"none"}`, p, tok2))
		a.want(st, 200, "tag", body)
		if i == 0 {
			_, _ = l.Settle(ctx, ledger.ClaimRef{Scope: "conv_42", EntryID: body["entry_id"].(string), Attempt: 1}, ledger.OutcomeCommitted, nil, nil)
		} else if body["reason"] != "rate_limited" {
			t.Fatalf("tag past the cap: %v", body)
		}
	}
	st, body = a.call("GET", "/v1/caps", "/v1/caps", "")
	a.want(st, 200, "caps", body)
	st, body = a.call("GET", "/v1/escalations", "/v1/escalations?limit=10", "")
	a.want(st, 200, "escalations", body)
	esc := asSlice(body["escalations"])
	if len(esc) != 1 {
		t.Fatalf("escalations: %v", body)
	}
	st, body = a.call("GET", "/v1/scopes/{scope}/escalations", "/v1/scopes/conv_42/escalations", "")
	a.want(st, 200, "scope escalations", body)
	st, body = a.call("POST", "/v1/escalations/dismiss", "/v1/escalations/dismiss", fmt.Sprintf(`{"scope":"conv_42","id":%q,"by":"ops"}`, esc[0].(map[string]any)["id"]))
	a.want(st, 200, "dismiss", body)
	st, body = a.call("POST", "/v1/escalations/dismiss", "/v1/escalations/dismiss", `{"scope":"conv_42","id":"nope"}`)
	a.want(st, 404, "dismiss of nothing", body)

	st, body = a.call("GET", "/v1/scopes/{scope}/history", "/v1/scopes/conv_42/history", "")
	a.want(st, 200, "history", body)
	st, body = a.call("GET", "/v1/scopes/{scope}/timeline", "/v1/scopes/conv_42/timeline", "")
	a.want(st, 200, "timeline", body)
	st, body = a.call("POST", "/v1/runs/end", "/v1/runs/end", fmt.Sprintf(`{"scope":"conv_42","run_id":"chat:m2","token":%.0f,"reason":"answered"}`, tok2))
	a.want(st, 200, "end", body)
	st, body = a.call("POST", "/v1/runs/cancel", "/v1/runs/cancel", `{"scope":"conv_42","run_id":"chat:m1"}`)
	a.want(st, 200, "cancel", body)
	st, body = a.call("POST", "/v1/runs/end", "/v1/runs/end", `{"scope":"conv_42","run_id":"nope"}`)
	a.want(st, 404, "end of nothing", body)
	st, body = a.call("POST", "/v1/runs/cancel", "/v1/runs/cancel", `{"scope":"conv_42","run_id":"nope"}`)
	a.want(st, 404, "cancel of nothing", body)

	// An effect whose outcome is unknown, listed and resolved.
	st, claim = a.call("POST", "/v1/claims", "/v1/claims", `{"scope":"order_1001","intent":"refund","payload":{"cents":2500}}`)
	a.want(st, 200, "claim a refund", claim)
	st, body = a.call("POST", "/v1/claims/settle", "/v1/claims/settle", fmt.Sprintf(`{"scope":"order_1001","entry_id":%q,"attempt":1,"outcome":"unknown","error":"timeout"}`, claim["entry_id"]))
	if a.want(st, 200, "settle unknown", body); body["status"] != "ambiguous" {
		t.Fatalf("settle unknown: %v", body)
	}
	st, body = a.call("GET", "/v1/ambiguous", "/v1/ambiguous?limit=50", "")
	a.want(st, 200, "ambiguous", body)
	st, body = a.call("GET", "/v1/ambiguous", "/v1/ambiguous?limit=0", "")
	a.want(st, 400, "ambiguous with a bad limit", body)
	resolve := fmt.Sprintf(`{"scope":"order_1001","entry_id":%q,"outcome":"committed"}`, claim["entry_id"])
	st, body = a.call("POST", "/v1/entries/resolve", "/v1/entries/resolve", resolve)
	a.want(st, 200, "resolve", body)
	st, body = a.call("POST", "/v1/entries/resolve", "/v1/entries/resolve", resolve)
	a.want(st, 409, "resolve twice", body)
	st, body = a.call("POST", "/v1/entries/resolve", "/v1/entries/resolve", `{"scope":"order_1001","entry_id":"0000","outcome":"committed"}`)
	a.want(st, 404, "resolve of nothing", body)

	// Queued deliveries.
	key := ledger.Key{Scope: "gh:d-1", Intent: "deliver", Payload: map[string]string{"source": "gh", "eventId": "d-1"}}
	res, err := l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: "gh", EventID: "d-1", Scope: "gh:d-1", ContentType: "application/json", Body: []byte(`{"a":1}`), ReceivedAt: clk.Now()},
		Run:   ledger.RunOptions{RunID: "gh:d-1", Mode: ledger.ModeIndependent},
		Claim: ledger.ClaimRequest{Key: key, PendingTTL: time.Minute},
		Hold:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	st, body = a.call("POST", "/v1/deliveries/replay", "/v1/deliveries/replay", `{"source":"gh","event_id":"d-1"}`)
	a.want(st, 409, "replay while delivering", body)
	if _, err := l.Queue().FinishDelivery(ctx, ledger.Finish{Taken: ledger.Taken{OK: true, Item: res.Item, Run: res.Run, Claim: res.Claim},
		Status: ledger.DeliveryDead, Record: ledger.AttemptRecord{AgentStatus: 500, Answer: []byte("oops")}}); err != nil {
		t.Fatal(err)
	}
	st, body = a.call("GET", "/v1/deliveries", "/v1/deliveries?status=dead", "")
	a.want(st, 200, "list", body)
	st, body = a.call("GET", "/v1/deliveries", "/v1/deliveries?page=10", "")
	a.want(st, 200, "page", body)
	st, body = a.call("GET", "/v1/deliveries", "/v1/deliveries?status=lost", "")
	a.want(st, 400, "list with a bad status", body)
	st, body = a.call("GET", "/v1/deliveries/show", "/v1/deliveries/show?source=gh&event_id=d-1", "")
	a.want(st, 200, "show", body)
	st, body = a.call("GET", "/v1/scopes/{scope}/timeline", "/v1/scopes/gh:d-1/timeline?attempts=1", "")
	if a.want(st, 200, "timeline with attempts", body); len(asSlice(body["attempts"].(map[string]any)[res.Item.EntryID])) != 1 {
		t.Fatalf("timeline with attempts: %v", body)
	}
	st, body = a.call("GET", "/v1/conversations", "/v1/conversations?page=5&prefix=gh:", "")
	if a.want(st, 200, "conversations", body); len(asSlice(body["conversations"])) != 1 {
		t.Fatalf("conversations: %v", body)
	}
	st, body = a.call("GET", "/v1/conversations", "/v1/conversations?page=0", "")
	a.want(st, 400, "conversations with a bad page", body)
	st, body = a.call("GET", "/v1/deliveries/show", "/v1/deliveries/show?source=gh&event_id=nope", "")
	a.want(st, 404, "show of nothing", body)
	st, body = a.call("POST", "/v1/deliveries/trial", "/v1/deliveries/trial", `{"source":"gh","event_id":"d-1","to":"http://staging.test/events"}`)
	if a.want(st, 200, "trial", body); body["to"] != "http://staging.test/events" || body["n"] != float64(1) {
		t.Fatalf("trial: %v", body)
	}
	st, body = a.call("POST", "/v1/deliveries/trial", "/v1/deliveries/trial", `{"source":"gh","event_id":"d-1","to":"ftp://x"}`)
	a.want(st, 400, "trial to a URL that is not http", body)
	st, body = a.call("POST", "/v1/deliveries/trial", "/v1/deliveries/trial", `{"source":"gh","event_id":"nope","to":"http://staging.test/"}`)
	a.want(st, 404, "trial of nothing", body)
	st, body = a.call("GET", "/v1/deliveries/show", "/v1/deliveries/show?source=gh&event_id=d-1", "")
	if a.want(st, 200, "show", body); !strings.Contains(fmt.Sprint(body["attempts"]), "http://staging.test/events") {
		t.Fatalf("the trial is not among the event's attempts: %v", body["attempts"])
	}
	st, body = a.call("POST", "/v1/deliveries/replay", "/v1/deliveries/replay", `{"filter":{"status":"dead"}}`)
	a.want(st, 200, "replay", body)
	st, body = a.call("POST", "/v1/deliveries/replay", "/v1/deliveries/replay", `{"source":"gh","event_id":"nope"}`)
	a.want(st, 404, "replay of nothing", body)
	st, body = a.call("POST", "/v1/sources/pause", "/v1/sources/pause", `{"source":"gh"}`)
	a.want(st, 200, "pause", body)
	st, body = a.call("GET", "/v1/sources/paused", "/v1/sources/paused", "")
	a.want(st, 200, "paused", body)
	st, body = a.call("POST", "/v1/sources/resume", "/v1/sources/resume", `{"source":"gh"}`)
	a.want(st, 200, "resume", body)

	// This document, and the errors every endpoint shares.
	st, body = a.call("GET", "/v1/openapi.json", "/v1/openapi.json", "")
	if a.want(st, 200, "openapi.json", body); body["openapi"] != "3.1.0" {
		t.Fatalf("openapi.json: %v", body)
	}
	st, _ = a.call("GET", "/v1/openapi.yaml", "/v1/openapi.yaml", "")
	a.want(st, 200, "openapi.yaml", nil)
	a.invalid = true
	st, body = a.call("POST", "/v1/runs", "/v1/runs", `{"scope":"s","mode":"sideways"}`)
	a.want(st, 400, "bad mode", body)
	a.invalid = true
	st, body = a.call("POST", "/v1/runs", "/v1/runs", `{"scope":"s","surprise":1}`)
	a.want(st, 400, "unknown field", body)
	st, body = a.call("POST", "/v1/runs", "/v1/runs", `{"scope":"s"}`, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") })
	a.want(st, 415, "not JSON", body)
	st, body = a.call("POST", "/v1/runs", "/v1/runs", `{"scope":"`+strings.Repeat("x", ledgerapi.MaxBodyBytes)+`"}`)
	a.want(st, 413, "too large", body)
	st, body = a.call("GET", "/v1/caps", "/v1/caps", "", func(r *http.Request) { r.Header.Del("Authorization") })
	a.want(st, 401, "no token", body)

	// Every documented operation answered 200 at least once.
	for _, op := range a.o.operations() {
		if !a.exercised[op+" 200"] {
			t.Errorf("%s was never exercised with a 200 answer", op)
		}
	}
}

// A wrong method answers the documented 405 on every path.
func TestOpenAPIMethodNotAllowed(t *testing.T) {
	o := loadOpenAPI(t)
	srv := httptest.NewServer(ledgerapi.NewHandler(ledger.New(memory.New(nil), ledger.Options{}), token, zaptest.NewLogger(t)))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	for _, op := range o.operations() {
		method, template, _ := strings.Cut(op, " ")
		other := http.MethodPost
		if method == http.MethodPost {
			other = http.MethodGet
		}
		path := strings.ReplaceAll(template, "{scope}", "s")
		req, _ := http.NewRequest(other, srv.URL+path, nil)
		req.Header.Set("Authorization", bearer)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || o.at("paths", template, strings.ToLower(method), "responses", "405") == nil {
			t.Errorf("%s %s: %d, want 405 and a documented 405", other, template, resp.StatusCode)
		}
	}
}

// API.md's endpoint table lists exactly the document's operations, and its
// error table exactly the document's status and code pairs.
func TestAPIDocMatchesOpenAPI(t *testing.T) {
	o := loadOpenAPI(t)
	raw, err := os.ReadFile("API.md")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := regexp.MustCompile("`(GET|POST) (/v1/[^`?]*)[^`]*`")
	errorRow := regexp.MustCompile("^\\| (\\d{3}) \\| `([a-z_]+)` \\|")
	var listed []string
	errs := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if m := errorRow.FindStringSubmatch(line); m != nil {
			errs[m[1]+" "+m[2]] = true
			continue
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		for _, m := range endpoint.FindAllStringSubmatch(cell, -1) {
			if op := m[1] + " " + m[2]; !slices.Contains(listed, op) {
				listed = append(listed, op)
			}
		}
	}
	sort.Strings(listed)
	if documented := o.operations(); !slices.Equal(listed, documented) {
		t.Errorf("API.md's endpoints:\n%v\nopenapi.yaml's operations:\n%v", listed, documented)
	}
	// Every status and code pair any operation of the document answers.
	want := map[string]bool{}
	for _, op := range o.operations() {
		method, template, _ := strings.Cut(op, " ")
		for status := range o.at("paths", template, strings.ToLower(method), "responses") {
			if status == "200" {
				continue
			}
			desc, _ := o.at("paths", template, strings.ToLower(method), "responses", status)["description"].(string)
			for _, m := range codeInDescription.FindAllStringSubmatch(desc, -1) {
				want[status+" "+m[1]] = true
			}
		}
	}
	want["404 not_found"] = true // any path the API does not have
	for e := range want {
		if !errs[e] {
			t.Errorf("API.md's error table lacks %s", e)
		}
	}
	for e := range errs {
		if !want[e] {
			t.Errorf("API.md's error table lists %s, which no operation of openapi.yaml answers", e)
		}
	}
}
