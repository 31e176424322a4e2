package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// loopAgent is an agent with the self-reply bug: it answers every message
// the gateway forwards, its own included. Each reply goes through the
// gateway's ledger API on the forwarded run, and a sent reply comes back
// as the provider's webhook for the new message (the echo), which the test
// posts to the gateway like any other inbound event.
type loopAgent struct {
	srv    *httptest.Server
	ledger *ledgerapi.Client

	mu      sync.Mutex
	sent    []string        // replies that reached the "provider"
	answers []ledger.Result // what the ledger said to each reply
	echoes  []string        // message ids the provider will echo back
}

func newLoopAgent(t *testing.T) *loopAgent {
	a := &loopAgent{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		token, err := strconv.ParseUint(r.Header.Get("Replyonce-Fencing-Token"), 10, 64)
		if err != nil {
			t.Errorf("forward without a fencing token: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		run := a.ledger.RunRef(r.Header.Get("Replyonce-Scope"), r.Header.Get("Replyonce-Run-Id"), token)
		inReplyTo := r.Header.Get("Replyonce-Event-Id")
		res, err := run.Once(r.Context(), "reply", map[string]string{"inReplyTo": inReplyTo}, func(context.Context, ledger.Call) (any, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			id := fmt.Sprintf("msg_agent_%d", len(a.sent)+1)
			a.sent = append(a.sent, id)
			a.echoes = append(a.echoes, id)
			return map[string]string{"message_id": id}, nil
		}, ledger.OnceOptions{Summary: "Thanks for your message! " + strconv.Itoa(len(body))})
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		a.mu.Lock()
		a.answers = append(a.answers, res)
		a.mu.Unlock()
		// Refused or not, the event was handled: the agent's loop stops
		// here, and a person takes the escalation.
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// nextEcho is the provider's webhook for the agent's latest sent reply,
// if one is waiting.
func (a *loopAgent) nextEcho() (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.echoes) == 0 {
		return "", false
	}
	id := a.echoes[0]
	a.echoes = a.echoes[1:]
	return id, true
}

// Loop breaker, end to end: an agent answering its own messages through
// the real gateway (ledger.caps reply: 3 in 5m) sends three replies, then
// its fourth is refused rate_limited and nothing is sent; one escalation
// is recorded, listed by the ledger API, counted in /metrics and logged;
// a later message on the thread is refused too, under the same escalation.
func TestLoopBreakerStopsSelfReplyLoop(t *testing.T) {
	for name, store := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			agent := newLoopAgent(t)
			receiver := newSlackReceiver(t)
			alerted := receiver.texts
			cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
store: %s
log: {level: info, format: json}
alerts: {targets: [{slack: '%s/services/x'}]}
ledger:
  caps:
    reply: {max: 3, window: 5m}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    scope: "{json:data.object.thread}"
    forward:
      url: %s/events
      mode: inline
      timeout: 5s
`, store, receiver.srv.URL, agent.srv.URL)
			path := filepath.Join(t.TempDir(), "gateway.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			g := startGateway(t, path)
			c, err := ledgerapi.NewClient("http://"+g.admin, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			agent.ledger = c
			client := newClient(t)
			thread := "thr_" + name
			postMessage := func(id string) {
				t.Helper()
				body, header := stripeEvent(t, id, map[string]any{"data": map[string]any{"object": map[string]string{"thread": thread}}})
				if r := post(t, client, g.hook("stripe"), body, header); r.status != 200 || r.body["status"] != "delivered" {
					t.Fatalf("posting %s: %d %v", id, r.status, r.body)
				}
			}

			// The customer writes once; every reply the agent sends
			// comes back as a new inbound message on the same thread.
			postMessage("msg_customer_1")
			for rounds := 0; rounds < 20; rounds++ {
				id, ok := agent.nextEcho()
				if !ok {
					break
				}
				postMessage(id)
			}
			// The loop is broken; a new customer message on the thread
			// within the window is held back as well.
			postMessage("msg_customer_2")

			agent.mu.Lock()
			sent, answers := append([]string(nil), agent.sent...), append([]ledger.Result(nil), agent.answers...)
			agent.mu.Unlock()
			if len(sent) != 3 {
				t.Fatalf("the agent sent %d replies (%v), want 3: the cap must stop the loop", len(sent), sent)
			}
			var got []string
			for _, r := range answers {
				got = append(got, string(r.Status)+"/"+string(r.Reason))
			}
			want := "executed/ executed/ executed/ refused/rate_limited refused/rate_limited"
			if strings.Join(got, " ") != want {
				t.Fatalf("the ledger answered %v, want %s", got, want)
			}

			ctx := context.Background()
			escs, err := c.Escalations(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(escs) != 1 || escs[0].Scope != thread || escs[0].Intent != "reply" || escs[0].Refused != 2 ||
				escs[0].Reason != ledger.ReasonRateLimited || escs[0].RunID == "" {
				t.Fatalf("escalations %+v, want one for reply on %s with 2 refusals", escs, thread)
			}
			// A person is told, once: one Slack message for the escalation.
			testkit.Eventually(t, "the escalation alert", func() bool { return len(alerted()) >= 1 })
			if got := alerted(); len(got) != 1 || !strings.Contains(got[0], "Loop breaker: scope "+thread+" reached its cap of reply (3 in 5m0s)") ||
				!strings.Contains(got[0], "gateway ledger dismiss "+thread+" "+escs[0].ID) {
				t.Fatalf("escalation alerts %q, want one naming the scope, the cap and the dismiss command", got)
			}
			metrics := scrape(t, g.admin)
			for _, line := range []string{`replyonce_escalations_total{intent="reply"} 1`, `replyonce_rate_limited_total{intent="reply"} 2`} {
				if !strings.Contains(metrics, line) {
					t.Errorf("/metrics lacks %q", line)
				}
			}
			// The operator's view: gateway ledger escalations, then dismiss.
			out := runCLI(t, g, "ledger", "escalations")
			if !strings.Contains(out, thread) || !strings.Contains(out, "3 in 5m0s") || !strings.Contains(out, "1 open escalation.") {
				t.Errorf("gateway ledger escalations:\n%s", out)
			}
			out = runCLI(t, g, "ledger", "dismiss", thread, escs[0].ID)
			if !strings.Contains(out, "dismissed "+thread) {
				t.Errorf("gateway ledger dismiss:\n%s", out)
			}
			if out := runCLI(t, g, "ledger", "escalations"); !strings.Contains(out, "no open escalations") {
				t.Errorf("after dismissal:\n%s", out)
			}
			if !strings.Contains(g.stderr.String(), "loop breaker: cap reached") {
				t.Errorf("no escalation warning in the log:\n%s", g.stderr.String())
			}
		})
	}
}

func scrape(t *testing.T, admin string) string {
	t.Helper()
	res, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
