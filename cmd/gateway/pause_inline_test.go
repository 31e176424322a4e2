package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// Pausing an inline source is refused with a message saying pause applies
// to queued delivery.
func TestPausingAnInlineSourceIsRefused(t *testing.T) {
	agent := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL)) // inline
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
	err := app.Run(context.Background(), []string{"sources", "pause", "stripe", "--admin", "http://" + g.admin})
	if err == nil || !strings.Contains(err.Error(), "pause applies to queued delivery") {
		t.Fatalf("pausing an inline source: err %v, output %q; want a refusal saying pause applies to queued delivery", err, out.String())
	}
	if paused := runCLI(t, g, "events", "list", "--status", "paused"); strings.Contains(paused, "stripe") {
		t.Fatalf("the inline source is paused anyway:\n%s", paused)
	}
}

// Once `gateway sources pause` returns, the instance that took the call
// delivers none of the source's events, without waiting for its sweep.
func TestPauseStopsTheInstanceThatTookTheCall(t *testing.T) {
	agent := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "      mode: queued\n", agent.srv.URL))
	if out := runCLI(t, g, "sources", "pause", "stripe"); !strings.Contains(out, "paused stripe") {
		t.Fatalf("pause: %s", out)
	}
	client := newClient(t)
	id := "evt_paused_at_once"
	body, header := stripeEvent(t, id, nil)
	if r := post(t, client, g.hook("stripe"), body, header); r.status != 202 {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	// Handed over to the dispatcher, it would be recorded delivering (or
	// delivered) by the time the accept answers.
	if st := deliveryStatus(t, g, id); st != "queued" || agent.count() != 0 {
		t.Fatalf("right after pause returned: %s, %d forwards; want queued, none", st, agent.count())
	}
	runCLI(t, g, "sources", "resume", "stripe")
	waitFor(t, "delivery after resume", func() bool { return deliveryStatus(t, g, id) == "delivered" })
	if n := agent.count(); n != 1 {
		t.Fatalf("%d forwards after resume, want 1", n)
	}
}
