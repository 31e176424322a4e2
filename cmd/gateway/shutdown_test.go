package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SIGTERM with an agent that takes 60 s: serve exits within the 2 s grace,
// /readyz answers 503 from the signal, the held delivery's claim is settled
// as not applied (the provider hears 503), and the provider's retry, to the
// next gateway on the same ledger, is delivered again.
func TestShutdownWithinGraceWhateverTheAgentDoes(t *testing.T) {
	agent := newSink(t)
	arrived := make(chan struct{}, 1)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) {
		if n == 1 {
			arrived <- struct{}{}
			return http.StatusOK, 60 * time.Second
		}
		return http.StatusOK, 0
	})
	dir := t.TempDir()
	cfg := `listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
store: {kind: bolt, path: ` + filepath.Join(dir, "ledger.db") + `}
log: {level: info, format: json}
server: {shutdown_grace: 2s}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    forward: {mode: inline, url: ` + agent.srv.URL + `/events, timeout: 90s}
`
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	client := newClient(t)
	g := startGateway(t, path)
	body, hdr := stripeEvent(t, "evt_shutdown", nil)
	first := make(chan reply, 1)
	go func() { first <- post(t, client, g.hook("stripe"), body, hdr) }()
	<-arrived

	start := time.Now()
	g.cancel() // SIGTERM
	g.cancel = nil
	// From the signal on, /readyz is 503 while the drain runs.
	var ready int
	for range 50 {
		resp, err := client.Get("http://" + g.admin + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ready = resp.StatusCode
			if ready == http.StatusServiceUnavailable {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ready != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the drain = %d, want 503", ready)
	}
	select {
	case err := <-g.done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve still running 20 s after SIGTERM with a 2 s grace")
	}
	took := time.Since(start)
	t.Logf("serve exited %s after the signal", took)
	if took > 3*time.Second { // the grace plus scheduling on a shared machine
		t.Errorf("serve took %s to exit, past its 2 s grace", took)
	}
	r := <-first
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("the held delivery was answered %d, want 503", r.status)
	}
	logs := g.stderr.String()
	if strings.Contains(logs, `"status":200`) {
		t.Errorf("the log says 200 for an answer that was not sent:\n%s", logs)
	}

	// The provider retries; the next gateway on the same ledger delivers.
	g2 := startGateway(t, path)
	r2 := post(t, client, g2.hook("stripe"), body, hdr)
	if r2.status != http.StatusOK || r2.body["status"] != "delivered" {
		t.Fatalf("the retry was answered %d %v, want 200 delivered", r2.status, r2.body)
	}
	if n := agent.count(); n != 2 {
		t.Errorf("agent got %d requests, want 2", n)
	}
	if d := agent.request(1).Header.Get("Replyonce-Delivery"); d != "2" {
		t.Errorf("the retry's Replyonce-Delivery = %q, want 2", d)
	}
}
