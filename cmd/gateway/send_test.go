package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/examples/agent/agentcmd"
	"github.com/replyonce/gateway/examples/agent/fakechat"
	"github.com/replyonce/gateway/signatures"
)

// The README's Quickstart, in-process: the example agent with its built-in
// demo chat, `gateway serve --config configs/quickstart.yaml`, and `gateway
// send` twice with the same --event-id, with the README's arguments. Only
// the ports (kernel-chosen) and the ledger path (a temp dir) differ.
func TestQuickstart(t *testing.T) {
	raw, err := os.ReadFile("../../configs/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*signing_secret:\s*(\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("configs/quickstart.yaml has no forward.signing_secret")
	}
	forwardSecret := string(m[1])

	// The agent needs the gateway's admin address and the gateway the
	// agent's: with kernel-chosen ports, the agent talks to the admin API
	// through this proxy, pointed at the gateway once it listens.
	var admin atomic.Pointer[url.URL]
	ledgerProxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := admin.Load()
		if u == nil {
			http.Error(w, "gateway not up yet", http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(ledgerProxy.Close)

	// 1. go run ./examples/agent --signing-secret ... &
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan agentcmd.Addrs, 1)
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- agentcmd.Run(ctx, []string{"--listen", "127.0.0.1:0", "--ledger", ledgerProxy.URL,
			"--signing-secret", forwardSecret}, func(string) string { return "" }, func(a agentcmd.Addrs) { addrs <- a })
	}()
	var ag agentcmd.Addrs
	select {
	case ag = <-addrs:
	case err := <-agentDone:
		cancel()
		t.Fatalf("agent stopped: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("agent did not start")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-agentDone; err != nil {
			t.Errorf("agent returned %v", err)
		}
	})

	// 2. go run ./cmd/gateway serve --config configs/quickstart.yaml
	dir := t.TempDir()
	cfg := replaceOnce(t, string(raw), map[string]string{
		"listen: 127.0.0.1:8080":       "listen: 127.0.0.1:0",
		"{listen: 127.0.0.1:8081}":     "{listen: 127.0.0.1:0}",
		"path: data/ledger.db":         "path: " + filepath.Join(dir, "ledger.db"),
		"http://127.0.0.1:9000/events": "http://" + ag.Listen + "/events",
	})
	serveCfg := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(serveCfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, serveCfg)
	admin.Store(&url.URL{Scheme: "http", Host: g.admin})

	// 3. go run ./cmd/gateway send --config configs/quickstart.yaml --source demo ...,
	// with the config naming where the gateway listens.
	sendCfg := filepath.Join(dir, "send.yaml")
	if err := os.WriteFile(sendCfg, []byte(strings.Replace(cfg, "listen: 127.0.0.1:0", "listen: "+g.public, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	send := func() string {
		var out bytes.Buffer
		app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
		if err := app.Run(context.Background(), []string{"send", "--config", sendCfg, "--source", "demo",
			"--conversation", "c1", "--message", "Where is my order?", "--event-id", "evt_1"}); err != nil {
			t.Fatalf("send: %v\n%s\n%s", err, out.String(), g.stderr.String())
		}
		return out.String()
	}
	if out := send(); !strings.Contains(out, "200 OK") || !strings.Contains(out, `"status":"delivered"`) {
		t.Fatalf("first send:\n%s\n%s", out, g.stderr.String())
	}
	if out := send(); !strings.Contains(out, `"status":"duplicate"`) {
		t.Fatalf("second send:\n%s", out)
	}

	// The demo chat holds the customer message and exactly one reply to it.
	resp, err := http.Get(ag.Chat + "/conversations/c1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var conv fakechat.Conversation
	if err := json.NewDecoder(resp.Body).Decode(&conv); err != nil {
		t.Fatal(err)
	}
	var customer, replies []fakechat.Message
	for _, msg := range conv.Messages {
		if msg.From == "customer" {
			customer = append(customer, msg)
		} else {
			replies = append(replies, msg)
		}
	}
	if len(customer) != 1 || customer[0].ID != "evt_1" || customer[0].Text != "Where is my order?" {
		t.Errorf("customer messages: %+v", customer)
	}
	if len(replies) != 1 || len(replies[0].Answers) != 1 || replies[0].Answers[0] != "evt_1" {
		t.Errorf("replies: %+v, want exactly one answering evt_1", replies)
	}
}

// replaceOnce makes each replacement, failing if its text is not in s
// exactly once (the quickstart config changed under the test).
func replaceOnce(t *testing.T, s string, r map[string]string) string {
	t.Helper()
	for old, repl := range r {
		if n := strings.Count(s, old); n != 1 {
			t.Fatalf("configs/quickstart.yaml has %q %d times, want once", old, n)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	return s
}

// send --conversation makes the default event a chat message, with the
// event id as the message id; without it the event is unchanged.
func TestSendChatMessageEvent(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for name, c := range map[string]struct {
		templates []string
		chat      chatMessage
		want      map[string]any
	}{
		"header id": {[]string{"{header:webhook-id}"}, chatMessage{"c1", "hi"},
			map[string]any{"type": "message.created", "created": 1.7e9, "conversation_id": "c1", "message_id": "evt_1", "text": "hi"}},
		"json id": {[]string{"{json:id}"}, chatMessage{"c1", ""},
			map[string]any{"type": "message.created", "created": 1.7e9, "conversation_id": "c1", "message_id": "evt_1",
				"text": "Hello from gateway send", "id": "evt_1"}},
		"no chat": {[]string{"{json:id}"}, chatMessage{},
			map[string]any{"type": "replyonce.test", "created": 1.7e9, "message": "test event from gateway send", "id": "evt_1"}},
	} {
		req := &signatures.Request{Header: http.Header{}}
		if err := sampleEvent(req, c.templates, "evt_1", now, c.chat); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got map[string]any
		if err := json.Unmarshal(req.Body, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(c.want)
		if string(gb) != string(wb) {
			t.Errorf("%s: body %s, want %s", name, gb, wb)
		}
	}
	req := &signatures.Request{Header: http.Header{}}
	if err := sampleEvent(req, []string{"{form:MessageSid}"}, "evt_1", now, chatMessage{"c1", "hi"}); err == nil {
		t.Error("--conversation with a form source: no error")
	}
	app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(nil)}
	for _, args := range [][]string{
		{"send", "--config", "x.yaml", "--source", "demo", "--message", "hi"},
		{"send", "--config", "x.yaml", "--source", "demo", "--conversation", "c1", "--body", "b.json"},
	} {
		var ue usageError
		if err := app.Run(context.Background(), args); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// send --body with the same --event-id twice is one event to the gateway,
// whichever way the provider carries the id: a header (GitHub, Standard
// Webhooks, whose webhook-id must not change between sends) or the body
// (Stripe, where the id printed is the body's).
func TestSendBodyTwiceIsOneEvent(t *testing.T) {
	agent := newSink(t)
	extra := `  github:
    provider: github
    secrets: [gh-secret]
    forward: {url: ` + agent.srv.URL + `/gh, mode: inline}
  std:
    provider: standard-webhooks
    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
    forward: {url: ` + agent.srv.URL + `/std, mode: inline}
`
	cfg := writeConfig(t, "{kind: memory}", extra, agent.srv.URL)
	g := startGateway(t, cfg)
	sendCfg := filepath.Join(t.TempDir(), "send.yaml")
	raw, _ := os.ReadFile(cfg)
	if err := os.WriteFile(sendCfg, []byte(strings.Replace(string(raw), "listen: 127.0.0.1:0", "listen: "+g.public, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	send := func(source, body, eventID string, more ...string) (string, string) {
		t.Helper()
		bodyFile := filepath.Join(t.TempDir(), "body.json")
		if err := os.WriteFile(bodyFile, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		app := &App{Stdout: &out, Stderr: &errOut, LookupEnv: env(nil), Clock: time.Now}
		args := append([]string{"send", "--config", sendCfg, "--source", source, "--body", bodyFile, "--event-id", eventID}, more...)
		if err := app.Run(context.Background(), args); err != nil {
			t.Fatalf("send %s: %v\n%s", source, err, out.String())
		}
		return out.String(), errOut.String()
	}
	for _, c := range []struct{ source, body, id string }{
		{"github", `{"action":"opened","number":1}`, "gh-delivery-1"},
		{"std", `{"type":"invoice.paid","data":{}}`, "msg_std_1"},
		{"stripe", `{"id":"evt_body_1","type":"invoice.paid"}`, "evt_body_1"},
	} {
		before := agent.count()
		first, warn := send(c.source, c.body, c.id)
		if !strings.Contains(first, `"status":"delivered"`) || !strings.Contains(first, "(event "+c.id+")") || warn != "" {
			t.Errorf("%s first send:\n%s%s", c.source, first, warn)
		}
		second, _ := send(c.source, c.body, c.id)
		if !strings.Contains(second, `"status":"duplicate"`) {
			t.Errorf("%s second send:\n%s", c.source, second)
		}
		if agent.count() != before+1 {
			t.Errorf("%s: the agent got %d forwards, want 1", c.source, agent.count()-before)
		}
	}
	// Stripe reads the id from the body: a different --event-id is named
	// as such, and the id printed is the real one.
	out, warn := send("stripe", `{"id":"evt_body_2"}`, "evt_other", "--header", "X-Test: 1", "--content-type", "application/json")
	if !strings.Contains(out, "(event evt_body_2)") || !strings.Contains(warn, `--event-id "evt_other" is not the event id`) {
		t.Errorf("mismatched --event-id:\n%s%s", out, warn)
	}
	// --source names the sources there are.
	app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(nil)}
	err := app.Run(context.Background(), []string{"send", "--config", sendCfg, "--source", "strip"})
	if err == nil || !strings.Contains(err.Error(), "did you mean `stripe`?") || !strings.Contains(err.Error(), "sources: github, std, stripe") {
		t.Errorf("unknown source: %v", err)
	}
}

// What send puts on the wire: --header and --content-type arrive as
// given, and a Standard Webhooks webhook-id is the same for one
// --event-id and different for another.
func TestSendHeadersAndStableWebhookID(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		_, _ = w.Write([]byte(`{"status":"delivered"}`))
	}))
	defer rec.Close()
	cfg := writeConfig(t, "{kind: memory}", `  std:
    provider: standard-webhooks
    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
    forward: {url: http://127.0.0.1:9/std, mode: inline}
`, "http://127.0.0.1:9")
	bodyFile := filepath.Join(t.TempDir(), "body.txt")
	if err := os.WriteFile(bodyFile, []byte("plain text body"), 0o600); err != nil {
		t.Fatal(err)
	}
	send := func(eventID string, more ...string) http.Header {
		t.Helper()
		app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
		args := append([]string{"send", "--config", cfg, "--source", "std", "--body", bodyFile, "--event-id", eventID, "--to", rec.URL}, more...)
		if err := app.Run(context.Background(), args); err != nil {
			t.Fatalf("send: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}
	a := send("order-42", "--header", "X-Tenant: acme", "--header", "X-Trace:abc", "--content-type", "text/plain; charset=utf-8")
	if a.Get("X-Tenant") != "acme" || a.Get("X-Trace") != "abc" || a.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("headers on the wire: %v", a)
	}
	b := send("order-42")
	c := send("order-43")
	if a.Get("Webhook-Id") == "" || a.Get("Webhook-Id") != b.Get("Webhook-Id") {
		t.Fatalf("webhook-id %q then %q for one --event-id, want the same", a.Get("Webhook-Id"), b.Get("Webhook-Id"))
	}
	if c.Get("Webhook-Id") == a.Get("Webhook-Id") {
		t.Fatalf("webhook-id %q for two event ids", c.Get("Webhook-Id"))
	}
}

// Client commands read only the fields they use: `send --source stripe`
// needs Stripe's secret, not the admin token, the forward signing secret
// or another source's secret, and `events list` needs the admin address
// and token, not any source's secret. A variable they do use, unset, is
// still named.
func TestClientCommandsNeedOnlyTheirVariables(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"deliveries":[]}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "c.yaml")
	file := `admin: {listen: ` + strings.TrimPrefix(srv.URL, "http://") + `, token: ${ADMIN_TOKEN}}
store: {kind: memory}
sources:
  stripe:
    provider: stripe
    secrets: [${MY_STRIPE_SECRET}]
    forward: {url: "http://127.0.0.1:9/", signing_secret: "${FORWARD_SECRET}"}
  gh:
    provider: github
    secrets: [${GH_SECRET}]
    forward: {url: "http://127.0.0.1:9/"}
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(vars map[string]string, args ...string) error {
		app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(vars), Clock: time.Now}
		return app.Run(context.Background(), args)
	}
	if err := run(map[string]string{"MY_STRIPE_SECRET": "whsec_abc"}, "send", "--config", path, "--source", "stripe", "--to", srv.URL+"/hooks/stripe"); err != nil {
		t.Fatalf("send with only Stripe's secret set: %v", err)
	}
	if err := run(map[string]string{"ADMIN_TOKEN": "0123456789abcdef0"}, "events", "list", "--config", path); err != nil {
		t.Fatalf("events list with only the admin token set: %v", err)
	}
	if got.Load() != 2 {
		t.Fatalf("%d requests reached the server, want 2", got.Load())
	}
	err := run(nil, "send", "--config", path, "--source", "stripe", "--to", srv.URL+"/hooks/stripe")
	if err == nil || !strings.Contains(err.Error(), "sources.stripe.secrets[0]: ${MY_STRIPE_SECRET} is not set") || strings.Contains(err.Error(), "GH_SECRET") {
		t.Fatalf("send without Stripe's secret: %v, want only that variable named", err)
	}
	err = run(nil, "events", "list", "--config", path)
	if err == nil || !strings.Contains(err.Error(), "admin.token: ${ADMIN_TOKEN} is not set") || strings.Contains(err.Error(), "MY_STRIPE_SECRET") {
		t.Fatalf("events list without the admin token: %v, want only that variable named", err)
	}
}
