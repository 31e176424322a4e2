package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/replyonce/gateway/signatures"
)

// noSendSigner lists the providers `gateway send` cannot sign for, and why: the provider signs
// with a private key only it holds, and the source is configured with the public side (or a
// certificate host, a webhook id, API credentials).
var noSendSigner = map[string]string{
	"sns":      "AWS signs with its own certificate",
	"paypal":   "PayPal signs with its own certificate",
	"plaid":    "Plaid signs with its own ES256 key",
	"discord":  "the source holds Discord's Ed25519 public key",
	"sendgrid": "the source holds SendGrid's ECDSA public key",
	"telnyx":   "the source holds Telnyx's Ed25519 public key",
}

// `gateway send` works for every shared-secret provider: each provider's own `gateway providers
// NAME` snippet, with a secret of the provider's key format, runs in one `gateway serve`, and a
// `gateway send --source NAME` to it is verified, finds its event id and is delivered to the agent.
func TestSendWorksForEveryProvider(t *testing.T) {
	agent := newSink(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()

	secrets := map[string]string{}
	var sources strings.Builder
	var sendable []string
	varName := regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)
	for _, p := range signatures.Providers() {
		if _, skip := noSendSigner[p]; skip {
			continue
		}
		snippet := runProviders(t, p)
		snippet = snippet[strings.Index(snippet, "sources:\n")+len("sources:\n"):]
		snippet = strings.ReplaceAll(snippet, "https://your-host", "http://"+listen)
		snippet = strings.ReplaceAll(snippet, "forward: {url: http://127.0.0.1:9000/events}",
			"forward: {mode: inline, url: "+agent.srv.URL+"/events}")
		for _, m := range varName.FindAllStringSubmatch(snippet, -1) {
			secrets[m[1]] = snippetSecret(t, p)
		}
		sources.WriteString(snippet)
		sendable = append(sendable, p)
	}
	cfg := "listen: " + listen + "\nadmin: {listen: 127.0.0.1:0}\nstore: {kind: memory}\nlog: {level: error}\nsources:\n" + sources.String()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGatewayWithEnv(t, path, secrets)

	// Two providers' bodies have a shape send's own event cannot take: they need --body.
	bodies := map[string]string{
		"braintree": `<notification><kind>check</kind><timestamp type="datetime">2026-03-14T15:09:26Z</timestamp></notification>`,
		"msgraph":   `{"id":"evt_send_msgraph","value":[{"subscriptionId":"s1","changeType":"created","resource":"Users/1"}]}`,
	}
	for _, p := range sendable {
		var out bytes.Buffer
		app := &App{Stdout: &out, Stderr: &out, LookupEnv: env(secrets)}
		args := []string{"send", "--config", path, "--source", p, "--event-id", "evt_send_" + p}
		if b, ok := bodies[p]; ok {
			file := filepath.Join(t.TempDir(), p+".body")
			if err := os.WriteFile(file, []byte(b), 0o600); err != nil {
				t.Fatal(err)
			}
			args = []string{"send", "--config", path, "--source", p, "--body", file}
		}
		if err := app.Run(context.Background(), args); err != nil {
			t.Errorf("%s: send: %v\n%s", p, err, out.String())
			continue
		}
		if !strings.Contains(out.String(), `"delivered"`) || strings.Contains(out.String(), "warning") {
			t.Errorf("%s: send did not deliver cleanly:\n%s", p, out.String())
		}
	}
	if n := agent.count(); n != len(sendable) {
		t.Errorf("the agent got %d events for %d providers\n%s", n, len(sendable), g.stderr.String())
	}
	if len(sendable)+len(noSendSigner) != len(signatures.Providers()) {
		t.Errorf("noSendSigner names a provider the registry does not have")
	}
}
