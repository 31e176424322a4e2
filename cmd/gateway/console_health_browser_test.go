package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The overview and the Sources page are red while a source's agent fails,
// with the last error in plain words and since when, on bolt and on the
// other stores the tests have; green again once it answers.
func TestConsoleShowsAFailingSource(t *testing.T) {
	for name, store := range storeConfigs(t) {
		if name == "memory" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			e := startConsoleEnv(t, store)
			ctx, _ := newBrowser(t)
			signIn(t, ctx, e.admin)
			e.agent.status.Store(http.StatusUnauthorized)
			e.stripe(t, "billing", "evt_"+e.prefix+"_h1", "cus_"+e.prefix, time.Now())
			const plain = "the agent refused the gateway's credentials (401 Unauthorized): check forward.signing_secret and forward.headers"
			var row string
			eventually(t, ctx, "the overview's billing row red", e.admin+"/", func() (bool, error) {
				n, err := count(ctx, `#overview-table tr.failing[data-source="billing"]`)
				if err != nil || n != 1 {
					return false, err
				}
				err = chromedp.Run(ctx, chromedp.Text(`#overview-table tr[data-source="billing"]`, &row, chromedp.ByQuery))
				return true, err
			})
			if !strings.Contains(row, "failing") || !strings.Contains(row, plain) || !strings.Contains(row, "since ") {
				t.Fatalf("overview row %q", row)
			}
			var bg string
			run(t, ctx, "row colour", chromedp.Evaluate(`getComputedStyle(document.querySelector('#overview-table tr[data-source="billing"] td')).backgroundColor`, &bg))
			if bg == "" || bg == "rgba(0, 0, 0, 0)" || bg == "rgb(255, 255, 255)" {
				t.Fatalf("the failing row's background is %q, want the red of failures", bg)
			}
			if n, err := count(ctx, `#overview-table tr.failing[data-source="github"]`); err != nil || n != 0 {
				t.Fatalf("github, which had no event, is failing: %d %v", n, err)
			}
			eventually(t, ctx, "the Sources page's billing row red", e.admin+"/sources", func() (bool, error) {
				n, err := count(ctx, `#sources tr.failing[data-source="billing"]`)
				return n == 1, err
			})
			e.screenshot(t, ctx, "failing")
		})
	}
}
