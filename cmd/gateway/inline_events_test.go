package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// The quickstart's inline config, one `gateway send`, then the event log:
// `events list`, `events show` and the console's Events page list the
// inline event with its outcome, as they do a queued one; with
// `respond: agent` the same.
func TestInlineEventsInTheLog(t *testing.T) {
	raw, err := os.ReadFile("../../configs/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"reply":"thanks for ` + r.Header.Get("Replyonce-Event-Id") + `"}`))
	}))
	t.Cleanup(agent.Close)
	ctx, _ := newBrowser(t)
	for _, respond := range []string{"gateway", "agent"} {
		t.Run("respond "+respond, func(t *testing.T) {
			dir := t.TempDir()
			repl := map[string]string{
				"listen: 127.0.0.1:8080":              "listen: 127.0.0.1:0",
				"{listen: 127.0.0.1:8081}":            "{listen: 127.0.0.1:0}",
				"path: data/ledger.db":                "path: " + filepath.Join(dir, "ledger.db"),
				"http://127.0.0.1:9000/events":        agent.URL + "/events",
				"log: {level: info, format: console}": "log: {level: error, format: json}",
			}
			if respond == "agent" {
				repl["      mode: inline"] = "      respond: agent\n      mode: inline"
			}
			cfg := replaceOnce(t, string(raw), repl)
			serveCfg := filepath.Join(dir, "serve.yaml")
			if err := os.WriteFile(serveCfg, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			g := startGateway(t, serveCfg)
			sendCfg := filepath.Join(dir, "send.yaml")
			if err := os.WriteFile(sendCfg, []byte(strings.Replace(cfg, "listen: 127.0.0.1:0", "listen: "+g.public, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
			if err := app.Run(context.Background(), []string{"send", "--config", sendCfg, "--source", "demo",
				"--conversation", "c1", "--message", "Where is my order?", "--event-id", "evt_1"}); err != nil {
				t.Fatalf("send: %v\n%s\n%s", err, out.String(), g.stderr.String())
			}
			if !strings.Contains(out.String(), "200 OK") {
				t.Fatalf("send:\n%s", out.String())
			}

			list := runCLI(t, g, "events", "list")
			if !strings.Contains(list, "evt_1") || !strings.Contains(list, "delivered (inline)") {
				t.Fatalf("events list does not show the inline event delivered:\n%s", list)
			}
			show := runCLI(t, g, "events", "show", "demo", "evt_1", "--scope", "c1")
			for _, want := range []string{"delivered after 1 attempt(s)", "forwarded inline", "body not kept", " 200 ", "thanks for evt_1"} {
				if !strings.Contains(show, want) {
					t.Fatalf("events show lacks %q:\n%s", want, show)
				}
			}
			var d ledgerapi.DeliveryJSON
			if err := json.Unmarshal([]byte(runCLI(t, g, "events", "show", "demo", "evt_1", "--scope", "c1", "--json")), &d); err != nil {
				t.Fatal(err)
			}
			if !d.Delivery.Inline || d.Delivery.BodyKept || d.Event.Body != "" || len(d.Attempts) != 1 || d.Attempts[0].AgentStatus != 200 {
				t.Fatalf("events show --json: %+v", d)
			}
			// Replay is for queued sources only, and says so.
			var rout bytes.Buffer
			rapp := &App{Stdout: &rout, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
			err := rapp.Run(context.Background(), []string{"events", "replay", "demo", "evt_1", "--scope", "c1", "--admin", "http://" + g.admin})
			if err == nil || !strings.Contains(err.Error(), "queued sources only") {
				t.Fatalf("replaying an inline event: %v, want a refusal naming queued sources", err)
			}

			admin := "http://" + g.admin
			run(t, ctx, "events page", chromedp.Navigate(admin+"/events"), chromedp.WaitVisible("#events-table", chromedp.ByID))
			var row string
			run(t, ctx, "row", chromedp.Text(`tr[data-event="evt_1"]`, &row, chromedp.ByQuery))
			if !strings.Contains(row, "delivered") || !strings.Contains(row, "inline") || !strings.Contains(row, "c1") {
				t.Fatalf("the Events page's row for evt_1 reads %q", row)
			}
			run(t, ctx, "event page", clickNav(`tr[data-event="evt_1"] a`), chromedp.WaitVisible("#attempts", chromedp.ByID))
			var status, attempt string
			run(t, ctx, "event facts", chromedp.Text("#event-status", &status, chromedp.ByID),
				chromedp.Text("#attempts tr.attempt", &attempt, chromedp.ByQuery),
				chromedp.WaitVisible("#inline-note", chromedp.ByID), chromedp.WaitVisible("#body-not-kept", chromedp.ByID))
			if status != "delivered" || !strings.Contains(attempt, "200") || !strings.Contains(attempt, "thanks for evt_1") {
				t.Fatalf("event page: status %q, attempt %q", status, attempt)
			}
			if n, err := count(ctx, "#replay"); err != nil || n != 0 {
				t.Fatalf("an inline event offers replay (%d buttons, %v)", n, err)
			}
			run(t, ctx, "conversation", chromedp.Navigate(admin+"/scope?scope=c1"), chromedp.WaitReady("main", chromedp.ByQuery))
			var conv string
			run(t, ctx, "conversation text", chromedp.Text("main", &conv, chromedp.ByQuery))
			if !strings.Contains(conv, "evt_1") {
				t.Fatalf("the conversation view does not show evt_1:\n%s", conv)
			}
		})
	}
}
