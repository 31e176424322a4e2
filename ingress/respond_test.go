package ingress_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

const twilioToken = "twilio-auth-token-12ab"

var discordSeed = bytes.Repeat([]byte{5}, ed25519.SeedSize)

// respondSources are inline sources whose agent answers the provider.
func respondSources(limit int64) []ingress.SourceConfig {
	agent := func(c ingress.SourceConfig) ingress.SourceConfig {
		c.Forward.Respond, c.Forward.RespondLimit = ingress.RespondAgent, ingress.ByteSize(limit)
		c.Forward.Queue.Mode = dispatch.ModeInline
		return c
	}
	pub := ed25519.NewKeyFromSeed(discordSeed).Public().(ed25519.PublicKey)
	return []ingress.SourceConfig{
		agent(ingress.SourceConfig{Name: "slack", Provider: "slack", Signature: signatures.Config{Secrets: []string{slackSecret}}}),
		agent(ingress.SourceConfig{Name: "discord", Provider: "discord", Signature: signatures.Config{Secrets: []string{hex.EncodeToString(pub)}}}),
		agent(ingress.SourceConfig{Name: "twilio", Provider: "twilio",
			Signature: signatures.Config{Secrets: []string{twilioToken}, URL: "https://gw.example.com/hooks/twilio"}}),
		// The same provider with the gateway answering, for contrast.
		{Name: "slack-gw", Provider: "slack", Signature: signatures.Config{Secrets: []string{slackSecret}}},
	}
}

// providerRequest signs one request as the provider would; calling the
// result again gives an identical retry.
func (h *harness) providerRequest(t *testing.T, source, provider string, hdr http.Header, body []byte) func() *http.Request {
	t.Helper()
	cfg := signatures.Config{}
	url := ""
	switch provider {
	case "slack":
		cfg.Secrets = []string{slackSecret}
	case "discord":
		cfg.Secrets = []string{hex.EncodeToString(discordSeed)}
	case "twilio":
		cfg.Secrets, cfg.URL = []string{twilioToken}, "https://gw.example.com/hooks/twilio"
		url = cfg.URL
	}
	body = sign(t, provider, cfg, h.clock.Now(), http.MethodPost, url, hdr, body)
	return func() *http.Request { return h.newRequest(t, http.MethodPost, "/hooks/"+source, hdr, body) }
}

func formHeader() http.Header {
	return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
}

// slashCommand is a Slack slash command as Slack posts it.
func slashCommand(triggerID, text string) []byte {
	return []byte(url.Values{"token": {"gIkuvaNzQIHg97ATvDxqgjtO"}, "team_id": {"T0001"}, "team_domain": {"example"},
		"channel_id": {"C2147483705"}, "channel_name": {"support"}, "user_id": {"U2147483697"}, "user_name": {"ana"},
		"command": {"/refund"}, "text": {text}, "api_app_id": {"A123456"},
		"response_url": {"https://hooks.slack.com/commands/1234/5678"}, "trigger_id": {triggerID}}.Encode())
}

// blockAction is a Slack interactivity payload (a button click).
func blockAction(triggerID string) []byte {
	payload := `{"type":"block_actions","team":{"id":"T0001"},"user":{"id":"U2147483697"},"api_app_id":"A123456",` +
		`"trigger_id":"` + triggerID + `","container":{"type":"message","message_ts":"1700000000.000100"},` +
		`"actions":[{"action_id":"approve","block_id":"b1","type":"button","value":"refund-42","action_ts":"1700000001.000200"}]}`
	return []byte(url.Values{"payload": {payload}}.Encode())
}

// The agent's answer reaches Slack, Discord and Twilio as the agent wrote
// it, status, Content-Type and body; a retry of the same request is
// answered with the stored answer, and the agent is not called again.
func TestRespondAgentAnswersTheProvider(t *testing.T) {
	h := newHarness(t, respondSources(0)...)
	type agentAnswer struct{ contentType, body string }
	slack := agentAnswer{"application/json", `{"response_type":"ephemeral","text":"Refund 42 queued"}`}
	discord := agentAnswer{"application/json", `{"type":4,"data":{"content":"Order 42 is on its way"}}`}
	twiml := agentAnswer{"text/xml; charset=utf-8", `<?xml version="1.0" encoding="UTF-8"?><Response><Message>Got it: order 42</Message></Response>`}
	cases := []struct {
		name, source, provider, eventID string
		hdr                             http.Header
		body                            []byte
		agent                           agentAnswer
	}{
		{"slack slash command", "slack", "slack", "13345224609.738474920.8088930838d88f008e5", formHeader(),
			slashCommand("13345224609.738474920.8088930838d88f008e5", "42"), slack},
		// A button click is acknowledged with an empty 200.
		{"slack interactivity", "slack", "slack", "13345224609.738474920.8088930838d88f008e0", formHeader(),
			blockAction("13345224609.738474920.8088930838d88f008e0"), agentAnswer{}},
		{"discord interaction", "discord", "discord", "1157412345678901234", http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"id":"1157412345678901234","application_id":"11","type":2,"token":"tok","version":1,"data":{"id":"22","name":"order","type":1}}`),
			discord},
		{"twilio sms", "twilio", "twilio", "SM0123456789abcdef0123456789abcdef:received", formHeader(),
			[]byte(url.Values{"MessageSid": {"SM0123456789abcdef0123456789abcdef"}, "SmsStatus": {"received"}, "MessageStatus": {"received"},
				"From": {"+15005550006"}, "To": {"+15005550001"}, "Body": {"where is order 42"}, "AccountSid": {"AC0123"}}.Encode()),
			twiml},
	}
	byEvent := map[string]agentAnswer{}
	for _, tc := range cases {
		byEvent[tc.eventID] = tc.agent
	}
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		a := byEvent[r.Header.Get(forward.HeaderEventID)]
		if a.contentType != "" {
			w.Header().Set("Content-Type", a.contentType)
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(a.body))
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := h.providerRequest(t, tc.source, tc.provider, tc.hdr, tc.body)
			for _, what := range []string{"first delivery", "retry"} {
				r := h.do(t, req())
				wantStatus(t, r, http.StatusOK)
				if string(r.Body) != tc.agent.body {
					t.Fatalf("%s: the provider heard %q, want the agent's %q", what, r.Body, tc.agent.body)
				}
				if got := r.Header.Get("Content-Type"); got != tc.agent.contentType {
					t.Fatalf("%s: Content-Type %q, want the agent's %q", what, got, tc.agent.contentType)
				}
				if n := h.sink.count(tc.eventID); n != 1 {
					t.Fatalf("after the %s the agent got event %s %d times, want once", what, tc.eventID, n)
				}
			}
		})
	}
}

// A duplicate is answered from the deliver entry's value: a second gateway
// on the same store, with no replay memory of its own, answers a retry of
// a Discord interaction with the agent's body without calling the agent.
func TestRespondDuplicateAnswerComesFromTheStore(t *testing.T) {
	h := newHarness(t, respondSources(0)...)
	const body = `{"type":4,"data":{"content":"stored answer"}}`
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
	req := h.providerRequest(t, "discord", "discord", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"id":"1157400000000000001","type":2,"token":"t","version":1,"data":{"name":"order"}}`))
	if r := h.do(t, req()); string(r.Body) != body {
		t.Fatalf("first delivery answered %s", r)
	}
	e := h.deliverEntry(t, "discord:1157400000000000001")
	if !bytes.Contains(e.Value, []byte(`"answer":{"status":200,"contentType":"application/json","body":"`)) {
		t.Fatalf("the deliver entry's value %s does not keep the answer", e.Value)
	}

	var sources []*ingress.Source
	for _, c := range respondSources(0) {
		c.Forward.URL = h.sink.URL
		s, err := ingress.NewSource(c)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, s)
	}
	gw2, err := ingress.New(ingress.Options{Sources: sources, Clock: h.clock.Now, Forwarder: forward.New(nil, nil),
		Ledger: ledger.New(h.store, ledger.Options{Clock: h.clock.Now, ReplayCache: -1})})
	if err != nil {
		t.Fatal(err)
	}
	second := req()
	rec := httptest.NewRecorder()
	gw2.ServeHTTP(rec, second)
	gw2.Wait()
	if rec.Code != http.StatusOK || rec.Body.String() != body || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("the other instance answered %d %q %q, want 200 and the stored answer", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if n := h.sink.count("1157400000000000001"); n != 1 {
		t.Fatalf("the agent got the interaction %d times, want once", n)
	}
}

// An answer over forward.respond_limit is not passed on: the event is
// delivered, the provider hears the gateway's JSON saying why (first
// delivery and duplicates alike), and the log warns.
func TestRespondAnswerOverTheLimit(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	const limit = 64
	h := newLoggedHarness(t, zap.New(core), respondSources(limit)...)
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"text":"` + strings.Repeat("x", limit) + `"}`))
	})
	req := h.providerRequest(t, "slack", "slack", formHeader(), slashCommand("1.2.big", "everything"))
	for _, want := range []string{"delivered", "duplicate"} {
		r := h.do(t, req())
		wantAnswer(t, r, want, "1.2.big", "slack:1.2.big")
		if !bytes.Contains(r.Body, []byte(`"agent_answer":"too_large"`)) {
			t.Fatalf("%s: answer %s does not say the agent's answer was too large", want, r.Body)
		}
	}
	if n := h.sink.count("1.2.big"); n != 1 {
		t.Fatalf("the agent got the command %d times, want once", n)
	}
	warned := logs.FilterMessage("webhook").FilterLevelExact(zap.WarnLevel).FilterFieldKey("note").Len()
	if warned != 2 {
		t.Fatalf("%d warn lines with a note, want one per answer: %v", warned, logs.All())
	}
}

// Failures keep the answers table: an agent 5xx is a 503 the provider
// retries (its body never passed on), a rejection is the gateway's 200,
// and the gateway's own answers are unchanged for a source without
// respond: agent.
func TestRespondAgentFailuresKeepTheGatewaysAnswers(t *testing.T) {
	h := newHarness(t, respondSources(0)...)
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.Header.Get(forward.HeaderEventID) {
		case "t.500":
			if n == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte("agent stack trace"))
				return
			}
		case "t.400":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("bad command"))
			return
		}
		_, _ = w.Write([]byte(`{"text":"done"}`))
	})
	req := h.providerRequest(t, "slack", "slack", formHeader(), slashCommand("t.500", "x"))
	r := h.do(t, req())
	wantStatus(t, r, http.StatusServiceUnavailable)
	if bytes.Contains(r.Body, []byte("stack trace")) {
		t.Fatalf("the agent's 500 body reached the provider: %s", r.Body)
	}
	if r = h.do(t, req()); string(r.Body) != `{"text":"done"}` {
		t.Fatalf("the retry after a 503 answered %s, want the agent's answer", r)
	}
	wantAnswer(t, h.do(t, h.providerRequest(t, "slack", "slack", formHeader(), slashCommand("t.400", "x"))()), "rejected", "t.400", "slack:t.400")

	r = h.do(t, h.providerRequest(t, "slack-gw", "slack", formHeader(), slashCommand("t.gw", "x"))())
	wantAnswer(t, r, "delivered", "t.gw", "slack-gw:t.gw")
}

// forward.respond: agent is refused where the agent cannot answer, naming
// the field.
func TestRespondConfigErrors(t *testing.T) {
	base := func(mod func(*ingress.SourceConfig)) ingress.SourceConfig {
		c := ingress.SourceConfig{Name: "s", Provider: "slack", Signature: signatures.Config{Secrets: []string{slackSecret}},
			Forward: ingress.ForwardConfig{Target: forward.Target{URL: "http://127.0.0.1:9/"}, Respond: ingress.RespondAgent, Queue: dispatch.Policy{Mode: dispatch.ModeInline}}}
		mod(&c)
		return c
	}
	for _, tc := range []struct {
		name, field, says string
		cfg               ingress.SourceConfig
	}{
		{"queued", "sources.s.forward.respond", "forward.mode: inline", base(func(c *ingress.SourceConfig) { c.Forward.Queue.Mode = dispatch.ModeQueued })},
		{"split", "sources.s.forward.respond", "split", base(func(c *ingress.SourceConfig) {
			c.Split, c.EventID = "{json:events}", []string{"{json:id}"}
		})},
		{"unknown", "sources.s.forward.respond", "gateway, agent", base(func(c *ingress.SourceConfig) { c.Forward.Respond = "provider" })},
		{"limit without agent", "sources.s.forward.respond_limit", "respond: agent", base(func(c *ingress.SourceConfig) {
			c.Forward.Respond, c.Forward.RespondLimit = "", 1024
		})},
		{"limit too big", "sources.s.forward.respond_limit", "1MiB", base(func(c *ingress.SourceConfig) { c.Forward.RespondLimit = 2 << 20 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ingress.NewSource(tc.cfg)
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("NewSource: %v; want a field error on %s saying %q", err, tc.field, tc.says)
			}
		})
	}
	if _, err := ingress.NewSource(base(func(*ingress.SourceConfig) {})); err != nil {
		t.Fatalf("an inline source with respond: agent: %v", err)
	}
}

// Any 2xx passes: a 204 reaches the provider as a 204, and so does its
// duplicate.
func TestRespondAgentNoContent(t *testing.T) {
	h := newHarness(t, respondSources(0)...)
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusNoContent) })
	req := h.providerRequest(t, "slack", "slack", formHeader(), blockAction("t.204"))
	for _, what := range []string{"first delivery", "retry"} {
		r := h.do(t, req())
		if r.Status != http.StatusNoContent || len(r.Body) != 0 {
			t.Fatalf("%s: %s, want the agent's 204", what, r)
		}
	}
	if n := h.sink.count("t.204"); n != 1 {
		t.Fatalf("the agent got the click %d times, want once", n)
	}
}
