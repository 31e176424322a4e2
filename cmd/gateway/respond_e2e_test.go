package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/signatures"
)

// answeringAgent answers each forwarded event with a body of its own,
// chosen by source, and counts what it got per event id.
type answeringAgent struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]int
}

var agentAnswers = map[string]struct{ contentType, body string }{
	"slack":   {"application/json", `{"response_type":"in_channel","text":"Refund for order 42 is on its way"}`},
	"discord": {"application/json", `{"type":4,"data":{"content":"Order 42 ships tomorrow","flags":64}}`},
	"twilio":  {"text/xml", `<?xml version="1.0" encoding="UTF-8"?><Response><Message>Order 42 ships tomorrow</Message></Response>`},
	"big":     {"application/json", `{"text":"` + strings.Repeat("long ", 400) + `"}`},
}

func newAnsweringAgent(t *testing.T) *answeringAgent {
	a := &answeringAgent{got: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		source := r.Header.Get("Replyonce-Source")
		a.mu.Lock()
		a.got[source+" "+r.Header.Get("Replyonce-Event-Id")]++
		a.mu.Unlock()
		ans := agentAnswers[source]
		w.Header().Set("Content-Type", ans.contentType)
		w.Header().Set("Set-Cookie", "agent-session=secret") // never passed on
		_, _ = w.Write([]byte(ans.body))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *answeringAgent) count(source, eventID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[source+" "+eventID]
}

// Through the real gateway, on every store, with the replay memory off so
// duplicates are answered from the store: a Slack slash command, a Slack
// button click, a Discord interaction and a Twilio SMS are answered with
// the agent's body; their retries with the stored body, the agent not
// called again; an answer over respond_limit gets the gateway's JSON.
func TestRespondAgentThroughServe(t *testing.T) {
	const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	const twilioToken = "twilio-e2e-token"
	seed := bytes.Repeat([]byte{3}, ed25519.SeedSize)
	pub := hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	for name, store := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			agent := newAnsweringAgent(t)
			cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: ""}
store: %[1]s
ledger: {replay_cache: -1}
sources:
  slack:
    provider: slack
    secrets: [%[3]s]
    scope: ["{json:event.channel}", "{form:channel_id}", "{form:payload|json:channel.id}"]
    forward: {url: %[2]s, timeout: 2s, mode: inline, respond: agent}
  discord:
    provider: discord
    secrets: [%[4]s]
    forward: {url: %[2]s, mode: inline, respond: agent}
  twilio:
    provider: twilio
    secrets: [%[5]s]
    url: https://gw.example.com/hooks/twilio
    forward: {url: %[2]s, mode: inline, respond: agent}
  big:
    provider: slack
    secrets: [%[3]s]
    forward: {url: %[2]s, mode: inline, respond: agent, respond_limit: 1KiB}
`, store, agent.srv.URL, slackSecret, pub, twilioToken)
			path := filepath.Join(t.TempDir(), "gateway.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			g := startGateway(t, path)
			client := newClient(t)
			suffix := fmt.Sprintf("%s.%d", name, time.Now().UnixNano())

			signed := func(source, provider, secret, signURL string, hdr http.Header, body []byte) func() *http.Request {
				cfg := signatures.Config{Secrets: []string{secret}, URL: signURL}
				s, err := signatures.NewSigner(provider, cfg)
				if err != nil {
					t.Fatal(err)
				}
				r := &signatures.Request{Method: http.MethodPost, URL: signURL, Header: hdr, Body: body}
				if err := s.Sign(r, time.Now()); err != nil {
					t.Fatal(err)
				}
				return func() *http.Request {
					req, err := http.NewRequest(http.MethodPost, g.hook(source), bytes.NewReader(r.Body))
					if err != nil {
						t.Fatal(err)
					}
					req.Header = r.Header.Clone()
					return req
				}
			}
			form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			slash := url.Values{"command": {"/refund"}, "text": {"42"}, "team_id": {"T1"}, "channel_id": {"C1"}, "user_id": {"U1"},
				"response_url": {"https://hooks.slack.com/commands/T1/1/x"}, "trigger_id": {"slash." + suffix}}.Encode()
			click := url.Values{"payload": {`{"type":"block_actions","trigger_id":"click.` + suffix + `","channel":{"id":"C1"},` +
				`"actions":[{"action_id":"approve","action_ts":"1700000001.000200"}]}`}}.Encode()
			interaction := `{"id":"9` + fmt.Sprint(time.Now().UnixNano()) + `","type":2,"token":"tok","version":1,"data":{"name":"order"}}`
			sms := url.Values{"MessageSid": {"SM" + suffix}, "MessageStatus": {"received"}, "Body": {"where is 42"}, "From": {"+15005550006"}}.Encode()
			for _, tc := range []struct {
				name, source, eventID string
				req                   func() *http.Request
				wantBody, wantType    string
			}{
				{"slack slash command", "slack", "slash." + suffix, signed("slack", "slack", slackSecret, "", form.Clone(), []byte(slash)),
					agentAnswers["slack"].body, "application/json"},
				{"slack interactivity", "slack", "click." + suffix, signed("slack", "slack", slackSecret, "", form.Clone(), []byte(click)),
					agentAnswers["slack"].body, "application/json"},
				{"discord interaction", "discord", strings.Split(strings.TrimPrefix(interaction, `{"id":"`), `"`)[0],
					signed("discord", "discord", hex.EncodeToString(seed), "", http.Header{"Content-Type": {"application/json"}}, []byte(interaction)),
					agentAnswers["discord"].body, "application/json"},
				{"twilio twiml", "twilio", "SM" + suffix + ":received",
					signed("twilio", "twilio", twilioToken, "https://gw.example.com/hooks/twilio", form.Clone(), []byte(sms)),
					agentAnswers["twilio"].body, "text/xml"},
			} {
				for _, what := range []string{"first", "retry"} {
					resp, err := client.Do(tc.req())
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || string(body) != tc.wantBody || resp.Header.Get("Content-Type") != tc.wantType {
						t.Fatalf("%s, %s delivery: %d %q %q; want 200, %s and the agent's body %q\n%s", tc.name, what, resp.StatusCode,
							resp.Header.Get("Content-Type"), body, tc.wantType, tc.wantBody, g.stderr.String())
					}
					if c := resp.Header.Get("Set-Cookie"); c != "" {
						t.Fatalf("%s: the agent's Set-Cookie %q reached the provider", tc.name, c)
					}
					if n := agent.count(tc.source, tc.eventID); n != 1 {
						t.Fatalf("%s, after the %s delivery: the agent got it %d times, want once", tc.name, what, n)
					}
				}
			}

			// Over the limit: the event is delivered once, and both answers are
			// the gateway's JSON saying the agent's answer was too large.
			big := signed("big", "slack", slackSecret, "", form.Clone(), []byte(url.Values{"command": {"/report"}, "trigger_id": {"big." + suffix}}.Encode()))
			for _, want := range []string{"delivered", "duplicate"} {
				r := post(t, client, g.hook("big"), mustBody(t, big()), big().Header)
				if r.status != 200 || r.body["status"] != want || r.body["agent_answer"] != "too_large" {
					t.Fatalf("answer over the limit: %d %v, want 200 %s with agent_answer too_large", r.status, r.body, want)
				}
			}
			if n := agent.count("big", "big."+suffix); n != 1 {
				t.Fatalf("the agent got the over-limit command %d times, want once", n)
			}
			if !strings.Contains(g.stderr.String(), `"level":"warn"`) || !strings.Contains(g.stderr.String(), "respond_limit") {
				t.Fatalf("no warning about the answer over the limit in the log:\n%s", g.stderr.String())
			}
		})
	}
}

func mustBody(t *testing.T, r *http.Request) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
