package main

import (
	"net/http"
	"strings"
	"testing"

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
		// Another source refused nothing.
		run(t, ctx, "github", chromedp.Navigate(e.admin+"/rejected?source=github"), chromedp.WaitVisible("#rejected", chromedp.ByID))
		if n, _ := count(ctx, "#rejected tr.rejected"); n != 0 {
			t.Errorf("github lists %d rejected request(s), want none", n)
		}
	})

	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialog(s) opened", n)
	}
}
