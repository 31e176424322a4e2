package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

const adminToken = "admin-token-for-tests"

// ledgerConfig is a serve config whose admin API needs adminToken.
func ledgerConfig(t *testing.T, adminListen, sinkURL string) string {
	t.Helper()
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: %s, token: ${GATEWAY_ADMIN_TOKEN}}
store: {kind: memory}
log: {level: warn, format: json}
server: {shutdown_grace: 5s}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    forward: {url: %s/events, timeout: 2s, mode: inline}
`, adminListen, sinkURL)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runLedger runs "gateway ledger ARGS..." and returns its output.
func runLedger(t *testing.T, lookup func(string) (string, bool), args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: lookup}
	err := app.Run(context.Background(), append([]string{"ledger"}, args...))
	return out.String(), err
}

func noEnv(string) (string, bool) { return "", false }

func TestLedgerCommandsAgainstServe(t *testing.T) {
	sink := newSink(t)
	path := ledgerConfig(t, "127.0.0.1:0", sink.srv.URL)
	g := startGatewayWithEnv(t, path, map[string]string{"GATEWAY_ADMIN_TOKEN": adminToken})
	admin := "http://" + g.admin
	client := newClient(t)

	// A delivered event leaves its deliver entry in its scope.
	body, header := stripeEvent(t, "evt_ledger_1", nil)
	if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusOK {
		t.Fatalf("delivery: %d %v", r.status, r.body)
	}

	out, err := runLedger(t, noEnv, "history", "stripe:evt_ledger_1", "--admin", admin, "--token", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scope stripe:evt_ledger_1: 1 entry,", "CLAIMED", "delivered (agent 200)", "deliver", `{"eventId":"evt_ledger_1","source":"stripe"}`, "stripe:evt_ledger_1 #1"} {
		if !strings.Contains(out, want) {
			t.Errorf("history table lacks %q:\n%s", want, out)
		}
	}

	// --json prints the API's shape; the token may come from the environment.
	out, err = runLedger(t, env(map[string]string{"GATEWAY_ADMIN_TOKEN": adminToken}), "history", "--json", "--admin", admin, "stripe:evt_ledger_1")
	if err != nil {
		t.Fatal(err)
	}
	var hist ledgerapi.EntriesJSON
	if err := json.Unmarshal([]byte(out), &hist); err != nil || len(hist.Entries) != 1 || hist.Entries[0].Intent != "deliver" || hist.Entries[0].State != "committed" {
		t.Fatalf("history --json: %v\n%s", err, out)
	}

	// An effect with an unknown outcome, made through the same admin API.
	api, err := ledgerapi.NewClient(admin, adminToken, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refund := ledger.Key{Scope: "order-\x1b[31m42", Intent: "refund", Payload: map[string]int{"cents": 2500}}
	cl, err := api.Claim(ctx, ledger.ClaimRequest{Key: refund})
	if err != nil || !cl.Acquired() {
		t.Fatal(cl, err)
	}
	if _, err := api.Settle(ctx, cl.Ref(), ledger.OutcomeUnknown, nil, errors.New("provider timed out after send")); err != nil {
		t.Fatal(err)
	}

	out, err = runLedger(t, noEnv, "ambiguous", "--admin", admin, "--token", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SCOPE", cl.EntryID, "refund", "provider timed out after send", "1 ambiguous", "order-?[31m42"} {
		if !strings.Contains(out, want) {
			t.Errorf("ambiguous table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a control character from a scope reached the terminal:\n%q", out)
	}

	// Resolving a committed entry is refused and says why.
	hid := hist.Entries[0].ID
	_, err = runLedger(t, noEnv, "resolve", "stripe:evt_ledger_1", hid, "--outcome", "committed", "--admin", admin, "--token", adminToken)
	if !errors.Is(err, ledger.ErrNotAmbiguous) || !strings.Contains(err.Error(), "only ambiguous entries") {
		t.Fatalf("resolve of a committed entry: %v", err)
	}

	out, err = runLedger(t, noEnv, "resolve", refund.Scope, cl.EntryID, "--outcome", "not_applied", "--admin", admin, "--token", adminToken, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var resolved ledgerapi.EntryOnlyJSON
	if err := json.Unmarshal([]byte(out), &resolved); err != nil || resolved.Entry.State != "failed" || resolved.Entry.ResolvedBy != "operator" {
		t.Fatalf("resolve --json: %v\n%s", err, out)
	}
	out, err = runLedger(t, noEnv, "ambiguous", "--admin", admin, "--token", adminToken)
	if err != nil || !strings.Contains(out, "no ambiguous entries") {
		t.Fatalf("ambiguous after resolve: %v\n%s", err, out)
	}

	// Wrong or missing token: refused, with a hint.
	_, err = runLedger(t, noEnv, "ambiguous", "--admin", admin, "--token", "guess")
	if !errors.Is(err, ledgerapi.ErrUnauthorized) || !strings.Contains(err.Error(), "GATEWAY_ADMIN_TOKEN") {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err = runLedger(t, noEnv, "ambiguous", "--admin", admin); !errors.Is(err, ledgerapi.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}

	// The admin listener: probes are open, metrics and the API need the token.
	for _, c := range []struct {
		path, auth string
		status     int
	}{
		{"/healthz", "", 200}, {"/readyz", "", 200},
		{"/metrics", "", 401}, {"/metrics", "Bearer " + adminToken, 200},
		{"/v1/ambiguous", "", 401}, {"/v1/ambiguous", "Bearer " + adminToken, 200},
	} {
		req, _ := http.NewRequest(http.MethodGet, admin+c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("GET %s (auth %q): %d, want %d", c.path, c.auth, resp.StatusCode, c.status)
		}
	}
}

// startGatewayWithEnv is startGateway with extra environment variables.
func startGatewayWithEnv(t *testing.T, configPath string, extra map[string]string) *gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &gateway{cancel: cancel, done: make(chan error, 1), stderr: &syncBuffer{}}
	ready := make(chan struct{})
	app := &App{Stdout: io.Discard, Stderr: g.stderr, LookupEnv: env(extra),
		Ready: func(public, admin string) { g.public, g.admin = public, admin; close(ready) }}
	go func() { g.done <- app.Run(ctx, []string{"serve", "--config", configPath}) }()
	select {
	case <-ready:
	case err := <-g.done:
		t.Fatalf("serve stopped before listening: %v\n%s", err, g.stderr.String())
	}
	t.Cleanup(func() { g.stop(t) })
	return g
}

func TestLedgerCommandFindsTheAdminAPIFromConfig(t *testing.T) {
	l := ledger.New(memory.New(nil), ledger.Options{})
	if _, err := l.Once(context.Background(), ledger.Key{Scope: "conv-7", Intent: "reply", Payload: "m1"},
		func(context.Context, ledger.Call) (any, error) { return "ok", nil }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ledgerapi.NewHandler(l, adminToken, nil))
	defer srv.Close()
	path := ledgerConfig(t, strings.TrimPrefix(srv.URL, "http://"), "http://127.0.0.1:9")

	// The token comes from the config's admin.token, itself from the
	// environment the config expands.
	lookup := env(map[string]string{"GATEWAY_ADMIN_TOKEN": adminToken})
	out, err := runLedger(t, lookup, "history", "conv-7", "--config", path)
	if err != nil || !strings.Contains(out, "reply") || !strings.Contains(out, `"m1"`) {
		t.Fatalf("history via --config: %v\n%s", err, out)
	}
	// --admin wins over the config.
	_, err = runLedger(t, lookup, "history", "conv-7", "--config", path, "--admin", "http://127.0.0.1:1")
	if !errors.Is(err, ledgerapi.ErrUnavailable) || !strings.Contains(err.Error(), "is the gateway running") {
		t.Fatalf("unreachable admin: %v", err)
	}
}

// A delivery the agent refused is committed in the ledger (it must not be
// redelivered), but history shows the refusal, not "committed".
func TestLedgerHistoryShowsRejections(t *testing.T) {
	sink := newSink(t)
	// 422: the event itself is refused (a 401 is a configuration fault,
	// retried, never a rejection).
	sink.answer = func(int, *http.Request) (int, time.Duration) { return http.StatusUnprocessableEntity, 0 }
	path := ledgerConfig(t, "127.0.0.1:0", sink.srv.URL)
	g := startGatewayWithEnv(t, path, map[string]string{"GATEWAY_ADMIN_TOKEN": adminToken})
	body, header := stripeEvent(t, "evt_refused", nil)
	post(t, newClient(t), g.hook("stripe"), body, header)
	out, err := runLedger(t, noEnv, "history", "stripe:evt_refused", "--admin", "http://"+g.admin, "--token", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "rejected (agent 422)") || strings.Contains(out, " committed ") {
		t.Fatalf("history of a refused delivery:\n%s", out)
	}
}

// A 503 in the API's own shape comes from a running gateway: the hint is
// about its store, not about whether it runs or where.
func TestLedger503FromARunningGateway(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"store_unavailable","message":"ledger store: connection refused"}}`))
	}))
	defer srv.Close()
	_, err := runLedger(t, noEnv, "history", "s", "--admin", srv.URL, "--token", adminToken)
	if !errors.Is(err, ledgerapi.ErrUnavailable) || strings.Contains(err.Error(), "--admin") || !strings.Contains(err.Error(), "store") {
		t.Fatalf("503 from a running gateway: %v", err)
	}
}

func TestLedgerCommandUsage(t *testing.T) {
	cases := [][]string{
		{},
		{"frob"},
		{"history"},
		{"history", "a", "b"},
		{"ambiguous", "extra"},
		{"resolve", "scope"},
		{"resolve", "scope", "id"},
		{"resolve", "scope", "id", "--outcome", "unknown"},
		{"history", "s", "--admin", "127.0.0.1:8081"},
		{"history", "s", "--nope"},
	}
	for _, args := range cases {
		_, err := runLedger(t, noEnv, args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("ledger %q: %v, want a usage error", args, err)
		}
	}
	out, err := runLedger(t, noEnv, "help")
	if err != nil || !strings.Contains(out, "resolve SCOPE ENTRY_ID --outcome") {
		t.Fatalf("help: %v %s", err, out)
	}
}

func TestDialable(t *testing.T) {
	for in, want := range map[string]string{
		":8081": "127.0.0.1:8081", "0.0.0.0:8081": "127.0.0.1:8081", "[::]:8081": "[::1]:8081",
		"10.0.0.2:8081": "10.0.0.2:8081", "localhost:9": "localhost:9",
	} {
		if got := dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
}

// An agent's claim never settled within its pending TTL reads the same in
// the CLI as on every console page: "ambiguous (abandoned)" in history,
// and listed by ambiguous as abandoned; before its deadline it is pending.
func TestLedgerShowsAbandonedClaimsAsTheConsoleDoes(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	l := ledger.New(memory.New(clock.Now), ledger.Options{Clock: clock.Now})
	cl, err := l.Claim(context.Background(), ledger.ClaimRequest{Key: ledger.Key{Scope: "conv-9", Intent: "reply", Payload: "m1"}, PendingTTL: time.Minute})
	if err != nil || !cl.Acquired() {
		t.Fatal(cl, err)
	}
	srv := httptest.NewServer(ledgerapi.NewHandler(l, adminToken, nil))
	defer srv.Close()
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: noEnv, Clock: clock.Now}
		if err := app.Run(context.Background(), append(append([]string{"ledger"}, args...), "--admin", srv.URL, "--token", adminToken)); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if out := run("history", "conv-9"); !strings.Contains(out, "pending") || strings.Contains(out, "abandoned") {
		t.Fatalf("history before the deadline:\n%s", out)
	}
	clock.Advance(2 * time.Minute)
	if out := run("history", "conv-9"); !strings.Contains(out, "ambiguous (abandoned)") {
		t.Fatalf("history past the deadline:\n%s", out)
	}
	if out := run("ambiguous"); !strings.Contains(out, "abandoned: never settled within its pending TTL") {
		t.Fatalf("ambiguous past the deadline:\n%s", out)
	}
}

// `ledger history` lists a long scope a page at a time, newest first, and
// each page but the last ends with the command that lists the older
// entries; following them lists every entry once.
func TestLedgerHistoryPages(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	l := ledger.New(memory.New(clock.Now), ledger.Options{Clock: clock.Now})
	const scope, n = "conv 7's", 60 // quoted for the shell in the hint
	for i := range n {
		if _, err := l.Once(context.Background(), ledger.Key{Scope: scope, Intent: "reply", Payload: fmt.Sprintf("m%02d", i)},
			func(context.Context, ledger.Call) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	srv := httptest.NewServer(ledgerapi.NewHandler(l, adminToken, nil))
	defer srv.Close()
	args := []string{"history", scope, "--limit", "25"}
	var listed []string
	for page := 1; ; page++ {
		out, err := runLedger(t, noEnv, append(args, "--admin", srv.URL, "--token", adminToken)...)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if i := strings.Index(line, `"m`); i >= 0 {
				listed = append(listed, line[i+1:i+4])
			}
		}
		_, hint, more := strings.Cut(out, "older entries: gateway ledger history ")
		if !more {
			if page != 3 {
				t.Fatalf("page %d is the last:\n%s", page, out)
			}
			break
		}
		if !strings.HasPrefix(hint, `'conv 7'\''s' --before `) || page > 3 {
			t.Fatalf("page %d's hint: %q", page, hint)
		}
		args = []string{"history", scope, "--limit", "25", "--before", strings.TrimSpace(strings.TrimPrefix(hint, `'conv 7'\''s' --before `))}
	}
	if len(listed) != n {
		t.Fatalf("listed %d entries, want %d: %v", len(listed), n, listed)
	}
	for i, m := range listed {
		if want := fmt.Sprintf("m%02d", n-1-i); m != want {
			t.Fatalf("entry %d is %s, want %s (newest first)", i, m, want)
		}
	}
	for _, bad := range [][]string{{"history", scope, "--limit", "0"}, {"history", scope, "--limit", "1001"}} {
		var u usageError
		if _, err := runLedger(t, noEnv, append(bad, "--admin", srv.URL, "--token", adminToken)...); !errors.As(err, &u) {
			t.Errorf("ledger %q: %v, want a usage error", bad, err)
		}
	}
}
