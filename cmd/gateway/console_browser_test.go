package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// The console's browser tests drive a real headless Chromium (chromedp
// speaks the DevTools protocol to it) against a real `gateway serve`, so
// what they check is what a person sees: pages rendered, forms submitted,
// the one script run, and scripts a webhook smuggles in not run.
//
// REPLYONCE_CONSOLE_SCREENSHOTS=DIR writes a PNG of each main page there
// (the repository ignores screenshots/).

const consoleToken = "console-test-token-7c1d"

// chromiumPath finds the browser; in CI its absence fails the test, as a
// missing service does, so the console is never left unproven.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("REPLYONCE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: the console's browser tests need it in CI (.ci/run installs Debian's chromium)")
	}
	t.Skip("chromium not found; set REPLYONCE_CHROMIUM or install chromium to run the console's browser tests")
	return ""
}

// newBrowser starts headless Chromium with a fresh profile and returns a
// tab's context. Every JavaScript dialog is counted and dismissed.
func newBrowser(t *testing.T) (context.Context, *atomic.Int32) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1360, 900),
	}
	// A profile of its own, removed after the browser is gone (Chromium may
	// still be writing to it while it exits, so not t.TempDir).
	profile, err := os.MkdirTemp("", "replyonce-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, chromedp.UserDataDir(profile))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	dialogs := new(atomic.Int32)
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return ctx, dialogs
}

// consoleAgent is the agent behind the gateway: it answers with the
// status the test sets, and remembers each forward's run and token.
type consoleAgent struct {
	srv    *httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	seen   map[string][]forwardSeen
	// hooks run inside a forward, before the answer, as an agent's own
	// ledger effects do.
	hooks map[string]func(forwardSeen)
}

type forwardSeen struct {
	scope, runID string
	token        uint64
	delivery     string
}

func newConsoleAgent(t *testing.T) *consoleAgent {
	a := &consoleAgent{seen: map[string][]forwardSeen{}, hooks: map[string]func(forwardSeen){}}
	a.status.Store(http.StatusOK)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		tok, _ := strconv.ParseUint(r.Header.Get("Replyonce-Fencing-Token"), 10, 64)
		a.mu.Lock()
		id := r.Header.Get("Replyonce-Event-Id")
		f := forwardSeen{scope: r.Header.Get("Replyonce-Scope"), runID: r.Header.Get("Replyonce-Run-Id"),
			token: tok, delivery: r.Header.Get("Replyonce-Delivery")}
		a.seen[id] = append(a.seen[id], f)
		hook := a.hooks[id]
		delete(a.hooks, id)
		a.mu.Unlock()
		if hook != nil {
			hook(f)
		}
		w.WriteHeader(int(a.status.Load()))
		_, _ = w.Write([]byte(`{"agent":"answer for ` + id + `"}`))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *consoleAgent) on(id string, hook func(forwardSeen)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hooks[id] = hook
}

func (a *consoleAgent) forwards(id string) []forwardSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]forwardSeen{}, a.seen[id]...)
}

type consoleEnv struct {
	g      *gateway
	admin  string
	agent  *consoleAgent
	api    *ledgerapi.Client
	hc     *http.Client
	shots  string
	prefix string
}

func startConsoleEnv(t *testing.T, store string) *consoleEnv {
	t.Helper()
	agent := newConsoleAgent(t)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: %s}
store: %s
log: {level: error, format: json}
server: {read_header_timeout: 2s, shutdown_grace: 5s}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    scope: "{json:data.object.customer}"
    runs: supersede
    forward: {url: %[3]s/events, timeout: 5s, retry: {schedule: [0s, 1h]}}
  billing:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    scope: "{json:data.object.customer}"
    runs: independent
    forward: {url: %[3]s/events, timeout: 5s, retry: {schedule: [0s]}}
  github:
    provider: github
    secrets: [gh-console-secret]
    forward: {url: %[3]s/events, timeout: 2s}
  chat:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    scope: "{json:data.object.customer}"
    runs: independent
    forward: {url: %[3]s/events, timeout: 5s, debounce: {quiet: 1s, max_wait: 10s}}
`, consoleToken, store, agent.srv.URL)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, path)
	hc := newClient(t)
	api, err := ledgerapi.NewClient("http://"+g.admin, consoleToken, hc)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleEnv{g: g, admin: "http://" + g.admin, agent: agent, api: api, hc: hc,
		shots: os.Getenv("REPLYONCE_CONSOLE_SCREENSHOTS"), prefix: fmt.Sprintf("c%d", time.Now().UnixNano()%1e9)}
}

// stripe posts a signed Stripe event for customer on source and checks
// it was queued.
func (e *consoleEnv) stripe(t *testing.T, source, id, customer string, created time.Time) {
	t.Helper()
	body, header := stripeEvent(t, id, map[string]any{"created": created.Unix(), "data": map[string]any{"object": map[string]any{"customer": customer}}})
	if r := post(t, e.hc, e.g.hook(source), body, header); r.status != http.StatusAccepted {
		t.Fatalf("post %s: %d %v", id, r.status, r.body)
	}
}

// screenshot writes the tab to DIR/name.png when screenshots are asked for.
func (e *consoleEnv) screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if e.shots == "" {
		return
	}
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(e.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.shots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(tctx, actions...); err != nil {
		var loc, html string
		dctx, dcancel := context.WithTimeout(ctx, 3*time.Second)
		defer dcancel()
		_ = chromedp.Run(dctx, chromedp.Location(&loc), chromedp.OuterHTML("main", &html, chromedp.ByQuery))
		t.Fatalf("%s: %v (at %s)\n%s", what, err, loc, html)
	}
}

// eventually reloads url until check holds, for what the dispatcher does
// in the background.
func eventually(t *testing.T, ctx context.Context, what, url string, check func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		run(t, ctx, "load "+url, chromedp.Navigate(url), chromedp.WaitReady("main", chromedp.ByQuery))
		ok, err := check()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			_ = chromedp.Run(ctx, chromedp.Text("main", &text, chromedp.ByQuery))
			t.Fatalf("%s: not seen within 20s; the page says:\n%s", what, text)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// clickNav clicks what loads a new page and waits until the old page is
// gone, so that a later wait cannot match the page it left.
func clickNav(sel string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Evaluate(`document.body.dataset.stale = "1"`, nil),
		chromedp.Click(sel, chromedp.ByQuery),
		chromedp.WaitNotPresent(`body[data-stale]`, chromedp.ByQuery),
		chromedp.WaitReady("main", chromedp.ByQuery),
	}
}

func count(ctx context.Context, selector string) (int, error) {
	var n int
	err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll(`+strconv.Quote(selector)+`).length`, &n))
	return n, err
}

func signIn(t *testing.T, ctx context.Context, admin string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(admin+"/events"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", consoleToken, chromedp.ByID),
		clickNav("#signin"),
		chromedp.WaitVisible("#events-table", chromedp.ByID))
}

func TestConsoleInBrowser(t *testing.T) {
	e := startConsoleEnv(t, "{kind: memory}")
	ctx, dialogs := newBrowser(t)
	p := e.prefix
	now := time.Now()

	t.Run("sign in", func(t *testing.T) {
		var loc string
		run(t, ctx, "wrong token",
			chromedp.Navigate(e.admin+"/"),
			chromedp.WaitVisible("#token", chromedp.ByID),
			chromedp.Location(&loc))
		if !strings.HasPrefix(loc, e.admin+"/login") {
			t.Fatalf("without a session / went to %s, want the sign-in page", loc)
		}
		if strings.Contains(loc, consoleToken) {
			t.Fatal("the token is in the URL")
		}
		e.screenshot(t, ctx, "login")
		run(t, ctx, "wrong token",
			chromedp.SendKeys("#token", "not-the-token", chromedp.ByID),
			clickNav("#signin"),
			chromedp.WaitVisible("#login-error", chromedp.ByID))
		run(t, ctx, "right token",
			chromedp.SendKeys("#token", consoleToken, chromedp.ByID),
			clickNav("#signin"),
			chromedp.WaitVisible("#overview-table", chromedp.ByID),
			chromedp.Location(&loc))
		if strings.Contains(loc, consoleToken) {
			t.Fatal("the token is in the URL after sign in")
		}
		var cookieJS string
		run(t, ctx, "cookie", chromedp.Evaluate(`document.cookie`, &cookieJS))
		if strings.Contains(cookieJS, "replyonce_console") {
			t.Fatalf("the session cookie is readable from script: %q", cookieJS)
		}
	})

	// Three events on stripe while the agent is down: queued, with a
	// failed attempt each.
	e.agent.status.Store(http.StatusServiceUnavailable)
	for i, id := range []string{p + "_a1", p + "_a2", p + "_b1"} {
		e.stripe(t, "stripe", "evt_"+id, "cus_"+id, now.Add(time.Duration(i)*time.Second))
	}
	waitFor(t, "three failed attempts", func() bool {
		return len(e.agent.forwards("evt_"+p+"_a1")) > 0 && len(e.agent.forwards("evt_"+p+"_a2")) > 0 && len(e.agent.forwards("evt_"+p+"_b1")) > 0
	})

	t.Run("filter events", func(t *testing.T) {
		run(t, ctx, "filter by event id",
			chromedp.Navigate(e.admin+"/events"),
			chromedp.WaitVisible("#f-event", chromedp.ByID),
			chromedp.SendKeys("#f-source", "stripe", chromedp.ByID),
			chromedp.SendKeys("#f-event", "evt_"+p+"_a2", chromedp.ByID),
			clickNav("#f-apply"),
			chromedp.WaitVisible("#events-table", chromedp.ByID))
		rows, err := count(ctx, "#events-table tbody tr[data-event]")
		if err != nil || rows != 1 {
			t.Fatalf("rows for one event id = %d (%v), want 1", rows, err)
		}
		if n, _ := count(ctx, `tr[data-event="evt_`+p+`_a2"]`); n != 1 {
			t.Fatal("the filtered row is not the event asked for")
		}
		run(t, ctx, "filter by status", chromedp.Navigate(e.admin+"/events?status=queued&source=stripe"), chromedp.WaitVisible("#events-table", chromedp.ByID))
		for _, id := range []string{"_a1", "_a2", "_b1"} {
			if n, _ := count(ctx, `tr[data-event="evt_`+p+id+`"]`); n != 1 {
				t.Fatalf("status=queued does not list evt_%s%s", p, id)
			}
		}
		var first string
		run(t, ctx, "order", chromedp.AttributeValue("#events-table tbody tr", "data-event", &first, nil, chromedp.ByQuery))
		if first != "evt_"+p+"_b1" {
			t.Fatalf("first row is %s, want the newest (evt_%s_b1)", first, p)
		}
		run(t, ctx, "filter by scope", chromedp.Navigate(e.admin+"/events?scope=cus_"+p+"_a1"), chromedp.WaitVisible("#events-table", chromedp.ByID))
		if rows, _ := count(ctx, "#events-table tbody tr[data-event]"); rows != 1 {
			t.Fatalf("scope filter rows = %d, want 1", rows)
		}
		run(t, ctx, "filter by time", chromedp.Navigate(e.admin+"/events?source=stripe&until="+url.QueryEscape(now.Add(-time.Hour).UTC().Format("2006-01-02T15:04"))), chromedp.WaitVisible("#events-table", chromedp.ByID))
		if rows, _ := count(ctx, "#events-table tbody tr[data-event]"); rows != 0 {
			t.Fatalf("events received before an hour ago = %d, want 0", rows)
		}
		run(t, ctx, "events page", chromedp.Navigate(e.admin+"/events?source=stripe"), chromedp.WaitVisible("#events-table", chromedp.ByID))
		e.screenshot(t, ctx, "events")
	})

	t.Run("open an event, replay it, see the new attempt", func(t *testing.T) {
		id := "evt_" + p + "_a1"
		run(t, ctx, "open",
			chromedp.Navigate(e.admin+"/events?scope=cus_"+p+"_a1"),
			chromedp.WaitVisible("#events-table", chromedp.ByID),
			clickNav(`tr[data-event="`+id+`"] a`),
			chromedp.WaitVisible("#attempts", chromedp.ByID))
		before, err := count(ctx, "#attempts tr.attempt")
		if err != nil || before < 1 {
			t.Fatalf("attempts shown = %d (%v), want at least 1", before, err)
		}
		var cell string
		run(t, ctx, "attempt cells", chromedp.Text("#attempts tr.attempt", &cell, chromedp.ByQuery))
		if !strings.Contains(cell, "503") || !strings.Contains(cell, "answer for "+id) {
			t.Fatalf("attempt row %q lacks the agent status or the start of its answer", cell)
		}
		var waiting string
		run(t, ctx, "waiting for", chromedp.Text("#waiting", &waiting, chromedp.ByID))
		if !strings.Contains(waiting, "next attempt, due") {
			t.Fatalf("a queued event after a failed attempt says it waits for %q, want its next attempt", waiting)
		}
		// A trial to a staging agent first: listed among the attempts,
		// the event itself unchanged.
		staging := newSink(t)
		var statusBefore string
		run(t, ctx, "status before the trial", chromedp.Text("#event-status", &statusBefore, chromedp.ByID))
		run(t, ctx, "trial",
			chromedp.SendKeys("#trial-to", staging.srv.URL+"/staging", chromedp.ByID),
			clickNav("#trial"),
			chromedp.WaitVisible("#tried", chromedp.ByID))
		var tried, statusAfter string
		run(t, ctx, "trial notice", chromedp.Text("#tried", &tried, chromedp.ByID), chromedp.Text("#event-status", &statusAfter, chromedp.ByID))
		if !strings.Contains(tried, "Trial 1 sent to "+staging.srv.URL+"/staging: delivered (200)") || statusAfter != statusBefore || staging.count() != 1 {
			t.Fatalf("after a trial: notice %q, status %q (was %q), %d requests at the staging agent", tried, statusAfter, statusBefore, staging.count())
		}
		if n, err := count(ctx, "#attempts tr.attempt.trial"); err != nil || n != 1 {
			t.Fatalf("trial rows = %d (%v), want 1", n, err)
		}
		before++ // the trial's row
		e.agent.status.Store(http.StatusOK)
		run(t, ctx, "replay asks first", clickNav("#replay"), chromedp.WaitVisible("#replay-confirm", chromedp.ByID))
		run(t, ctx, "replay", clickNav("#replay-confirm"), chromedp.WaitVisible("#replayed", chromedp.ByID))
		var loc string
		run(t, ctx, "where", chromedp.Location(&loc))
		eventually(t, ctx, "a new attempt, delivered", loc, func() (bool, error) {
			n, err := count(ctx, "#attempts tr.attempt")
			var status string
			if err == nil {
				err = chromedp.Run(ctx, chromedp.Text("#event-status", &status, chromedp.ByID))
			}
			return n > before && status == "delivered", err
		})
		fw := e.agent.forwards(id)
		if len(fw) < 2 || fw[len(fw)-1].runID != fw[0].runID || fw[len(fw)-1].token <= fw[0].token {
			t.Fatalf("forwards %+v: a replay must be the same run with a newer token", fw)
		}
		e.screenshot(t, ctx, "event")
	})

	t.Run("keyboard only: skip link, then replay with Tab and Enter", func(t *testing.T) {
		id := "evt_" + p + "_b1"
		run(t, ctx, "open", chromedp.Navigate(e.admin+"/event?"+url.Values{"source": {"stripe"}, "event_id": {id}, "scope": {"cus_" + p + "_b1"}}.Encode()),
			chromedp.WaitVisible("#replay", chromedp.ByID))
		var focused string
		run(t, ctx, "first tab", chromedp.KeyEvent("\t"), chromedp.Evaluate(`document.activeElement.className`, &focused))
		if focused != "skip" {
			t.Fatalf("the first Tab focuses %q, want the skip link", focused)
		}
		for range 40 {
			run(t, ctx, "tab", chromedp.KeyEvent("\t"), chromedp.Evaluate(`document.activeElement.id`, &focused))
			if focused == "replay" {
				break
			}
		}
		if focused != "replay" {
			t.Fatal("Tab never reaches the replay button")
		}
		run(t, ctx, "enter",
			chromedp.Evaluate(`document.body.dataset.stale = "1"`, nil),
			chromedp.KeyEvent("\r"),
			chromedp.WaitNotPresent(`body[data-stale]`, chromedp.ByQuery),
			chromedp.WaitVisible("#replay-confirm", chromedp.ByID))
		for range 40 {
			run(t, ctx, "tab", chromedp.KeyEvent("\t"), chromedp.Evaluate(`document.activeElement.id`, &focused))
			if focused == "replay-confirm" {
				break
			}
		}
		if focused != "replay-confirm" {
			t.Fatal("Tab never reaches the confirm button")
		}
		run(t, ctx, "confirm",
			chromedp.Evaluate(`document.body.dataset.stale = "1"`, nil),
			chromedp.KeyEvent("\r"),
			chromedp.WaitNotPresent(`body[data-stale]`, chromedp.ByQuery),
			chromedp.WaitVisible("#replayed", chromedp.ByID))
	})

	t.Run("bulk replay of a filter", func(t *testing.T) {
		// billing gives up after one attempt: three dead letters.
		e.agent.status.Store(http.StatusServiceUnavailable)
		for i := range 3 {
			e.stripe(t, "billing", fmt.Sprintf("evt_%s_dead%d", p, i), fmt.Sprintf("cus_%s_dead%d", p, i), now)
		}
		waitFor(t, "three dead letters", func() bool {
			items, err := e.api.Deliveries(context.Background(), ledgerapi.DeliveryFilter{Source: "billing", Status: "dead"})
			return err == nil && len(items) == 3
		})
		e.agent.status.Store(http.StatusOK)
		run(t, ctx, "confirm page",
			chromedp.Navigate(e.admin+"/events?source=billing&status=dead"),
			chromedp.WaitVisible("#bulk-link", chromedp.ByID),
			clickNav("#bulk-link"),
			chromedp.WaitVisible("#bulk-count", chromedp.ByID))
		var n string
		run(t, ctx, "count", chromedp.Text("#bulk-count", &n, chromedp.ByID))
		if n != "3" {
			t.Fatalf("bulk replay asks to confirm %q events, want 3", n)
		}
		var status string
		run(t, ctx, "replay with progress",
			chromedp.Click("#bulk-confirm", chromedp.ByID),
			chromedp.WaitVisible("#bulk-progress", chromedp.ByID),
			chromedp.WaitVisible("#bulk-finished", chromedp.ByID),
			chromedp.Text("#bulk-finished", &status, chromedp.ByID))
		if !strings.Contains(status, "Replayed 3 event(s)") {
			t.Fatalf("progress says %q", status)
		}
		waitFor(t, "the three delivered", func() bool {
			for i := range 3 {
				d, err := e.api.ShowDelivery(context.Background(), "", "billing", fmt.Sprintf("evt_%s_dead%d", p, i))
				if err != nil {
					d, err = e.api.ShowDelivery(context.Background(), fmt.Sprintf("cus_%s_dead%d", p, i), "billing", fmt.Sprintf("evt_%s_dead%d", p, i))
				}
				if err != nil || d.Delivery.Status != "delivered" {
					return false
				}
			}
			return true
		})
		// Delivered events are listed without a scope, newest first.
		run(t, ctx, "delivered, any scope",
			chromedp.Navigate(e.admin+"/events?source=billing&status=delivered"),
			chromedp.WaitVisible("#events-table", chromedp.ByID))
		var order []string
		run(t, ctx, "rows", chromedp.Evaluate(`[...document.querySelectorAll("#events-table tbody tr[data-event]")].map(r => r.dataset.event)`, &order))
		if want := fmt.Sprintf("[evt_%[1]s_dead2 evt_%[1]s_dead1 evt_%[1]s_dead0]", p); fmt.Sprint(order) != want {
			t.Fatalf("delivered billing events listed %v, want %s", order, want)
		}
	})

	t.Run("resolve an ambiguous entry", func(t *testing.T) {
		bg := context.Background()
		scope := "amb_" + p
		c, err := e.api.Claim(bg, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "refund", Payload: map[string]any{"charge": "ch_1"}}, Summary: "refund ch_1"})
		if err != nil || !c.Acquired() {
			t.Fatalf("claim: %+v %v", c, err)
		}
		if _, err := e.api.Settle(bg, ledger.ClaimRef{Scope: scope, EntryID: c.EntryID, Attempt: c.Attempt}, ledger.OutcomeUnknown, nil, errors.New("timeout talking to the bank")); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "list",
			chromedp.Navigate(e.admin+"/ambiguous"),
			chromedp.WaitVisible(`tr[data-entry="`+c.EntryID+`"]`, chromedp.ByQuery))
		e.screenshot(t, ctx, "ambiguous")
		run(t, ctx, "resolve",
			clickNav(`tr[data-entry="`+c.EntryID+`"] a.button`),
			chromedp.WaitVisible("#who", chromedp.ByID),
			chromedp.SendKeys("#who", "Alice Ops", chromedp.ByID),
			clickNav("#resolve-confirm"),
			chromedp.WaitVisible("#resolved", chromedp.ByID))
		var notice string
		run(t, ctx, "notice", chromedp.Text("#resolved", &notice, chromedp.ByID))
		if !strings.Contains(notice, "operator:Alice Ops") || !strings.Contains(notice, "committed") {
			t.Fatalf("notice %q does not say who resolved it and how", notice)
		}
		if n, _ := count(ctx, `tr[data-entry="`+c.EntryID+`"]`); n != 0 {
			t.Fatal("the resolved entry is still listed as ambiguous")
		}
		hist, err := e.api.History(bg, scope)
		if err != nil || len(hist) != 1 || hist[0].State != ledger.StateCommitted || hist[0].ResolvedBy != "operator:Alice Ops" || hist[0].SettledAt.IsZero() {
			t.Fatalf("ledger after resolve: %+v %v", hist, err)
		}
	})

	t.Run("pause and resume a source", func(t *testing.T) {
		run(t, ctx, "pause",
			chromedp.Navigate(e.admin+"/sources"),
			chromedp.WaitVisible(`tr[data-source="github"] button`, chromedp.ByQuery),
			clickNav(`tr[data-source="github"] button`),
			chromedp.WaitVisible(`tr[data-source="github"] .st-wait`, chromedp.ByQuery))
		paused, err := e.api.PausedSources(context.Background())
		if err != nil || len(paused) != 1 || paused[0] != "github" {
			t.Fatalf("paused after the click: %v %v", paused, err)
		}
		e.screenshot(t, ctx, "sources")
		run(t, ctx, "resume",
			clickNav(`tr[data-source="github"] button`),
			chromedp.WaitVisible(`tr[data-source="github"] .st-ok`, chromedp.ByQuery))
		if paused, err := e.api.PausedSources(context.Background()); err != nil || len(paused) != 0 {
			t.Fatalf("paused after resume: %v %v", paused, err)
		}
	})

	// The agent replies through the ledger while it handles each forward,
	// as a real agent does, on the run and token it was forwarded.
	reply := func(f forwardSeen, text string) (ledger.Result, error) {
		return e.api.RunRef(f.scope, f.runID, f.token).Once(context.Background(), "reply", map[string]string{"text": text},
			func(context.Context, ledger.Call) (any, error) { return "sent", nil },
			ledger.OnceOptions{Summary: text, Conflict: ledger.ConflictSameIntent})
	}
	type outcome struct {
		f   forwardSeen
		res ledger.Result
		err error
	}

	t.Run("conversation after a supersede", func(t *testing.T) {
		scope := "cus_" + p + "_conv"
		old, newer := "evt_"+p+"_old", "evt_"+p+"_new"
		newDone := make(chan outcome, 1)
		oldDone := make(chan outcome, 1)
		e.agent.on(newer, func(f forwardSeen) {
			res, err := reply(f, "reply to the new message")
			newDone <- outcome{f, res, err}
		})
		e.agent.on(old, func(f forwardSeen) {
			// The older message's agent is slow: it answers after the newer
			// message's agent has replied.
			select {
			case <-newDone:
			case <-time.After(4 * time.Second):
			}
			res, err := reply(f, "reply to the old message")
			oldDone <- outcome{f, res, err}
		})
		e.stripe(t, "stripe", old, scope, now.Add(-time.Minute))
		waitFor(t, "old forwarded", func() bool { return len(e.agent.forwards(old)) > 0 })
		// A run's context is its receipt time (the provider's clock is
		// bounded by it) in milliseconds: the newer message must arrive in
		// a later millisecond to be newer.
		time.Sleep(20 * time.Millisecond)
		e.stripe(t, "stripe", newer, scope, now)
		var o outcome
		select {
		case o = <-oldDone:
		case <-time.After(10 * time.Second):
			t.Fatal("the old message's agent did not finish")
		}
		if o.err != nil || o.res.Status != ledger.StatusRefused || o.res.Reason != ledger.ReasonSuperseded {
			tl, _ := e.api.Timeline(context.Background(), scope)
			t.Fatalf("the old run's reply: %s %s %v, want refused superseded; runs %+v", o.res.Status, o.res.Reason, o.err, tl.Runs)
		}
		nf := e.agent.forwards(newer)[0]
		of := o.f
		run(t, ctx, "conversation", chromedp.Navigate(e.admin+"/scope?scope="+url.QueryEscape(scope)), chromedp.WaitVisible("#timeline", chromedp.ByID))
		var runs string
		run(t, ctx, "runs", chromedp.Text(`tr[data-run="`+of.runID+`"]`, &runs, chromedp.ByQuery))
		if !strings.Contains(runs, "superseded") || !strings.Contains(runs, strconv.FormatUint(of.token, 10)) {
			t.Fatalf("the old run's row %q does not say superseded with its token", runs)
		}
		run(t, ctx, "runs", chromedp.Text(`tr[data-run="`+nf.runID+`"]`, &runs, chromedp.ByQuery))
		if strings.Contains(runs, "superseded") || !strings.Contains(runs, strconv.FormatUint(nf.token, 10)) {
			t.Fatalf("the new run's row %q", runs)
		}
		var refused, commit string
		run(t, ctx, "timeline",
			chromedp.Text(`.moment[data-kind="refused"]`, &refused, chromedp.ByQuery),
			chromedp.Text(`.moment[data-kind="commit"]`, &commit, chromedp.ByQuery))
		if !strings.Contains(refused, "superseded") || !strings.Contains(refused, "reply to the old message") || !strings.Contains(refused, strconv.FormatUint(of.token, 10)) {
			t.Fatalf("refusal line %q lacks the reason, the effect or the run's token", refused)
		}
		if !strings.Contains(commit, "reply to the new message") || !strings.Contains(commit, nf.runID) {
			t.Fatalf("commit line %q", commit)
		}
		if n, _ := count(ctx, `.moment[data-kind="event received"]`); n != 2 {
			t.Fatalf("events received on the timeline = %d, want 2", n)
		}
		e.screenshot(t, ctx, "conversation")
	})

	t.Run("conversation after conversation_changed", func(t *testing.T) {
		scope := "cus_" + p + "_cc"
		first, second := "evt_"+p+"_cc1", "evt_"+p+"_cc2"
		secondDone := make(chan outcome, 1)
		firstDone := make(chan outcome, 1)
		e.agent.on(second, func(f forwardSeen) {
			res, err := reply(f, "answer the second message")
			secondDone <- outcome{f, res, err}
		})
		e.agent.on(first, func(f forwardSeen) {
			select {
			case <-secondDone:
			case <-time.After(4 * time.Second):
			}
			res, err := reply(f, "answer the first message")
			firstDone <- outcome{f, res, err}
		})
		e.stripe(t, "billing", first, scope, now.Add(-time.Minute))
		waitFor(t, "first forwarded", func() bool { return len(e.agent.forwards(first)) > 0 })
		time.Sleep(20 * time.Millisecond)
		e.stripe(t, "billing", second, scope, now)
		var o outcome
		select {
		case o = <-firstDone:
		case <-time.After(10 * time.Second):
			t.Fatal("the first message's agent did not finish")
		}
		if o.err != nil || o.res.Status != ledger.StatusRefused || o.res.Reason != ledger.ReasonConversationChanged {
			t.Fatalf("the first run's reply after the second's: %s %s %v, want refused conversation_changed", o.res.Status, o.res.Reason, o.err)
		}
		run(t, ctx, "conversation", chromedp.Navigate(e.admin+"/scope?scope="+url.QueryEscape(scope)), chromedp.WaitVisible("#timeline", chromedp.ByID))
		var refused string
		run(t, ctx, "refusal", chromedp.Text(`.moment[data-kind="refused"]`, &refused, chromedp.ByQuery))
		if !strings.Contains(refused, "conversation_changed") || !strings.Contains(refused, "answer the first message") || !strings.Contains(refused, strconv.FormatUint(o.f.token, 10)) {
			t.Fatalf("refusal line %q lacks the reason, the effect or the run's token", refused)
		}
		var commit string
		run(t, ctx, "commit", chromedp.Text(`.moment[data-kind="commit"]`, &commit, chromedp.ByQuery))
		if !strings.Contains(commit, "answer the second message") {
			t.Fatalf("commit line %q", commit)
		}
	})

	t.Run("overview refreshes", func(t *testing.T) {
		run(t, ctx, "overview", chromedp.Navigate(e.admin+"/"), chromedp.WaitVisible("#overview-table", chromedp.ByID))
		// The page script swaps the table for a fresh one every 5 s: mark
		// the current table and wait for it to be replaced.
		run(t, ctx, "mark", chromedp.Evaluate(`document.getElementById("overview-table").dataset.old = "1"`, nil))
		run(t, ctx, "refreshed", chromedp.WaitVisible(`#overview-table:not([data-old])`, chromedp.ByQuery))
		var text string
		run(t, ctx, "text", chromedp.Text("#overview-table", &text, chromedp.ByID))
		if !strings.Contains(text, "stripe") || !strings.Contains(text, "202") {
			t.Fatalf("overview %q lacks the stripe source's 202 answers", text)
		}
		e.screenshot(t, ctx, "overview")
	})

	t.Run("sign out", func(t *testing.T) {
		run(t, ctx, "sign out",
			chromedp.Navigate(e.admin+"/"),
			chromedp.WaitVisible(".signout button", chromedp.ByQuery),
			clickNav(".signout button"),
			chromedp.WaitVisible("#token", chromedp.ByID),
			chromedp.Navigate(e.admin+"/events"),
			chromedp.WaitVisible("#token", chromedp.ByID))
	})
	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialog(s) opened", n)
	}
}
