package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/signatures"
)

func runProviders(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }}
	if err := app.Run(context.Background(), append([]string{"providers"}, args...)); err != nil {
		t.Fatalf("providers %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// The provider list in docs/providers.md, `gateway providers` and the registry name the same providers.
func TestProvidersAgree(t *testing.T) {
	registry := signatures.Providers()

	var listed []string
	lines := strings.Split(strings.TrimSpace(runProviders(t)), "\n")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		listed = append(listed, f[0])
		info, _ := signatures.Lookup(f[0])
		if !strings.Contains(l, info.Scheme) {
			t.Errorf("%s: line %q lacks its scheme %q", f[0], l, info.Scheme)
		}
	}
	if !slices.Equal(listed, registry) {
		t.Errorf("gateway providers lists %v\nregistry has %v", listed, registry)
	}

	readme, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)
	i := strings.Index(sec, "## Providers\n\n")
	if i < 0 {
		t.Fatal("docs/providers.md has no \"## Providers\" section")
	}
	sec = sec[i+len("## Providers\n\n"):]
	sec = sec[:strings.Index(sec, "\n\n")] // the first paragraph is the list
	var inReadme []string
	for _, m := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(sec, -1) {
		inReadme = append(inReadme, m[1])
	}
	slices.Sort(inReadme)
	if !slices.Equal(inReadme, registry) {
		t.Errorf("docs/providers.md lists %v\nregistry has %v", inReadme, registry)
	}
}

// Every provider's snippet is a source the configuration accepts, and says where the secret is.
func TestProviderSnippets(t *testing.T) {
	for _, p := range signatures.Providers() {
		out := runProviders(t, p)
		if !strings.Contains(out, "# Secret: ") || strings.Contains(out, "# Secret: the webhook's signing secret, in the provider's") {
			t.Errorf("%s: no dashboard hint:\n%s", p, out)
		}
		doc := "listen: 127.0.0.1:0\nstore: {kind: memory}\n" + out[strings.Index(out, "sources:"):]
		env := func(name string) (string, bool) { return snippetSecret(t, p), true }
		if _, err := config.Parse([]byte(doc), env); err != nil {
			t.Errorf("%s: snippet does not parse: %v\n%s", p, err, doc)
		}
	}
	out := runProviders(t, "orb")
	for _, want := range []string{"provider: orb", "secrets: [${ORB_WEBHOOK_SECRET}]", "X-Orb-Signature", "Default event id: {json:id}"} {
		if !strings.Contains(out, want) {
			t.Errorf("orb snippet lacks %q:\n%s", want, out)
		}
	}
	if out := runProviders(t, "plivo"); !strings.Contains(out, "url: https://your-host/hooks/plivo") {
		t.Errorf("plivo snippet lacks url:\n%s", out)
	}
	var buf bytes.Buffer
	app := &App{Stdout: &buf, Stderr: &buf}
	if err := app.Run(context.Background(), []string{"providers", "nope"}); err == nil || !strings.Contains(err.Error(), "unknown provider") {
		t.Errorf("unknown provider: %v", err)
	}
}

// snippetSecret is a well-formed secret for the provider's key format.
func snippetSecret(t *testing.T, p string) string {
	switch p {
	case "standard-webhooks", "svix", "replicate", "openai", "resend", "clerk", "brex":
		return "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef01234567"))
	case "discord":
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		return hex.EncodeToString(pub)
	case "sendgrid":
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(der)
	case "postmark", "chargebee", "pipedrive":
		return "user:password"
	case "onfleet":
		return hex.EncodeToString([]byte("onfleet-secret"))
	case "airtable", "msteams":
		return base64.StdEncoding.EncodeToString([]byte("base64-secret"))
	case "adyen":
		return hex.EncodeToString([]byte("adyen-hmac-key"))
	case "telnyx":
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		return base64.StdEncoding.EncodeToString(pub)
	case "braintree":
		return "public_key:private_key"
	case "plaid":
		return "client_id:secret"
	case "sns":
		return "*"
	}
	return "placeholder-secret"
}

// `gateway providers NAME` states the provider's timestamp rule, as the registry words it.
func TestProviderSnippetStatesTheTimestampRule(t *testing.T) {
	for _, p := range signatures.Providers() {
		info, _ := signatures.Lookup(p)
		if out := runProviders(t, p); !strings.Contains(out, "# Timestamp: "+info.Timestamp+"\n") {
			t.Errorf("%s: no timestamp rule in\n%s", p, out)
		}
	}
	if out := runProviders(t, "replicate"); !strings.Contains(out, "Webhook-Timestamp (unix seconds), signed; refused when more than 300 s before or after") {
		t.Errorf("replicate: %s", out)
	}
}
