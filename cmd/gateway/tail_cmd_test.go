package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// tail prints an event once and each attempt once, however many polls
// see them, in one line each with what the operator needs.
func TestEventsTailLines(t *testing.T) {
	var out bytes.Buffer
	tl := newTailer(&out, nil)
	at := time.Date(2026, 12, 4, 2, 0, 0, 0, time.UTC)
	old := ledgerapi.DeliveryItemJSON{Source: "stripe", EventID: "evt_old", Scope: "stripe:evt_old", Status: "delivered", ReceivedAt: at.Add(-time.Minute), Attempts: 1}
	tl.baseline([]ledgerapi.DeliveryItemJSON{old})

	q := ledgerapi.DeliveryItemJSON{Source: "stripe", EventID: "evt_1", Scope: "stripe:evt_1", Status: "queued", ReceivedAt: at}
	first := ledgerapi.AttemptJSON{N: 1, At: at.Add(10 * time.Millisecond), Outcome: "failed", AgentStatus: 500, LatencyMs: 12.4,
		Error: "the agent answered 500 Internal Server Error"}
	second := ledgerapi.AttemptJSON{N: 2, At: at.Add(time.Second), Outcome: "delivered", AgentStatus: 200, LatencyMs: 3}
	poll := func(q ledgerapi.DeliveryItemJSON, attempts ...ledgerapi.AttemptJSON) {
		for _, item := range []ledgerapi.DeliveryItemJSON{old, q} {
			var got []ledgerapi.AttemptJSON
			if tl.needAttempts(item) {
				got = append([]ledgerapi.AttemptJSON{}, attempts...)
				if item.EventID == old.EventID {
					t.Fatalf("the attempts of an event in the baseline were read again")
				}
			}
			tl.take(item, got)
		}
	}
	poll(q)
	poll(q)
	q.Status, q.Attempts, q.Failures, q.LastStatus = "queued", 1, 1, 500
	poll(q, first)
	poll(q, first)
	q.Status, q.Attempts, q.LastStatus = "delivered", 2, 200
	poll(q, first, second)
	poll(q, first, second)

	want := "2026-12-04T02:00:00.000Z  stripe  evt_1  scope stripe:evt_1  received (queued)  queued\n" +
		"2026-12-04T02:00:00.010Z  stripe  evt_1  scope stripe:evt_1  attempt 1  failed  agent 500  12ms  the agent answered 500 Internal Server Error\n" +
		"2026-12-04T02:00:01.000Z  stripe  evt_1  scope stripe:evt_1  attempt 2  delivered  agent 200  3ms\n"
	if out.String() != want {
		t.Fatalf("tail printed:\n%s\nwant:\n%s", out.String(), want)
	}

	// --status: an event is printed, with its attempts, once it is in one
	// of the statuses.
	out.Reset()
	tl = newTailer(&out, map[string]bool{"dead": true})
	tl.baseline([]ledgerapi.DeliveryItemJSON{old})
	q = ledgerapi.DeliveryItemJSON{Source: "stripe", EventID: "evt_2", Scope: "stripe:evt_2", Status: "queued", ReceivedAt: at, Attempts: 1, Failures: 1}
	poll(q, first)
	if out.Len() != 0 {
		t.Fatalf("--status dead printed a queued event:\n%s", out.String())
	}
	q.Status, q.Attempts = "dead", 2
	dead := second
	dead.Outcome, dead.AgentStatus = "dead", 503
	poll(q, first, dead)
	if got := strings.Count(out.String(), "\n"); got != 3 || !strings.Contains(out.String(), "attempt 2  dead  agent 503") {
		t.Fatalf("--status dead:\n%s", out.String())
	}
	if _, err := tailStatusSet("delivered,paused"); err == nil || !strings.Contains(err.Error(), `"paused"`) {
		t.Fatalf("--status paused: %v, want an error naming it", err)
	}
}

// `events tail` against one instance prints an event another instance
// received, and each of its attempts (the first answered 500, the second
// 200), within 2 s of each, on the stores instances share.
func TestEventsTailAcrossInstances(t *testing.T) {
	stores := storeConfigs(t) // postgres and redis; memory and bolt are one process's
	for _, name := range []string{"postgres", "redis"} {
		store, ok := stores[name]
		if !ok {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s: REPLYONCE_TEST_%s is not set", name, strings.ToUpper(name))
			}
			t.Logf("%s: skipped, REPLYONCE_TEST_%s is not set", name, strings.ToUpper(name))
			continue
		}
		t.Run(name, func(t *testing.T) {
			agent := newSink(t)
			agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) {
				if n == 1 {
					return http.StatusInternalServerError, 0
				}
				return http.StatusOK, 0
			})
			cfg := writeConfig(t, store, "      mode: queued\n      retry: {schedule: [0s, 200ms]}\n", agent.srv.URL)
			a, b := startGateway(t, cfg), startGateway(t, cfg)

			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			app := &App{Stdout: stdout, Stderr: stderr, LookupEnv: env(nil), Clock: time.Now}
			go func() {
				done <- app.Run(ctx, []string{"events", "tail", "--source", "stripe", "--admin", "http://" + a.admin})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("events tail ended with %v, want nil on Ctrl-C", err)
				}
			}()
			waitFor(t, "tail to start", func() bool { return strings.Contains(stderr.String(), "tailing events") })

			id := fmt.Sprintf("evt_tail_%s_%d", name, time.Now().UnixNano())
			body, header := stripeEvent(t, id, nil)
			// A provider retries a 503 (the shared store busy for a moment on
			// this machine); the event is accepted once.
			client := newClient(t)
			waitFor(t, "instance B to accept the event", func() bool {
				r := post(t, client, b.hook("stripe"), body, header)
				switch {
				case r.status == http.StatusAccepted || r.status == http.StatusOK && r.body["status"] == "duplicate":
					return true
				case r.status == http.StatusServiceUnavailable && r.retryAfter != "":
					t.Logf("instance B answered 503 %v; retrying as a provider would", r.body)
					return false
				}
				t.Fatalf("instance B: %d %v", r.status, r.body)
				return false
			})
			within2s(t, stdout, "the event received by B", id+"  scope stripe:"+id+"  received (queued)")
			waitFor(t, "the first attempt", func() bool { return agent.count() >= 1 })
			within2s(t, stdout, "attempt 1", id+"  scope stripe:"+id+"  attempt 1  retry  agent 500")
			waitFor(t, "the second attempt", func() bool { return agent.count() >= 2 })
			within2s(t, stdout, "attempt 2", id+"  scope stripe:"+id+"  attempt 2  delivered  agent 200")
			for _, line := range []string{"received (queued)", "attempt 1 ", "attempt 2 "} {
				if n := strings.Count(stdout.String(), id+"  scope stripe:"+id+"  "+line); n != 1 {
					t.Errorf("%q printed %d times, want once:\n%s", line, n, stdout.String())
				}
			}
		})
	}
}

// within2s waits for out to hold want, failing after 2 s.
func within2s(t *testing.T, out *syncBuffer, what, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("events tail did not print %s within 2 s (want a line with %q):\n%s", what, want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An inline event is in the tail too: the attempt the provider was
// answered 503 for, then its retry's.
func TestEventsTailInline(t *testing.T) {
	agent := newSink(t)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) {
		if n == 1 {
			return http.StatusInternalServerError, 0
		}
		return http.StatusOK, 0
	})
	g := startGateway(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL))
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	app := &App{Stdout: stdout, Stderr: stderr, LookupEnv: env(nil), Clock: time.Now}
	go func() { done <- app.Run(ctx, []string{"events", "tail", "--admin", "http://" + g.admin}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("events tail ended with %v, want nil on Ctrl-C", err)
		}
	}()
	waitFor(t, "tail to start", func() bool { return strings.Contains(stderr.String(), "tailing events") })
	id := fmt.Sprintf("evt_tail_inline_%d", time.Now().UnixNano())
	body, header := stripeEvent(t, id, nil)
	client := newClient(t)
	if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusServiceUnavailable {
		t.Fatalf("first delivery: %d %v, want 503 (the agent answered 500)", r.status, r.body)
	}
	within2s(t, stdout, "the inline event", id+"  scope stripe:"+id+"  received (inline)  failed")
	within2s(t, stdout, "attempt 1", id+"  scope stripe:"+id+"  attempt 1  retry  agent 500")
	if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusOK {
		t.Fatalf("the provider's retry: %d %v", r.status, r.body)
	}
	within2s(t, stdout, "attempt 2", id+"  scope stripe:"+id+"  attempt 2  delivered  agent 200")
}
