package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/signatures"
)

// Every sample of every provider: signed by the provider's signer it verifies, the provider's
// default event id rule finds the id it was given, and its headers are the provider's own.
func TestSamples(t *testing.T) {
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	want := map[string][]string{
		"stripe": {"charge.refunded", "customer.subscription.created", "invoice.paid", "payment_intent.succeeded"},
		"github": {"issue_comment.created", "issues.opened", "pull_request.opened", "push"},
		"slack":  {"app_mention", "block_actions", "message.channels", "reaction_added", "slash_command"}, "shopify": {"customers/create", "orders/create", "products/update"},
		"intercom": {"conversation.admin.replied", "conversation.user.created"}, "zendesk": {"ticket.comment_added", "ticket.created"},
		"nylas": {"event.created", "message.created"}, "twilio": {"call.status", "message.received", "message.status"},
		"hubspot": {"contact.creation", "deal.propertyChange"}, "standard-webhooks": {"invoice.paid", "user.created"},
		"openai": {"batch.completed", "fine_tuning.job.succeeded", "response.completed"},
	}
	if got := sampleProviders(); len(got) != len(want) {
		t.Fatalf("sample files for %v, want %d providers", got, len(want))
	}
	secret := map[string]string{"standard-webhooks": "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3", "openai": "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"}
	const pub = "https://hooks.example.com/hooks/src"
	for provider, types := range want {
		if got := sampleTypes(provider); strings.Join(got, ",") != strings.Join(types, ",") {
			t.Errorf("%s: types %v, want %v", provider, got, types)
		}
		info, _ := signatures.Lookup(provider)
		for _, typ := range types {
			req := &signatures.Request{Method: http.MethodPost, URL: pub, Header: http.Header{}}
			id, err := applySample(req, provider, typ, "evt_sample_42", provider != "hubspot", now)
			if err != nil {
				t.Fatalf("%s %s: %v", provider, typ, err)
			}
			key := secret[provider]
			if key == "" {
				key = "sample-secret"
			}
			cfg := signatures.Config{Secrets: []string{key}, URL: pub}
			s, _ := signatures.NewSigner(provider, cfg)
			if err := s.Sign(req, now); err != nil {
				t.Fatalf("%s %s: sign: %v", provider, typ, err)
			}
			v, _ := signatures.New(provider, cfg)
			if err := v.Verify(req, now); err != nil {
				t.Errorf("%s %s: signed sample rejected: %v", provider, typ, err)
			}
			u, _ := url.Parse(pub)
			in := &extract.Input{Header: req.Header, Query: u.Query(), Body: req.Body, ContentType: req.Header.Get("Content-Type")}
			// The whole default rule, first template that resolves, as the gateway reads it.
			rule, err := extract.ParseRule(info.EventID)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := rule.Resolve(in); !ok || got != id {
				t.Errorf("%s %s: event id rule %v gives %q, want %q", provider, typ, info.EventID, got, id)
			}
			if strings.Contains(string(req.Body), "{{") {
				t.Errorf("%s %s: unfilled placeholder in %s", provider, typ, req.Body)
			}
		}
	}
	// Provider-specific headers are there.
	req := &signatures.Request{Header: http.Header{}}
	if _, err := applySample(req, "github", "pull_request.opened", "d-1", true, now); err != nil || req.Header.Get("X-GitHub-Event") != "pull_request" {
		t.Errorf("github headers: %v %v", req.Header, err)
	}
	// Unknown type: the error lists the available ones; unknown provider: the ones with samples.
	if _, err := applySample(req, "github", "nope", "x", true, now); err == nil || !strings.Contains(err.Error(), "push") {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := applySample(req, "orb", "x", "x", true, now); err == nil || !strings.Contains(err.Error(), "stripe") {
		t.Errorf("no samples: %v", err)
	}
	if _, err := applySample(req, "hubspot", "contact.creation", "not-a-number", true, now); err == nil {
		t.Error("hubspot accepted a non-numeric id")
	}
}

// `gateway send --sample` posts the sample, signed, to --to.
func TestSendSample(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Write([]byte(`{"status":"delivered"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "c.yaml")
	conf := "listen: 127.0.0.1:0\nstore: {kind: memory}\nsources:\n  gh:\n    provider: github\n    secrets: [s3cret]\n    forward: {url: http://127.0.0.1:1/x}\n"
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }}
	err := app.Run(context.Background(), []string{"send", "--config", cfgPath, "--source", "gh", "--sample", "push", "--event-id", "d-77", "--to", srv.URL})
	if err != nil {
		t.Fatalf("send: %v\n%s", err, out.String())
	}
	if got.Header.Get("X-GitHub-Event") != "push" || got.Header.Get("X-GitHub-Delivery") != "d-77" {
		t.Errorf("headers %v", got.Header)
	}
	v, _ := signatures.New("github", signatures.Config{Secrets: []string{"s3cret"}})
	if err := v.Verify(&signatures.Request{Method: "POST", Header: got.Header, Body: body}, time.Now()); err != nil {
		t.Errorf("sent sample does not verify: %v", err)
	}
	if !bytes.Contains(body, []byte(`"ref":"refs/heads/main"`)) {
		t.Errorf("body %s", body)
	}
	err = app.Run(context.Background(), []string{"send", "--config", cfgPath, "--source", "gh", "--sample", "push", "--body", cfgPath})
	if err == nil || !strings.Contains(err.Error(), "does not mix") {
		t.Errorf("--sample with --body: %v", err)
	}
}
