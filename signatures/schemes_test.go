package signatures

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHeaderNamesCaseInsensitive(t *testing.T) {
	k := testKeys(t, "github")[0]
	r := signed(t, "github", k, t0)
	sig := r.Header.Get("X-Hub-Signature-256")
	for _, name := range []string{"x-hub-signature-256", "X-HUB-SIGNATURE-256", "x-Hub-Signature-256"} {
		c := *r
		c.Header = http.Header{name: {sig}} // a map literal keeps the key as written
		if err := verify(t, "github", testConfig("github", k.verify), &c, t0); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Only the first value of a repeated header counts.
func TestDuplicateHeaderLines(t *testing.T) {
	k := testKeys(t, "github")[0]
	r := signed(t, "github", k, t0)
	good := r.Header.Get("X-Hub-Signature-256")
	bad := "sha256=" + strings.Repeat("00", 32)
	cfg := testConfig("github", k.verify)

	r.Header["X-Hub-Signature-256"] = []string{good, bad}
	if err := verify(t, "github", cfg, r, t0); err != nil {
		t.Fatalf("valid first line, junk second: %v", err)
	}
	r.Header["X-Hub-Signature-256"] = []string{bad, good}
	if err := verify(t, "github", cfg, r, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("junk first line, valid second: got %v, want ErrNoMatch", err)
	}
	// Canonical key wins over a non-canonical duplicate.
	r.Header = http.Header{"X-Hub-Signature-256": {good}, "x-hub-signature-256": {bad}}
	if err := verify(t, "github", cfg, r, t0); err != nil {
		t.Fatalf("canonical key not preferred: %v", err)
	}
	// Between non-canonical spellings the choice is deterministic (lexically smallest key).
	r.Header = http.Header{"x-hub-signature-256": {good}, "X-HUB-SIGNATURE-256": {bad}}
	for range 20 {
		if err := verify(t, "github", cfg, r, t0); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("non-canonical choice not deterministic: %v", err)
		}
	}
}

func TestBoundedHeaders(t *testing.T) {
	k := testKeys(t, "pagerduty")[0]
	r := signed(t, "pagerduty", k, t0)
	good := r.Header.Get("X-Pagerduty-Signature")
	cfg := testConfig("pagerduty", k.verify)
	junk := "v1=" + strings.Repeat("ab", 32)

	// The valid signature within the first 32 candidates is found ...
	r.Header.Set("X-Pagerduty-Signature", strings.Repeat(junk+",", 31)+good)
	if err := verify(t, "pagerduty", cfg, r, t0); err != nil {
		t.Fatalf("32nd candidate: %v", err)
	}
	// ... past them it is not looked at.
	r.Header.Set("X-Pagerduty-Signature", strings.Repeat(junk+",", 32)+good)
	if err := verify(t, "pagerduty", cfg, r, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("33rd candidate: got %v, want ErrNoMatch", err)
	}
	// Oversized headers are malformed before any parsing.
	r.Header.Set("X-Pagerduty-Signature", good+","+strings.Repeat("x", maxHeaderLen))
	if err := verify(t, "pagerduty", cfg, r, t0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge header: got %v, want ErrMalformed", err)
	}
	// Standard Webhooks: a long list is capped too, and still verifies when the match is early.
	sk := testKeys(t, "standard-webhooks")[0]
	sr := signed(t, "standard-webhooks", sk, t0)
	sig := sr.Header.Get("Webhook-Signature")
	sr.Header.Set("Webhook-Signature", sig+strings.Repeat(" v1,AAAA", 200))
	if err := verify(t, "standard-webhooks", testConfig("standard-webhooks", sk.verify), sr, t0); err != nil {
		t.Fatalf("standard, early match in a long list: %v", err)
	}
	sr.Header.Set("Webhook-Signature", strings.Repeat("v1,AAAA ", 40)+sig)
	if err := verify(t, "standard-webhooks", testConfig("standard-webhooks", sk.verify), sr, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("standard, match past the cap: got %v, want ErrNoMatch", err)
	}
}

func TestMalformed(t *testing.T) {
	cases := []struct {
		provider string
		header   http.Header
	}{
		{"github", http.Header{"X-Hub-Signature-256": {"sha1=abcd"}}},
		{"github", http.Header{"X-Hub-Signature-256": {"sha256=zz"}}},
		{"shopify", http.Header{"X-Shopify-Hmac-Sha256": {"***"}}},
		{"stripe", http.Header{"Stripe-Signature": {"t=abc,v1=00"}}},
		{"stripe", http.Header{"Stripe-Signature": {"garbage"}}},
		{"slack", http.Header{"X-Slack-Signature": {"v0=00"}, "X-Slack-Request-Timestamp": {"-5"}}},
		{"slack", http.Header{"X-Slack-Signature": {"v0=00"}, "X-Slack-Request-Timestamp": {"+1773500966"}}},
		{"twitch", http.Header{"Twitch-Eventsub-Message-Signature": {"sha256=00"}, "Twitch-Eventsub-Message-Timestamp": {"yesterday"}, "Twitch-Eventsub-Message-Id": {"x"}}},
		{"standard-webhooks", http.Header{"Webhook-Signature": {"v1a,abc"}, "Webhook-Id": {"m"}, "Webhook-Timestamp": {"1773500966"}}},
		{"standard-webhooks", http.Header{"Webhook-Signature": {"v1,abc"}, "Webhook-Id": {"m"}, "Webhook-Timestamp": {"1e9"}}},
		{"postmark", http.Header{"Authorization": {"Bearer x"}}},
		{"postmark", http.Header{"Authorization": {"Basic !!!"}}},
		{"discord", http.Header{"X-Signature-Ed25519": {"abc"}, "X-Signature-Timestamp": {"1"}}},
		{"sendgrid", http.Header{"X-Twilio-Email-Event-Webhook-Signature": {"%%%"}, "X-Twilio-Email-Event-Webhook-Timestamp": {"1"}}},
		{"twilio", http.Header{"X-Twilio-Signature": {"short"}}},
	}
	for _, c := range cases {
		keys := testKeys(t, c.provider)
		err := verify(t, c.provider, testConfig(c.provider, keys[0].verify), &Request{Header: c.header, Body: []byte(`{}`)}, t0)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s %v: got %v, want ErrMalformed", c.provider, c.header, err)
		}
	}
}

func TestMailgun(t *testing.T) {
	keys := testKeys(t, "mailgun")
	cfg := testConfig("mailgun", keys[0].verify)
	r := signed(t, "mailgun", keys[0], t0)
	if !bytes.Contains(r.Body, []byte(`"event-data"`)) {
		t.Fatalf("signer lost the event data: %s", r.Body)
	}
	for name, mut := range map[string]func([]byte) []byte{
		"token": func(b []byte) []byte { return bytes.Replace(b, []byte(`"token":"`), []byte(`"token":"x`), 1) },
		"timestamp": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"timestamp":"17`), []byte(`"timestamp":"18`), 1)
		},
	} {
		if err := verify(t, "mailgun", cfg, &Request{Body: mut(r.Body)}, t0); err == nil {
			t.Errorf("changed %s accepted", name)
		}
	}
	if err := verify(t, "mailgun", cfg, &Request{Body: []byte(`{"event-data":{}}`)}, t0); !errors.Is(err, ErrMissingHeader) {
		t.Errorf("no signature object: %v", err)
	}
	// Legacy form posts carry the same fields.
	ts := "1773500966"
	m := hmac.New(sha256.New, []byte(keys[0].verify))
	m.Write([]byte(ts + "tok"))
	form := "timestamp=" + ts + "&token=tok&signature=" + hex.EncodeToString(m.Sum(nil)) + "&event=delivered"
	if err := verify(t, "mailgun", cfg, &Request{Body: []byte(form)}, time.Unix(1773500966, 0)); err != nil {
		t.Errorf("form post: %v", err)
	}
}

func TestMSGraph(t *testing.T) {
	keys := testKeys(t, "msgraph")
	cfg := testConfig("msgraph", keys[0].verify)
	bodies := map[string]error{
		`{"value":[{"clientState":"` + keys[0].verify + `"},{"clientState":"` + keys[0].verify + `"}]}`: nil,
		`{"value":[{"clientState":"` + keys[0].verify + `"},{"clientState":"other"}]}`:                  ErrNoMatch,
		`{"value":[{"clientState":"` + keys[0].verify + `"},{}]}`:                                       ErrMissingHeader,
		`{"value":[]}`: ErrMissingHeader,
		`{}`:           ErrMissingHeader,
		`not json`:     ErrMissingHeader,
	}
	for b, want := range bodies {
		err := verify(t, "msgraph", cfg, &Request{Body: []byte(b)}, t0)
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: got %v, want %v", b, err, want)
		}
	}
}

func TestTwilioJSONBody(t *testing.T) {
	keys := testKeys(t, "twilio")
	s, _ := NewSigner("twilio", testConfig("twilio", keys[0].sign))
	r := &Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1}`)}
	if err := s.Sign(r, t0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.URL, "&bodySHA256=") {
		t.Fatalf("signer did not add bodySHA256: %s", r.URL)
	}
	cfg := testConfig("twilio", keys[0].verify)
	if err := verify(t, "twilio", cfg, r, t0); err != nil {
		t.Fatal(err)
	}
	r.Body = []byte(`{"a":2}`)
	if err := verify(t, "twilio", cfg, r, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("changed JSON body: %v", err)
	}
}

func TestHubSpotURIDecoding(t *testing.T) {
	got := hubspotURI("https://x.example/p%3Aq?r=%2F%40%21%24%27%28%29%2A%2C%3B%20")
	if want := "https://x.example/p:q?r=/@!$'()*,;%20"; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestTokenSchemes(t *testing.T) {
	for p, h := range map[string]string{"gitlab": "X-Gitlab-Token", "telegram": "X-Telegram-Bot-Api-Secret-Token"} {
		cfg := testConfig(p, "tok-a", "tok-b")
		for v, want := range map[string]error{"tok-a": nil, "tok-b": nil, "tok-a ": ErrNoMatch, "tok": ErrNoMatch, "": ErrMissingHeader} {
			err := verify(t, p, cfg, &Request{Header: http.Header{h: {v}}}, t0)
			if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
				t.Errorf("%s %q: got %v want %v", p, v, err, want)
			}
		}
	}
}

func TestGenericHMACVariants(t *testing.T) {
	body := []byte(`{"x":1}`)
	m := hmac.New(sha256.New, []byte("k"))
	m.Write(body)
	sum := m.Sum(nil)
	cfg := Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X-Signature"}}
	r := &Request{Header: http.Header{"X-Signature": {hex.EncodeToString(sum)}}, Body: body}
	if err := verify(t, "hmac", cfg, r, t0); err != nil {
		t.Fatalf("defaults (sha256, hex, {body}): %v", err)
	}
	// A signer and verifier configured alike agree for every algorithm and encoding.
	for _, alg := range []string{"sha1", "sha256", "sha512"} {
		for _, enc := range []string{"hex", "base64"} {
			c := Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X-S", Algorithm: alg, Encoding: enc,
				Prefix: alg + "=", Template: "{timestamp}:{body}", TimestampHeader: "X-T", Tolerance: time.Minute}}
			s, err := NewSigner("hmac", c)
			if err != nil {
				t.Fatal(err)
			}
			r := &Request{Header: http.Header{}, Body: body}
			_ = s.Sign(r, t0)
			if err := verify(t, "hmac", c, r, t0); err != nil {
				t.Errorf("%s/%s: %v", alg, enc, err)
			}
			if err := verify(t, "hmac", c, r, t0.Add(61*time.Second)); !errors.Is(err, ErrStale) {
				t.Errorf("%s/%s: hmac.tolerance not applied: %v", alg, enc, err)
			}
		}
	}
}

func TestParseTime(t *testing.T) {
	cases := []struct {
		in   string
		f    tsFormat
		want int64 // unix ms; -1 = invalid
	}{
		{"1773500966", tsSeconds, 1773500966000},
		{"1773500966123", tsMillis, 1773500966123},
		{"1773500966123", tsAuto, 1773500966123},
		{"1773500966", tsAuto, 1773500966000},
		{"1773500966.5", tsAuto, 1773500966000},
		{"2026-03-14T15:09:26Z", tsAuto, 1773500966000},
		{"2026-03-14T15:09:26.123456789Z", tsRFC3339, 1773500966123},
		{"1773500966.5", tsSeconds, -1},
		{"", tsSeconds, -1},
		{"-1", tsSeconds, -1},
		{"99999999999999999999", tsSeconds, -1},
		{"0x10", tsSeconds, -1},
	}
	for _, c := range cases {
		got, ok := parseTime(c.in, c.f)
		if (c.want == -1) == ok || (ok && got.UnixMilli() != c.want) {
			t.Errorf("parseTime(%q, %d) = %v, %v; want %d", c.in, c.f, got, ok, c.want)
		}
	}
}

// The request's own URL (with the query actually received) wins over the configured one.
func TestRequestURLOverridesConfig(t *testing.T) {
	for _, p := range []string{"hubspot", "square", "twilio"} {
		keys := testKeys(t, p)
		s, _ := NewSigner(p, testConfig(p, keys[0].sign))
		r := &Request{Method: "POST", URL: "https://hooks.example.com/hooks/src?portal=%2A1", Header: http.Header{}, Body: []byte("a=1")}
		if err := s.Sign(r, t0); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(p, keys[0].verify)
		if err := verify(t, p, cfg, r, t0); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		r.URL = "https://hooks.example.com/hooks/src?portal=%2A2"
		if err := verify(t, p, cfg, r, t0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("%s: other URL: %v", p, err)
		}
	}
}
