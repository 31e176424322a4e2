package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The Sources page offers Pause for a queued source only: an inline
// source's row, in Chromium, has no Pause button and says why (pause
// applies to queued delivery), and the admin API refuses to pause it.
func TestConsoleOffersNoPauseForAnInlineSource(t *testing.T) {
	agent := newConsoleAgent(t)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: %s}
store: {kind: bolt, path: %s}
log: {level: error, format: json}
sources:
  chat:
    provider: github
    secrets: [gh-console-secret]
    forward: {url: %[3]s/events, timeout: 2s, mode: inline}
  github:
    provider: github
    secrets: [gh-console-secret]
    forward: {url: %[3]s/events, timeout: 2s}
`, consoleToken, filepath.Join(t.TempDir(), "ledger.db"), agent.srv.URL)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, path)
	admin := "http://" + g.admin
	ctx, _ := newBrowser(t)
	signIn(t, ctx, admin)
	run(t, ctx, "the Sources page", chromedp.Navigate(admin+"/sources"), chromedp.WaitVisible("#sources", chromedp.ByID))

	var queued, inline string
	run(t, ctx, "the rows",
		chromedp.Text(`#sources tr[data-source="github"]`, &queued, chromedp.ByQuery),
		chromedp.Text(`#sources tr[data-source="chat"]`, &inline, chromedp.ByQuery))
	if n, err := count(ctx, `#sources tr[data-source="github"] button`); err != nil || n != 1 || !strings.Contains(queued, "Pause github") {
		t.Fatalf("the queued source's row %q has %d buttons (%v), want its Pause button", queued, n, err)
	}
	if n, err := count(ctx, `#sources tr[data-source="chat"] button, #sources tr[data-source="chat"] form`); err != nil || n != 0 {
		t.Fatalf("the inline source's row %q has %d buttons or forms (%v), want none", inline, n, err)
	}
	if !strings.Contains(inline, "inline") || !strings.Contains(inline, "pause applies to queued delivery") {
		t.Fatalf("the inline source's row %q does not say why it cannot be paused", inline)
	}

	// Behind the page, the API refuses it as well.
	req, err := http.NewRequest(http.MethodPost, admin+"/v1/sources/pause", strings.NewReader(`{"source":"chat"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "queued") {
		t.Fatalf("POST /v1/sources/pause for the inline source: %d %s, want 400 saying pause applies to queued delivery", resp.StatusCode, body)
	}
}
