package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// ignoredCount reads replyonce_events_ignored_total{source, rule}.
func ignoredCount(t *testing.T, reg *prometheus.Registry, source, rule string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "replyonce_events_ignored_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == source && labels["rule"] == rule {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// metricHarness is a harness whose metrics register on reg.
func metricHarness(t *testing.T, log *zap.Logger, cfgs ...ingress.SourceConfig) (*harness, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	h := newHarnessWith(t, func(o *ingress.Options) {
		o.Metrics = ingress.NewMetrics(reg)
		if log != nil {
			o.Logger = log
		}
	}, cfgs...)
	return h, reg
}

func ignoreBots(c *ingress.SourceConfig) {
	c.Ignore = []ingress.IgnoreRule{
		{Name: "stars", Headers: map[string]any{"X-GitHub-Event": "watch"}},
		{Body: map[string]any{"issue": map[string]any{"title": map[string]any{"$startsWith": "Refund bot-"}}}},
	}
}

// An event an ignore rule matches is answered 200 ignored, counted by rule,
// never forwarded, and leaves the store untouched; a redelivery is answered
// the same; an unsigned one is still a 401; other events go through.
func TestIgnoreRuleAnswersIgnoredAndRecordsNothing(t *testing.T) {
	for _, mode := range []dispatch.Mode{dispatch.ModeInline, dispatch.ModeQueued} {
		t.Run(string(mode), func(t *testing.T) {
			h, reg := metricHarness(t, nil, githubSource("gh", ignoreBots, func(c *ingress.SourceConfig) { c.Forward.Queue.Mode = mode }))
			writes := h.store.writes.Load()
			for range 2 {
				r := h.postGitHub(t, "gh", "bot-1")
				wantAnswer(t, r, "ignored", "bot-1", "")
				if strings.Contains(string(r.Body), "run_id") {
					t.Fatalf("an ignored event has no run: %s", r.Body)
				}
			}
			if n := h.store.writes.Load(); n != writes {
				t.Fatalf("ignoring wrote %d times to the store", n-writes)
			}
			h.assertNothingRecorded(t, "gh:bot-1")
			if got := ignoredCount(t, reg, "gh", "ignore[1]"); got != 2 {
				t.Fatalf("ignored{gh, ignore[1]} = %v, want 2", got)
			}

			// The other rule, by header, counted under its name.
			hdr := githubHeader("ping-1")
			hdr.Set("X-GitHub-Event", "watch")
			body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr, []byte(`{"zen":"x"}`))
			wantAnswer(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/gh", hdr, body)), "ignored", "ping-1", "")
			if got := ignoredCount(t, reg, "gh", "stars"); got != 1 {
				t.Fatalf("ignored{gh, stars} = %v, want 1", got)
			}

			// Verification comes first.
			forged := h.newRequest(t, http.MethodPost, "/hooks/gh", githubHeader("bot-2"), githubBody("bot-2"))
			forged.Header.Set("X-Hub-Signature-256", "sha256=00")
			wantStatus(t, h.do(t, forged), http.StatusUnauthorized)

			// A human's event is not ignored.
			r := h.postGitHub(t, "gh", "human-1")
			if mode == dispatch.ModeInline {
				wantAnswer(t, r, "delivered", "human-1", "gh:human-1")
				if h.sink.count("human-1") != 1 {
					t.Fatal("the human's event did not reach the agent")
				}
			} else {
				wantStatus(t, r, http.StatusAccepted)
			}
			if h.sink.count("bot-1") != 0 || h.sink.count("ping-1") != 0 {
				t.Fatal("an ignored event reached the agent")
			}
		})
	}
}

// Ignored events are logged at info, throttled per rule like other repeated lines.
func TestIgnoredLinesAreThrottled(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h, _ := metricHarness(t, zap.New(core), githubSource("gh", ignoreBots))
	for i := range 30 {
		wantStatus(t, h.postGitHub(t, "gh", "bot-"+strconv.Itoa(i)), http.StatusOK)
	}
	lines := logs.FilterMessage("webhook").FilterField(zap.String("decision", "ignored")).All()
	if len(lines) == 0 || len(lines) > 10 {
		t.Fatalf("30 ignored events logged %d lines, want 1 to 10", len(lines))
	}
	if lines[0].Level != zapcore.InfoLevel || lines[0].ContextMap()["reason"] != "ignore[1]" || lines[0].ContextMap()["event_id"] != "bot-0" {
		t.Fatalf("an ignored line: %v %v", lines[0].Level, lines[0].ContextMap())
	}
}

// With split, rules apply per element: the ignored element is answered
// ignored in the batch and recorded nowhere, the others are delivered.
func TestIgnorePerBatchElement(t *testing.T) {
	h, reg := metricHarness(t, nil, githubSource("ghb", func(c *ingress.SourceConfig) {
		c.Split = "{json:@this}"
		c.EventID = []string{"{json:id}"}
		c.Ignore = []ingress.IgnoreRule{{Name: "bots", Body: map[string]any{"sender": map[string]any{"type": "Bot"}}}}
	}))
	hdr := githubHeader("batch-1")
	body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, h.clock.Now(), http.MethodPost, "", hdr,
		[]byte(`[{"id":"e-bot","sender":{"type":"Bot"}},{"id":"e-human","sender":{"type":"User"}},{"sender":{"type":"Bot"}}]`))
	r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/ghb", hdr, body))
	wantStatus(t, r, http.StatusOK)
	var got struct {
		Events []answerBody `json:"events"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 3 || got.Events[0].Status != "ignored" || got.Events[0].EventID != "e-bot" ||
		got.Events[1].Status != "delivered" || got.Events[2].Status != "ignored" || got.Events[2].EventID != "" {
		t.Fatalf("batch answer %s", r.Body)
	}
	if h.sink.count("e-bot") != 0 || h.sink.count("e-human") != 1 || h.sink.totalCount() != 1 {
		t.Fatalf("agent got e-bot %d, e-human %d, total %d", h.sink.count("e-bot"), h.sink.count("e-human"), h.sink.totalCount())
	}
	h.assertNothingRecorded(t, "ghb:e-bot")
	if n := ignoredCount(t, reg, "ghb", "bots"); n != 2 {
		t.Fatalf("ignored{ghb, bots} = %v, want 2", n)
	}
}

func slackSource(name string, mods ...func(*ingress.SourceConfig)) ingress.SourceConfig {
	c := ingress.SourceConfig{Name: name, Provider: "slack", Signature: signatures.Config{Secrets: []string{slackSecret}}}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func (h *harness) postSlack(t *testing.T, source, body string) reply {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}}
	b := sign(t, "slack", signatures.Config{Secrets: []string{slackSecret}}, h.clock.Now(), http.MethodPost, "", hdr, []byte(body))
	return h.do(t, h.newRequest(t, http.MethodPost, "/hooks/"+source, hdr, b))
}

// slackEvent is an Events API callback from the app A1 installed with bot
// user UBOT.
func slackEvent(id, event string) string {
	return `{"type":"event_callback","api_app_id":"A1","team_id":"T1","event_id":"` + id + `","event_time":1764748800,` +
		`"authorizations":[{"team_id":"T1","user_id":"UBOT","is_bot":true}],"event":` + event + `}`
}

// The Slack preset follows Bolt's ignoreSelf: the app's own bot user and
// its own bot's posts are ignored, channel membership events are kept, and
// ignore_presets: false turns it off.
func TestSlackSelfPreset(t *testing.T) {
	h, reg := metricHarness(t, nil, slackSource("slack"), slackSource("slack-raw", func(c *ingress.SourceConfig) {
		off := false
		c.IgnorePresets = &off
	}), slackSource("slack-own", func(c *ingress.SourceConfig) { c.IgnoreFrom = []string{"B777"} }))
	cases := []struct {
		name, event string
		ignored     bool
	}{
		{"message by the bot user", `{"type":"message","user":"UBOT","text":"hi","ts":"1.1","channel":"C1"}`, true},
		{"reaction by the bot user", `{"type":"reaction_added","user":"UBOT","reaction":"eyes"}`, true},
		{"bot_message from this app", `{"type":"message","subtype":"bot_message","bot_id":"B1","app_id":"A1","text":"hi","ts":"1.2"}`, true},
		{"bot message with bot_profile of this app", `{"type":"message","bot_id":"B1","bot_profile":{"id":"B1","app_id":"A1"},"ts":"1.3"}`, true},
		{"bot joining a channel is kept", `{"type":"member_joined_channel","user":"UBOT","channel":"C1"}`, false},
		{"a customer's message", `{"type":"message","user":"U42","text":"refund please","ts":"1.4","channel":"C1"}`, false},
		{"another app's bot", `{"type":"message","subtype":"bot_message","bot_id":"B9","app_id":"A9","ts":"1.5"}`, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "Ev" + strconv.Itoa(i)
			r := h.postSlack(t, "slack", slackEvent(id, tc.event))
			raw := h.postSlack(t, "slack-raw", slackEvent(id+"raw", tc.event))
			wantAnswer(t, raw, "delivered", id+"raw", "slack-raw:"+id+"raw")
			if tc.ignored {
				wantAnswer(t, r, "ignored", id, "")
				h.assertNothingRecorded(t, "slack:"+id)
				if h.sink.count(id) != 0 {
					t.Fatal("the app's own event reached the agent")
				}
				return
			}
			wantAnswer(t, r, "delivered", id, "slack:"+id)
		})
	}
	if n := ignoredCount(t, reg, "slack", "preset:slack_self"); n != 4 {
		t.Fatalf("ignored{slack, preset:slack_self} = %v, want 4", n)
	}
	// ignore_from adds the operator's own ids.
	wantAnswer(t, h.postSlack(t, "slack-own", slackEvent("EvOwn", `{"type":"message","bot_id":"B777","ts":"2.1"}`)), "ignored", "EvOwn", "")
	wantAnswer(t, h.postSlack(t, "slack", slackEvent("EvOwn2", `{"type":"message","bot_id":"B777","ts":"2.2"}`)), "delivered", "EvOwn2", "slack:EvOwn2")
}

func postmarkSource(name string) ingress.SourceConfig {
	return ingress.SourceConfig{Name: name, Provider: "postmark", Signature: signatures.Config{Secrets: []string{"hooks:pm-pass"}},
		EventID: []string{"{json:MessageID}"}}
}

func (h *harness) postSigned(t *testing.T, provider string, cfg signatures.Config, source, body string) reply {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}}
	b := sign(t, provider, cfg, h.clock.Now(), http.MethodPost, h.srv.URL+"/hooks/"+source, hdr, []byte(body))
	return h.do(t, h.newRequest(t, http.MethodPost, "/hooks/"+source, hdr, b))
}

// Email that says it was sent by a machine (RFC 3834 Auto-Submitted other
// than "no") is ignored for Postmark inbound and Nylas messages.
func TestAutoSubmittedPreset(t *testing.T) {
	h, reg := metricHarness(t, nil, postmarkSource("pm"), nylasSource("ny", nil))
	pm := signatures.Config{Secrets: []string{"hooks:pm-pass"}}
	postmark := func(id, headers string) string {
		return `{"MessageID":"` + id + `","From":"c@example.com","Subject":"Re: order","Headers":[` + headers + `]}`
	}
	cases := []struct {
		name, headers string
		ignored       bool
	}{
		{"auto-replied", `{"Name":"Auto-Submitted","Value":"auto-replied"}`, true},
		{"auto-generated with a parameter, any case", `{"Name":"auto-submitted","Value":"Auto-Generated; owner-email=\"x@y\""}`, true},
		{"no", `{"Name":"Auto-Submitted","Value":"no"}`, false},
		{"absent", `{"Name":"X-Spam-Status","Value":"No"}`, false},
	}
	for i, tc := range cases {
		t.Run("postmark "+tc.name, func(t *testing.T) {
			id := "pm-" + strconv.Itoa(i)
			r := h.postSigned(t, "postmark", pm, "pm", postmark(id, tc.headers))
			if tc.ignored {
				wantAnswer(t, r, "ignored", id, "")
				h.assertNothingRecorded(t, "pm:"+id)
			} else {
				wantAnswer(t, r, "delivered", id, "pm:"+id)
			}
		})
	}
	ny := nylasMessage("ny-auto", "thread-1", "customer@example.com", `[{"name":"Auto-Submitted","value":"auto-replied"}]`)
	wantAnswer(t, h.postSigned(t, "nylas", nylasCfg, "ny", ny), "ignored", "ny-auto", "")
	ny = nylasMessage("ny-human", "thread-1", "customer@example.com", `[{"name":"Auto-Submitted","value":"no"}]`)
	wantAnswer(t, h.postSigned(t, "nylas", nylasCfg, "ny", ny), "delivered", "ny-human", "ny:ny-human")
	if a, b := ignoredCount(t, reg, "pm", "preset:auto_submitted"), ignoredCount(t, reg, "ny", "preset:auto_submitted"); a != 2 || b != 1 {
		t.Fatalf("auto_submitted counts: postmark %v, nylas %v", a, b)
	}
	if h.sink.count("pm-0") != 0 || h.sink.count("ny-auto") != 0 {
		t.Fatal("an auto-submitted message reached the agent")
	}
}

var nylasCfg = signatures.Config{Secrets: []string{"nylas-webhook-secret"}}

func nylasSource(name string, own []string, mods ...func(*ingress.SourceConfig)) ingress.SourceConfig {
	c := ingress.SourceConfig{Name: name, Provider: "nylas", Signature: nylasCfg, IgnoreFrom: own}
	for _, m := range mods {
		m(&c)
	}
	return c
}

// nylasMessage is a message.created notification; the notification id is
// the event id and the message's own id is "m-"+id.
func nylasMessage(id, thread, from, headers string) string {
	h := ""
	if headers != "" {
		h = `,"headers":` + headers
	}
	return `{"specversion":"1.0","type":"message.created","id":"` + id + `","time":1764748800,"data":{"object":{"id":"m-` + id +
		`","thread_id":"` + thread + `","from":[{"name":"X","email":"` + from + `"}],"subject":"Re: refund"` + h + `}}}`
}

// Nylas messages from the agent's own address (ignore_from) are ignored:
// its outbound mail fires message.created too.
func TestNylasOwnAddressPreset(t *testing.T) {
	h, reg := metricHarness(t, nil, nylasSource("ny", []string{"Agent@Support.example"}))
	wantAnswer(t, h.postSigned(t, "nylas", nylasCfg, "ny", nylasMessage("n-own", "t1", "agent@support.example", "")), "ignored", "n-own", "")
	wantAnswer(t, h.postSigned(t, "nylas", nylasCfg, "ny", nylasMessage("n-cust", "t1", "customer@example.com", "")), "delivered", "n-cust", "ny:n-cust")
	h.assertNothingRecorded(t, "ny:n-own")
	if h.sink.count("n-own") != 0 || ignoredCount(t, reg, "ny", "preset:own_address") != 1 {
		t.Fatal("the agent's own message was not ignored as such")
	}
}

// Echo suppression through the real gateway: the agent answers a
// customer's message by committing a reply whose value holds the sent
// message's id; the provider's notification about that message is ignored
// as the agent's echo, with no address list, while the customer's next
// message on the same thread is delivered.
func TestEchoOfCommittedReplyIsIgnored(t *testing.T) {
	for _, mode := range []dispatch.Mode{dispatch.ModeInline, dispatch.ModeQueued} {
		t.Run(string(mode), func(t *testing.T) {
			h, reg := metricHarness(t, nil, nylasSource("ny", nil, func(c *ingress.SourceConfig) {
				c.Scope = []string{"{json:data.object.thread_id}"}
				c.EchoOf = []string{"{json:data.object.id}"}
				c.Forward.Queue.Mode = mode
			}))
			replies := 0
			agentReply := func(ctx context.Context, run *ledger.Run, to string) error {
				res, err := run.Once(ctx, "reply", map[string]string{"to": to},
					func(ctx context.Context, c ledger.Call) (any, error) {
						replies++
						return map[string]any{"provider": "nylas", "message": map[string]any{"id": "sent-" + strconv.Itoa(replies)}}, nil
					})
				if err == nil && !res.OK() {
					err = errors.New(string(res.Status))
				}
				return err
			}
			h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				// The agent: reply once per event under the forwarded run.
				tok, _ := strconv.ParseUint(r.Header.Get(forward.HeaderFencingToken), 10, 64)
				run := h.ledger.RunRef(r.Header.Get(forward.HeaderScope), r.Header.Get(forward.HeaderRunID), tok)
				if err := agentReply(r.Context(), run, r.Header.Get(forward.HeaderEventID)); err != nil {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			first := h.postSigned(t, "nylas", nylasCfg, "ny", nylasMessage("c-1", "thread-9", "customer@example.com", ""))
			if mode == dispatch.ModeInline {
				wantAnswer(t, first, "delivered", "c-1", "ny:c-1")
			} else {
				// No dispatcher runs here: the agent takes the queued event
				// under its own run on the thread and replies.
				wantStatus(t, first, http.StatusAccepted)
				run, err := h.ledger.Begin(context.Background(), "thread-9", ledger.RunOptions{RunID: "agent:c-1"})
				if err != nil {
					t.Fatal(err)
				}
				if err := agentReply(context.Background(), run, "c-1"); err != nil {
					t.Fatal(err)
				}
			}
			if replies != 1 {
				t.Fatalf("the agent replied %d times", replies)
			}
			// The notification about the agent's own sent message: its object id is sent-1.
			echo := strings.Replace(nylasMessage("n-echo", "thread-9", "agent@support.example", ""), `"id":"m-n-echo"`, `"id":"sent-1"`, 1)
			writes := h.store.writes.Load()
			for range 2 {
				wantAnswer(t, h.postSigned(t, "nylas", nylasCfg, "ny", echo), "ignored", "n-echo", "")
			}
			if h.store.writes.Load() != writes {
				t.Fatal("the echo wrote to the store")
			}
			if h.sink.count("n-echo") != 0 || ignoredCount(t, reg, "ny", "echo_of") != 2 {
				t.Fatal("the agent's echo was not ignored")
			}
			for _, e := range must(t)(h.ledger.Views().History(context.Background(), "thread-9")) {
				if e.RunID == "ny:n-echo" {
					t.Fatalf("the echo has a ledger entry: %+v", e)
				}
			}
			// The same id on another thread is not this thread's echo.
			other := strings.Replace(echo, "thread-9", "thread-10", 1)
			other = strings.Replace(other, `"id":"n-echo"`, `"id":"n-other"`, 1)
			delivered := func(r reply, id string) {
				t.Helper()
				if mode == dispatch.ModeQueued {
					wantStatus(t, r, http.StatusAccepted)
					return
				}
				wantAnswer(t, r, "delivered", id, "ny:"+id)
				if h.sink.count(id) != 1 {
					t.Fatalf("the agent saw %s %d times", id, h.sink.count(id))
				}
			}
			delivered(h.postSigned(t, "nylas", nylasCfg, "ny", other), "n-other")
			// The customer writes again on the same thread: not an echo.
			delivered(h.postSigned(t, "nylas", nylasCfg, "ny", nylasMessage("c-2", "thread-9", "customer@example.com", "")), "c-2")
			// Store down: the echo check cannot answer, so neither can the gateway.
			h.store.down.Store(true)
			r := h.postSigned(t, "nylas", nylasCfg, "ny", echo)
			h.store.down.Store(false)
			wantStatus(t, r, http.StatusServiceUnavailable)
		})
	}
}

func must(t *testing.T) func([]ledger.Entry, error) []ledger.Entry {
	return func(es []ledger.Entry, err error) []ledger.Entry {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
}
