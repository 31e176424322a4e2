package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The console's views of issue #26 ("one event log for both modes"): the
// Rejected list, the Conversations page and a timeline that tells the
// truth, in a real Chromium against a real `gateway serve`.
func TestConsoleEventLogInBrowser(t *testing.T) {
	e := startConsoleEnv(t, "{kind: memory}")
	ctx, dialogs := newBrowser(t)
	p := e.prefix
	signIn(t, ctx, e.admin)

	t.Run("rejected requests, redacted and escaped", func(t *testing.T) {
		const sigValue, authValue = "v1=forged0sig0value0" + "c0ffee", "Bearer leaked-credential-9f3a"
		_, header := stripeEvent(t, "evt_"+p+"_forged", nil)
		body := []byte(`{"id":"evt_` + p + `_forged","note":"<img src=x onerror=\"alert(1)\"><script>alert(2)</script>"}`)
		header.Set("Stripe-Signature", "t=1,"+sigValue)
		header.Set("Authorization", authValue)
		if r := post(t, e.hc, e.g.hook("stripe"), body, header); r.status != http.StatusUnauthorized {
			t.Fatalf("forged request: %d, want 401", r.status)
		}
		run(t, ctx, "rejected page",
			chromedp.Navigate(e.admin+"/sources"),
			chromedp.WaitVisible(`nav a[href="/rejected"]`, chromedp.ByQuery),
			clickNav(`nav a[href="/rejected"]`),
			chromedp.WaitVisible(`#rejected-sources a[data-source="stripe"]`, chromedp.ByQuery),
			clickNav(`#rejected-sources a[data-source="stripe"]`),
			chromedp.WaitVisible("#rejected", chromedp.ByID))
		if n, err := count(ctx, "#rejected tr.rejected"); err != nil || n != 1 {
			t.Fatalf("rejected rows = %d (%v), want the one forged request", n, err)
		}
		var row, page string
		run(t, ctx, "row", chromedp.Text("#rejected tr.rejected", &row, chromedp.ByQuery),
			chromedp.Evaluate(`document.documentElement.outerHTML`, &page))
		for _, want := range []string{"signature", "401", "127.0.0.1", "Stripe-Signature: [redacted]", "Authorization: [redacted]",
			"evt_" + p + "_forged", `<img src=x onerror=\"alert(1)\"><script>`} {
			if !strings.Contains(row, want) {
				t.Errorf("the rejected row lacks %q:\n%s", want, row)
			}
		}
		for _, secret := range []string{sigValue, "leaked-credential-9f3a", stripeSecret} {
			if strings.Contains(page, secret) {
				t.Errorf("the Rejected page shows the secret value %q", secret)
			}
		}
		if n, _ := count(ctx, "#rejected img, #rejected script"); n != 0 {
			t.Errorf("the forged body became %d element(s) on the page", n)
		}
		e.screenshot(t, ctx, "rejected")
		// A flood: the newest 100 are kept and listed, newest first.
		for i := range 120 {
			_, header := stripeEvent(t, fmt.Sprintf("evt_%s_flood%03d", p, i), nil)
			header.Set("Stripe-Signature", "t=1,"+sigValue)
			if r := post(t, e.hc, e.g.hook("stripe"), []byte(fmt.Sprintf(`{"id":"evt_%s_flood%03d"}`, p, i)), header); r.status != http.StatusUnauthorized {
				t.Fatalf("forged request %d: %d, want 401", i, r.status)
			}
		}
		run(t, ctx, "after the flood", chromedp.Navigate(e.admin+"/rejected?source=stripe"), chromedp.WaitVisible("#rejected", chromedp.ByID))
		if n, _ := count(ctx, "#rejected tr.rejected"); n != 100 {
			t.Fatalf("after 121 forged requests the list shows %d, want the newest 100", n)
		}
		var first, last, flood string
		run(t, ctx, "ends", chromedp.Text("#rejected tr.rejected:first-child", &first, chromedp.ByQuery),
			chromedp.Text("#rejected tr.rejected:last-child", &last, chromedp.ByQuery),
			chromedp.Evaluate(`document.documentElement.outerHTML`, &flood))
		if !strings.Contains(first, fmt.Sprintf("evt_%s_flood119", p)) || !strings.Contains(last, fmt.Sprintf("evt_%s_flood020", p)) {
			t.Fatalf("the list runs from %q to %q, want flood119 down to flood020", first, last)
		}
		if strings.Contains(flood, sigValue) {
			t.Fatal("a signature value shows after the flood")
		}
		// Another source refused nothing.
		run(t, ctx, "github", chromedp.Navigate(e.admin+"/rejected?source=github"), chromedp.WaitVisible("#rejected", chromedp.ByID))
		if n, _ := count(ctx, "#rejected tr.rejected"); n != 0 {
			t.Errorf("github lists %d rejected request(s), want none", n)
		}
	})

	t.Run("overview: the last hour per minute, this instance", func(t *testing.T) {
		// The forged requests above were answered 401, not accepted; the
		// stripe events below are: the current minute counts them once the
		// instance has sampled its metrics (every 2 s).
		for i := range 3 {
			e.stripe(t, "stripe", fmt.Sprintf("evt_%s_chart%d", p, i), "chart_"+p, time.Now())
		}
		eventually(t, ctx, "the chart's current minute", e.admin+"/", func() (bool, error) {
			var total int
			err := chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll('svg.spark[data-source="stripe"] g.minute')].reduce((n, g) => n + Number(g.dataset.accepted), 0)`, &total))
			return total >= 3, err
		})
		if n, _ := count(ctx, `svg.spark[data-source="stripe"] g.minute`); n != 60 {
			t.Fatalf("the stripe chart has %d minutes, want 60", n)
		}
		var legend string
		run(t, ctx, "legend", chromedp.Text("#chart-legend", &legend, chromedp.ByID))
		if !strings.Contains(legend, "this instance") {
			t.Fatalf("the chart's legend %q does not say whose figures they are", legend)
		}
		e.screenshot(t, ctx, "overview-chart")
	})

	t.Run("conversations, newest first, filtered, linking to the timeline", func(t *testing.T) {
		now := time.Now()
		x, y, z := "cus_"+p+"_x", "cus_"+p+"_y", "cus_"+p+"_z"
		for _, ev := range []struct{ source, id, scope string }{{"stripe", "x1", x}, {"stripe", "y1", y}, {"stripe", "x2", x}, {"billing", "z1", z}} {
			e.stripe(t, ev.source, "evt_"+p+"_"+ev.id, ev.scope, now)
			// Receipt times are kept to the millisecond: one apart, so
			// that newest first has one answer.
			time.Sleep(5 * time.Millisecond)
		}
		run(t, ctx, "conversations",
			chromedp.Navigate(e.admin+"/events"),
			chromedp.WaitVisible(`nav a[href="/conversations"]`, chromedp.ByQuery),
			clickNav(`nav a[href="/conversations"]`),
			chromedp.WaitVisible("#c-prefix", chromedp.ByID),
			chromedp.SendKeys("#c-prefix", "cus_"+p+"_", chromedp.ByID),
			clickNav("#c-apply"),
			chromedp.WaitVisible("#conversations", chromedp.ByID))
		var order []string
		run(t, ctx, "rows", chromedp.Evaluate(`[...document.querySelectorAll("#conversations tbody tr[data-scope]")].map(r => r.dataset.scope)`, &order))
		if fmt.Sprint(order) != fmt.Sprint([]string{z, x, y}) {
			t.Fatalf("conversations listed %v, want newest first [%s %s %s]", order, z, x, y)
		}
		var row string
		run(t, ctx, "row", chromedp.Text(`tr[data-scope="`+x+`"]`, &row, chromedp.ByQuery))
		if !strings.Contains(row, "stripe evt_"+p+"_x2") || strings.Contains(row, "x1") {
			t.Fatalf("the row of %s does not name its last event x2: %q", x, row)
		}
		var cells []string
		run(t, ctx, "cells", chromedp.Evaluate(`[...document.querySelectorAll('tr[data-scope="`+x+`"] td.num')].map(c => c.textContent.trim())`, &cells))
		if len(cells) != 3 || cells[0] != "2" || !strings.HasPrefix(cells[2], "2 ") {
			t.Fatalf("the row of %s counts %v, want 2 events and 2 runs", x, cells)
		}
		e.screenshot(t, ctx, "conversations")
		run(t, ctx, "by source",
			chromedp.SetValue("#c-source", "stripe", chromedp.ByID),
			clickNav("#c-apply"),
			chromedp.WaitVisible("#conversations", chromedp.ByID),
			chromedp.Evaluate(`[...document.querySelectorAll("#conversations tbody tr[data-scope]")].map(r => r.dataset.scope)`, &order))
		if fmt.Sprint(order) != fmt.Sprint([]string{x, y}) {
			t.Fatalf("stripe's conversations listed %v, want [%s %s]", order, x, y)
		}
		run(t, ctx, "open the timeline",
			clickNav(`tr[data-scope="`+x+`"] th a`),
			chromedp.WaitVisible("#timeline", chromedp.ByID))
		var name string
		run(t, ctx, "scope", chromedp.Text("#scope-name", &name, chromedp.ByID))
		if name != x {
			t.Fatalf("the link opened the timeline of %q, want %s", name, x)
		}
		if n, _ := count(ctx, `.moment[data-kind="event received"]`); n != 2 {
			t.Fatalf("events received on %s's timeline = %d, want 2", x, n)
		}
	})

	t.Run("timeline: folded, superseded, every attempt, nothing red for them", func(t *testing.T) {
		now := time.Now()
		// A burst of five on a debounced source: the newest is delivered
		// for all of them.
		burst := "cus_" + p + "_burst"
		for i := 1; i <= 5; i++ {
			e.stripe(t, "chat", fmt.Sprintf("evt_%s_b%d", p, i), burst, now)
		}
		waitFor(t, "the burst delivered", func() bool { return len(e.agent.forwards("evt_"+p+"_b5")) > 0 })
		for i := 1; i <= 4; i++ {
			if n := len(e.agent.forwards(fmt.Sprintf("evt_%s_b%d", p, i))); n != 0 {
				t.Fatalf("b%d was forwarded %d time(s); a folded event is not", i, n)
			}
		}
		eventually(t, ctx, "the burst's timeline", e.admin+"/scope?scope="+burst, func() (bool, error) {
			n, err := count(ctx, `.moment[data-kind="folded"]`)
			d, _ := count(ctx, `.moment[data-kind="attempt"][data-status="delivered"]`)
			return n == 4 && d == 1, err
		})
		var folded []string
		run(t, ctx, "folded lines", chromedp.Evaluate(`[...document.querySelectorAll('.moment[data-kind="folded"]')].map(m => m.innerText)`, &folded))
		for _, f := range folded {
			if !strings.Contains(f, "folded into evt_"+p+"_b5") {
				t.Errorf("folded line %q does not say folded into b5", f)
			}
		}
		if n, _ := count(ctx, `.moment[data-kind="not applied"], .moment[data-kind="claim"]`); n != 0 {
			t.Errorf("%d line(s) show a delivery's own claim or a red \"not applied\"", n)
		}
		if n, _ := count(ctx, `.moment[data-kind="folded"] .st-bad, .moment[data-status="coalesced"] .st-bad`); n != 0 {
			t.Errorf("%d folded event(s) drawn red", n)
		}
		e.screenshot(t, ctx, "timeline-burst")

		// A superseded run: s1 fails once and waits an hour for its retry;
		// s2 on the same conversation supersedes it.
		e.agent.status.Store(http.StatusServiceUnavailable)
		defer e.agent.status.Store(http.StatusOK)
		sup := "cus_" + p + "_sup"
		e.stripe(t, "stripe", "evt_"+p+"_s1", sup, now.Add(-time.Minute))
		waitFor(t, "s1's failed attempt", func() bool { return len(e.agent.forwards("evt_"+p+"_s1")) > 0 })
		time.Sleep(20 * time.Millisecond) // a later millisecond: a newer run
		e.stripe(t, "stripe", "evt_"+p+"_s2", sup, now)
		eventually(t, ctx, "the superseded timeline", e.admin+"/scope?scope="+sup, func() (bool, error) {
			n, err := count(ctx, `.moment[data-kind="superseded"]`)
			a, _ := count(ctx, `.moment[data-kind="attempt"]`)
			return n == 1 && a >= 2, err
		})
		var line string
		run(t, ctx, "superseded line", chromedp.Text(`.moment[data-kind="superseded"]`, &line, chromedp.ByQuery))
		s2 := e.agent.forwards("evt_" + p + "_s2")
		if len(s2) == 0 || !strings.Contains(line, "superseded by run "+s2[0].runID) {
			t.Fatalf("superseded line %q does not name s2's run (%+v)", line, s2)
		}
		if n, _ := count(ctx, `.moment[data-kind="superseded"] .st-bad`); n != 0 {
			t.Error("the superseded line is red")
		}
		var s1 string
		run(t, ctx, "s1's attempt", chromedp.Evaluate(`[...document.querySelectorAll('.moment[data-kind="attempt"]')].map(m => m.innerText).filter(t => t.includes("_s1")).join("\n")`, &s1))
		if !strings.Contains(s1, "attempt 1, agent answered 503") {
			t.Errorf("s1's failed attempt is not on the timeline: %q", s1)
		}
		if n, _ := count(ctx, `.moment[data-kind="not applied"], .moment[data-kind="claim"]`); n != 0 {
			t.Errorf("%d line(s) show a delivery's own claim or a red \"not applied\"", n)
		}
		e.screenshot(t, ctx, "timeline-superseded")
	})

	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialog(s) opened", n)
	}
}
