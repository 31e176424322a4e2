package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// runCLI runs one gateway command against g's admin API and returns what
// it printed.
func runCLI(t *testing.T, g *gateway, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
	if err := app.Run(context.Background(), append(args, "--admin", "http://"+g.admin)); err != nil {
		t.Fatalf("gateway %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func deliveryStatus(t *testing.T, g *gateway, id string) string {
	t.Helper()
	var d ledgerapi.DeliveryJSON
	if err := json.Unmarshal([]byte(runCLI(t, g, "events", "show", "stripe", id, "--json")), &d); err != nil {
		t.Fatal(err)
	}
	return string(d.Delivery.Status)
}

// Operators see dead letters with every attempt, replay them in bulk, and
// pause and resume a source, all through the CLI and the admin API.
func TestEventsAndSourcesCommands(t *testing.T) {
	agent := newSink(t)
	var failing atomic.Bool
	failing.Store(true)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) {
		if failing.Load() {
			return http.StatusInternalServerError, 0
		}
		return http.StatusOK, 0
	})
	g := startGateway(t, writeConfig(t, "{kind: memory}", "      mode: queued\n      retry: {schedule: [0s, 50ms]}\n", agent.srv.URL))
	client := newClient(t)
	id := "evt_cli_dead"
	body, header := stripeEvent(t, id, nil)
	if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	waitFor(t, "dead letter", func() bool { return deliveryStatus(t, g, id) == "dead" })

	list := runCLI(t, g, "events", "list", "--status", "dead")
	if !strings.Contains(list, id) || !strings.Contains(list, "dead") {
		t.Fatalf("events list --status dead:\n%s", list)
	}
	show := runCLI(t, g, "events", "show", "stripe", id)
	if strings.Count(show, " 500 ") < 2 || !strings.Contains(show, "dead after 2 attempt(s)") {
		t.Fatalf("events show:\n%s", show)
	}
	failing.Store(false)
	// A time range that leaves the event out replays nothing.
	if out := runCLI(t, g, "events", "replay", "--status", "dead", "--until", "2000-01-01T00:00:00Z"); !strings.Contains(out, "0 event(s) due again") {
		t.Fatalf("bulk replay of events received before 2000:\n%s", out)
	}
	if out := runCLI(t, g, "events", "list", "--status", "dead", "--since", "2000-01-01T00:00:00Z", "--until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); !strings.Contains(out, id) {
		t.Fatalf("events list within a range holding the event:\n%s", out)
	}
	if out := runCLI(t, g, "events", "replay", "--status", "dead", "--source", "stripe"); !strings.Contains(out, "1 event(s) due again") {
		t.Fatalf("bulk replay:\n%s", out)
	}
	waitFor(t, "replayed delivery", func() bool { return deliveryStatus(t, g, id) == "delivered" })
	last := agent.request(agent.count() - 1)
	if last.Header.Get("Replyonce-Delivery") != "3" || last.Header.Get("Replyonce-Run-Id") != "stripe:"+id {
		t.Fatalf("replay forwarded delivery %q of run %q; want 3 of stripe:%s",
			last.Header.Get("Replyonce-Delivery"), last.Header.Get("Replyonce-Run-Id"), id)
	}

	if out := runCLI(t, g, "sources", "pause", "stripe"); !strings.Contains(out, "paused stripe") {
		t.Fatalf("pause: %s", out)
	}
	before := agent.count()
	paused := "evt_cli_paused"
	body, header = stripeEvent(t, paused, nil)
	// The gateway learns of the pause at its next sweep (every second).
	time.Sleep(1500 * time.Millisecond)
	if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
		t.Fatalf("a paused source must keep accepting: %d %v", r.status, r.body)
	}
	time.Sleep(1500 * time.Millisecond)
	if agent.count() != before || deliveryStatus(t, g, paused) != "queued" {
		t.Fatalf("a paused source dispatched: agent count %d -> %d, status %s", before, agent.count(), deliveryStatus(t, g, paused))
	}
	if out := runCLI(t, g, "events", "list", "--status", "paused"); !strings.Contains(out, paused) {
		t.Fatalf("events list --status paused:\n%s", out)
	}
	runCLI(t, g, "sources", "resume", "stripe")
	waitFor(t, "delivery after resume", func() bool { return deliveryStatus(t, g, paused) == "delivered" })
}

// Every command that takes a source name refuses one the gateway is not
// configured with, naming it and the configured sources, instead of
// listing nothing, replaying nothing or pausing a source that does not
// exist.
func TestUnknownSourceRefusedByEveryCommand(t *testing.T) {
	agent := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "      mode: queued\n", agent.srv.URL))
	for _, args := range [][]string{
		{"events", "list", "--source", "stirpe"},
		{"events", "list", "--status", "dead", "--source", "stirpe"},
		{"events", "show", "stirpe", "evt_1"},
		{"events", "replay", "stirpe", "evt_1"},
		{"events", "replay", "--status", "dead", "--source", "stirpe"},
		{"sources", "pause", "stirpe"},
		{"sources", "resume", "stirpe"},
	} {
		var out bytes.Buffer
		app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
		err := app.Run(context.Background(), append(args, "--admin", "http://"+g.admin))
		if err == nil || !strings.Contains(err.Error(), `unknown source "stirpe"`) || !strings.Contains(err.Error(), "configured: stripe") {
			t.Errorf("gateway %s: %v, want an error naming the unknown source and the configured ones\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	if out := runCLI(t, g, "sources", "pause", "stripe"); !strings.Contains(out, "paused stripe") {
		t.Fatalf("pause of the configured source: %s", out)
	}
}

// `events replay SOURCE ID --to URL` with the real binary's wiring: a dead
// event goes once to a staging agent, signed with the source's
// forward.signing_secret and with no live run; `events show` lists the
// trial among the attempts, and the event stays dead and undelivered to
// its own agent.
func TestEventsReplayToAnotherURL(t *testing.T) {
	agent := newSink(t)
	agent.setAnswer(func(int, *http.Request) (int, time.Duration) { return http.StatusInternalServerError, 0 })
	staging := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "      mode: queued\n      retry: {schedule: [0s]}\n", agent.srv.URL))
	client := newClient(t)
	id := "evt_cli_trial"
	body, header := stripeEvent(t, id, nil)
	if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	waitFor(t, "dead letter", func() bool { return deliveryStatus(t, g, id) == "dead" })
	agentCalls := agent.count()

	out := runCLI(t, g, "events", "replay", "stripe", id, "--to", staging.srv.URL+"/staging")
	if !strings.Contains(out, "sent to "+staging.srv.URL+"/staging (trial 1): delivered, 200") {
		t.Fatalf("events replay --to:\n%s", out)
	}
	if staging.count() != 1 {
		t.Fatalf("the staging agent got %d requests, want 1", staging.count())
	}
	r := staging.request(0)
	if r.URL.Path != "/staging" || !strings.HasPrefix(r.Header.Get("Replyonce-Run-Id"), "trial:") ||
		r.Header.Get("Replyonce-Fencing-Token") != "0" || r.Header.Get("Webhook-Signature") == "" {
		t.Fatalf("trial request %s with headers %v", r.URL.Path, r.Header)
	}
	show := runCLI(t, g, "events", "show", "stripe", id)
	if !strings.Contains(show, "trial 1") || !strings.Contains(show, "(to "+staging.srv.URL+"/staging)") || !strings.Contains(show, "dead after") {
		t.Fatalf("events show after a trial:\n%s", show)
	}
	if agent.count() != agentCalls {
		t.Fatalf("the source's agent got %d more requests after the trial", agent.count()-agentCalls)
	}
	var app App
	app.Stdout, app.Stderr, app.LookupEnv, app.Clock = io.Discard, io.Discard, env(nil), time.Now
	err := app.Run(context.Background(), []string{"events", "replay", "--status", "dead", "--to", staging.srv.URL, "--admin", "http://" + g.admin})
	if err == nil || !strings.Contains(err.Error(), "never sent in bulk") {
		t.Fatalf("a bulk trial: %v, want it refused", err)
	}
}
