package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// The CLI fixes of #26: relative times, show without --scope for a source
// with a scope rule, a dead event's last attempt reads dead, paused as a
// status in the API and the console, and help for providers and version.
func TestEventsCLIFixes(t *testing.T) {
	agent := newSink(t)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) { return http.StatusInternalServerError, 0 })
	g := startGateway(t, writeConfig(t, "{kind: memory}",
		"      mode: queued\n      retry: {schedule: [0s]}\n    scope: \"{json:data.object.customer}\"\n", agent.srv.URL))
	client := newClient(t)
	id := "evt_fix_dead"
	body, header := stripeEvent(t, id, map[string]any{"data": map[string]any{"object": map[string]any{"customer": "cus_fix"}}})
	if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}

	// show finds the scope (cus_fix) itself.
	var d ledgerapi.DeliveryJSON
	waitFor(t, "dead letter", func() bool {
		if err := json.Unmarshal([]byte(runCLI(t, g, "events", "show", "stripe", id, "--json")), &d); err != nil {
			t.Fatal(err)
		}
		return d.Delivery.Status == "dead"
	})
	if d.Delivery.Scope != "cus_fix" || len(d.Attempts) != 1 || d.Attempts[0].Outcome != "dead" {
		t.Fatalf("events show without --scope: scope %q, attempts %+v; want cus_fix and a last attempt reading dead", d.Delivery.Scope, d.Attempts)
	}
	show := runCLI(t, g, "events", "show", "stripe", id)
	if !strings.Contains(show, "dead after 1 attempt(s)") || !strings.Contains(show, " dead ") {
		t.Fatalf("events show:\n%s", show)
	}
	// An event that is nowhere says how to name its scope.
	if err := cliErr(g, "events", "show", "stripe", "evt_nowhere"); err == nil || !strings.Contains(err.Error(), "--scope") {
		t.Fatalf("show of an unknown event: %v, want a hint naming --scope", err)
	}

	// Relative times.
	if out := runCLI(t, g, "events", "list", "--since", "1h"); !strings.Contains(out, id) {
		t.Fatalf("--since 1h leaves out an event received now:\n%s", out)
	}
	if out := runCLI(t, g, "events", "list", "--until", "10m"); strings.Contains(out, id) {
		t.Fatalf("--until 10m lists an event received now:\n%s", out)
	}
	if out := runCLI(t, g, "events", "list", "--since", "2d", "--status", "dead"); !strings.Contains(out, id) {
		t.Fatalf("--since 2d --status dead:\n%s", out)
	}
	var ue usageError
	if err := cliErr(g, "events", "list", "--since", "yesterday"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "span back from now") {
		t.Fatalf("--since yesterday: %v", err)
	}

	// paused: the API and the console take it like any other status.
	if out := runCLI(t, g, "events", "list", "--status", "paused"); strings.Contains(out, id) {
		t.Fatalf("a dead event of a running source listed as paused:\n%s", out)
	}
	runCLI(t, g, "events", "replay", "stripe", id)
	runCLI(t, g, "sources", "pause", "stripe")
	waitFor(t, "the replayed event queued on a paused source", func() bool {
		return strings.Contains(runCLI(t, g, "events", "list", "--status", "paused"), id)
	})
	ctx, _ := newBrowser(t)
	admin := "http://" + g.admin
	run(t, ctx, "events?status=paused", chromedp.Navigate(admin+"/events?status=paused"), chromedp.WaitVisible("#events-table", chromedp.ByID))
	if n, err := count(ctx, `tr[data-event="`+id+`"]`); err != nil || n != 1 {
		t.Fatalf("the console's paused filter lists the event %d times (%v)", n, err)
	}
	var selected string
	run(t, ctx, "selected status", chromedp.Value("#f-status", &selected, chromedp.ByID))
	if selected != "paused" {
		t.Fatalf("the status filter shows %q, want paused", selected)
	}
	run(t, ctx, "since 1h", chromedp.Navigate(admin+"/events?since=1h"), chromedp.WaitVisible("#events-table", chromedp.ByID))
	if n, err := count(ctx, `tr[data-event="`+id+`"]`); err != nil || n != 1 {
		t.Fatalf("the console's since=1h lists the event %d times (%v)", n, err)
	}

	// Help.
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
	if err := app.Run(context.Background(), []string{"providers", "--help"}); err != nil || !strings.Contains(out.String(), "usage: gateway providers") {
		t.Fatalf("providers --help: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := app.Run(context.Background(), []string{"version", "--help"}); err != nil || !strings.Contains(out.String(), "usage: gateway version") {
		t.Fatalf("version --help: %v\n%s", err, out.String())
	}
}

// cliErr runs one gateway command against g's admin API and returns its error.
func cliErr(g *gateway, args ...string) error {
	app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
	return app.Run(context.Background(), append(args, "--admin", "http://"+g.admin))
}
