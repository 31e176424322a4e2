package signatures

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

const testURL = "https://hooks.example.com/hooks/src?tenant=a%2Fb&x=1"

// keyPair is what a verifier is configured with and what the matching signer takes.
type keyPair struct{ verify, sign string }

func sharedKey(s string) keyPair { return keyPair{s, s} }

// testKeys returns three distinct key pairs for a provider.
func testKeys(t testing.TB, provider string) []keyPair {
	t.Helper()
	if ks := familyKeys(t, provider); ks != nil {
		return ks
	}
	out := make([]keyPair, 3)
	for i := range out {
		switch provider {
		case "standard-webhooks", "svix", "replicate", "openai", "resend", "clerk", "brex":
			b := make([]byte, 24)
			_, _ = rand.Read(b)
			out[i] = sharedKey("whsec_" + base64.StdEncoding.EncodeToString(b))
		case "discord":
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = keyPair{hex.EncodeToString(pub), hex.EncodeToString(priv.Seed())}
		case "sendgrid":
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
			priv, _ := x509.MarshalPKCS8PrivateKey(k)
			out[i] = keyPair{base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv)}
		case "onfleet":
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			out[i] = sharedKey(hex.EncodeToString(b))
		case "airtable", "msteams":
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			out[i] = sharedKey(base64.StdEncoding.EncodeToString(b))
		case "postmark", "chargebee", "pipedrive":
			out[i] = sharedKey(fmt.Sprintf("user%d:pass-%d-secret", i, i))
		case "stripe":
			out[i] = sharedKey(fmt.Sprintf("whsec_test_%d_abcdef", i))
		default:
			out[i] = sharedKey(fmt.Sprintf("secret-%s-%d", provider, i))
		}
	}
	return out
}

func genericHMAC() *HMACConfig {
	return &HMACConfig{Header: "X-Sig", Algorithm: "sha512", Encoding: "base64", Prefix: "v1=", Separator: " ",
		Template: "{id}.{timestamp}.{method}.{url}.{body}", IDHeader: "X-Id", TimestampHeader: "X-Ts"}
}

func testConfig(provider string, secrets ...string) Config {
	c := Config{Secrets: secrets, URL: testURL}
	if provider == "hmac" {
		c.HMAC = genericHMAC()
	}
	return c
}

// testBody is a plausible payload for the provider at signing time ts.
func testBody(provider string, ts time.Time) []byte {
	if b := familyBody(provider, ts); b != nil {
		return b
	}
	switch provider {
	case "plivo":
		return []byte("CallUUID=97ceeb52-58b6-11e1-86da-77300b68f8bb&CallStatus=completed&Duration=300&To=%2B15557654321")
	case "mandrill":
		return []byte(`mandrill_events=%5B%7B%22_id%22%3A%22m1%22%2C%22event%22%3A%22send%22%7D%5D`)
	case "xero":
		return []byte(`{"events":[{"resourceId":"r1","eventType":"UPDATE","eventDateUtc":"2026-03-14T15:09:26.000"}],"firstEventSequence":1,"lastEventSequence":1,"entropy":"ABC"}`)
	case "twilio":
		return []byte("AccountSid=AC123&Body=Hello+world%21&From=%2B15551234567&MessageSid=SM123&To=%2B15557654321")
	case "linear":
		return []byte(`{"action":"create","type":"Issue","data":{"id":"i1"},"webhookTimestamp":` + strconv.FormatInt(ts.UnixMilli(), 10) + `}`)
	case "mailgun":
		return []byte(`{"event-data":{"id":"ev-1","event":"delivered"}}`)
	case "msgraph":
		return []byte(`{"value":[{"subscriptionId":"s1","changeType":"created"},{"subscriptionId":"s1","changeType":"updated"}]}`)
	case "hubspot", "sendgrid":
		return []byte(`[{"eventId":101,"sg_event_id":"e1","subscriptionType":"contact.creation"}]`)
	}
	return []byte(`{"id":"evt_123","type":"test.event","data":{"object":{"amount":1000,"note":"héllo"}}}`)
}

// signed builds a request signed by key at time ts.
func signed(t testing.TB, provider string, key keyPair, ts time.Time) *Request {
	t.Helper()
	s, err := NewSigner(provider, testConfig(provider, key.sign))
	if err != nil {
		t.Fatalf("NewSigner(%s): %v", provider, err)
	}
	r := &Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json"}}, Body: testBody(provider, ts)}
	if provider == "twilio" || provider == "plivo" || provider == "mandrill" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if err := s.Sign(r, ts); err != nil {
		t.Fatalf("Sign(%s): %v", provider, err)
	}
	return r
}

func verify(t testing.TB, provider string, cfg Config, r *Request, now time.Time) error {
	t.Helper()
	s, err := New(provider, cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", provider, err)
	}
	return s.Verify(r, now)
}

func timestamped(provider string) bool {
	if provider == "hmac" {
		return true // the test config sets a timestamp header
	}
	p, _ := Lookup(provider)
	return p.Timestamped
}

// TestEveryProvider is the table-driven harness over the whole registry.
func TestEveryProvider(t *testing.T) {
	for _, p := range Providers() {
		if familyOwnHarness[p] {
			continue // certificate and key-fetching schemes: see their own tests
		}
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			info, err := Lookup(p)
			if err != nil {
				t.Fatal(err)
			}
			keys := testKeys(t, p)
			cfg0 := testConfig(p, keys[0].verify)

			t.Run("sign-verify", func(t *testing.T) {
				r := signed(t, p, keys[0], t0)
				if err := verify(t, p, cfg0, r, t0); err != nil {
					t.Fatalf("valid request rejected: %v", err)
				}
			})

			t.Run("flipped-body-byte", func(t *testing.T) {
				if !info.BodySigned {
					t.Skip("scheme does not cover the body (token, basic auth, Mailgun, Graph clientState)")
				}
				r := signed(t, p, keys[0], t0)
				for _, i := range []int{0, len(r.Body) / 2, len(r.Body) - 1} {
					c := *r
					c.Body = bytes.Clone(r.Body)
					c.Body[i] ^= 0x01
					if err := verify(t, p, cfg0, &c, t0); err == nil {
						t.Fatalf("flipped byte %d accepted", i)
					}
				}
			})

			t.Run("missing-signature-header", func(t *testing.T) {
				name := "X-Sig"
				if len(info.SignatureHeaders) > 0 {
					name = info.SignatureHeaders[0]
				} else if p != "hmac" {
					t.Skip("signature travels in the body; see the provider's own test")
				}
				r := signed(t, p, keys[0], t0)
				r.Header.Del(name)
				want := ErrMissingHeader
				if familyUnsignedRetry[p] {
					want = ErrUnavailable
				}
				if err := verify(t, p, cfg0, r, t0); !errors.Is(err, want) {
					t.Fatalf("got %v, want %v", err, want)
				}
			})

			t.Run("wrong-secret", func(t *testing.T) {
				r := signed(t, p, keys[0], t0)
				if err := verify(t, p, testConfig(p, keys[1].verify), r, t0); !errors.Is(err, ErrNoMatch) {
					t.Fatalf("got %v, want ErrNoMatch", err)
				}
			})

			t.Run("stale", func(t *testing.T) {
				if !timestamped(p) {
					t.Skip("no signed timestamp checked by default")
				}
				cfg := cfg0
				cfg.Tolerance = 300 * time.Second
				for _, skew := range []time.Duration{-301 * time.Second, 301 * time.Second} {
					r := signed(t, p, keys[0], t0.Add(skew))
					if err := verify(t, p, cfg, r, t0); !errors.Is(err, ErrStale) {
						t.Fatalf("skew %s: got %v, want ErrStale", skew, err)
					}
				}
				for _, skew := range []time.Duration{-299 * time.Second, 299 * time.Second} {
					r := signed(t, p, keys[0], t0.Add(skew))
					if err := verify(t, p, cfg, r, t0); err != nil {
						t.Fatalf("skew %s within tolerance: %v", skew, err)
					}
				}
			})

			t.Run("rotation", func(t *testing.T) {
				for pos := range 3 {
					r := signed(t, p, keys[pos], t0)
					cfg := testConfig(p, keys[0].verify, keys[1].verify, keys[2].verify)
					if err := verify(t, p, cfg, r, t0); err != nil {
						t.Fatalf("valid secret at position %d rejected: %v", pos, err)
					}
				}
			})

			t.Run("empty-request", func(t *testing.T) {
				err := verify(t, p, cfg0, &Request{}, t0)
				if err == nil {
					t.Fatal("empty request accepted")
				}
				if !errors.Is(err, ErrMissingHeader) && !errors.Is(err, ErrMalformed) && !(familyUnsignedRetry[p] && errors.Is(err, ErrUnavailable)) {
					t.Fatalf("empty request: %v", err)
				}
			})
		})
	}
}

// Opt-in freshness for the public-key schemes that document no window.
func TestOptInTolerance(t *testing.T) {
	for _, p := range []string{"discord", "sendgrid"} {
		keys := testKeys(t, p)
		r := signed(t, p, keys[0], t0.Add(-time.Hour))
		if err := verify(t, p, testConfig(p, keys[0].verify), r, t0); err != nil {
			t.Fatalf("%s without tolerance: %v", p, err)
		}
		cfg := testConfig(p, keys[0].verify)
		cfg.Tolerance = 300 * time.Second
		if err := verify(t, p, cfg, r, t0); !errors.Is(err, ErrStale) {
			t.Fatalf("%s with tolerance: got %v, want ErrStale", p, err)
		}
	}
}

func TestRegistry(t *testing.T) {
	want := []string{"asana", "bitbucket", "calendly", "coinbase", "discord", "dropbox", "front", "github",
		"gitlab", "helpscout", "hmac", "hubspot", "intercom", "lemonsqueezy", "linear", "mailgun", "meta",
		"msgraph", "nylas", "paddle", "pagerduty", "postmark", "sendgrid", "sentry", "shopify", "slack",
		"square", "standard-webhooks", "stripe", "svix", "telegram", "twilio", "twitch", "typeform", "vercel",
		"x", "zendesk", "zoom"}
	// Batch 2 of the registry (providers_a.go).
	want = append(want, "docusign", "xero", "orb", "tiktok", "box", "mux", "workos", "plivo", "razorpay", "gocardless",
		"sanity", "contentful", "modern-treasury", "pusher", "terraform", "mongodb-atlas", "recurly", "replicate", "openai",
		"resend", "clerk", "brex", "polar", "worldline", "okta", "woocommerce", "buildkite", "clickup", "webex", "heroku",
		"launchdarkly", "frameio", "circleci", "persona", "customerio", "airtable", "trello", "mandrill", "webflow", "notion",
		"calcom", "checkout", "alchemy", "aftership", "airship", "autodesk", "chargify", "msteams", "linkedin", "segment",
		"klaviyo", "onfleet", "shippo", "bolt", "airwallex", "jira", "gitea", "chargebee", "pipedrive", "quickbooks")
	want = append(want, familyNames()...)
	slices.Sort(want)
	got := Providers()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Providers() = %v\nwant %v", got, want)
	}
	for _, p := range got {
		info, err := Lookup(p)
		if err != nil || info.Name != p {
			t.Fatalf("Lookup(%s) = %+v, %v", p, info, err)
		}
		for _, h := range info.ForwardHeaders {
			for _, s := range info.SignatureHeaders {
				if http.CanonicalHeaderKey(h) == http.CanonicalHeaderKey(s) {
					t.Errorf("%s forwards its signature header %s", p, h)
				}
			}
		}
		// Fail closed: no secrets is an error, never a verifier.
		if s, err := New(p, Config{URL: testURL, HMAC: genericHMAC()}); err == nil || s != nil || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New without secrets = %v, %v", p, s, err)
		}
	}
	for _, f := range []func() error{
		func() error { _, err := New("nope", Config{Secrets: []string{"x"}}); return err },
		func() error { _, err := NewSigner("nope", Config{Secrets: []string{"x"}}); return err },
		func() error { _, err := Lookup("GitHub"); return err },
		func() error { _, _, err := Handshake("nope", Config{}, &Request{}, t0); return err },
	} {
		if err := f(); !errors.Is(err, ErrUnknownProvider) {
			t.Errorf("unknown provider: %v", err)
		}
	}
	// A caller changing a looked-up slice does not change the registry.
	a, _ := Lookup("github")
	a.EventID[0] = "changed"
	if b, _ := Lookup("github"); b.EventID[0] == "changed" {
		t.Fatal("Lookup exposes the registry's slices")
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		provider string
		cfg      Config
		field    string
	}{
		{"square", Config{Secrets: []string{"k"}}, "url"},
		{"twilio", Config{Secrets: []string{"k"}}, "url"},
		{"hubspot", Config{Secrets: []string{"k"}}, "url"},
		{"github", Config{Secrets: []string{"k", ""}}, "secrets[1]"},
		{"github", Config{Secrets: []string{"k"}, Tolerance: -1}, "tolerance"},
		{"standard-webhooks", Config{Secrets: []string{"whsec_!!!"}}, "secrets[0]"},
		{"discord", Config{Secrets: []string{"abcd"}}, "secrets[0]"},
		{"sendgrid", Config{Secrets: []string{"bm90IGEga2V5"}}, "secrets[0]"},
		{"postmark", Config{Secrets: []string{"nocolon"}}, "secrets[0]"},
		{"hmac", Config{Secrets: []string{"k"}}, "hmac"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{}}, "hmac.header"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Algorithm: "md5"}}, "hmac.algorithm"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Encoding: "b32"}}, "hmac.encoding"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Template: "{timestamp}"}}, "{body}"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Template: "{id}{body}"}}, "hmac.id_header"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Template: "{timestamp}{body}"}}, "hmac.timestamp_header"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Template: "{url}{body}"}}, "url"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Template: "{nope}{body}"}}, "{nope}"},
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", Template: "{body"}}, "unclosed"},
		// A timestamp the template does not sign proves nothing.
		{"hmac", Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X", TimestampHeader: "X-Ts"}}, "hmac.timestamp_header"},
		{"monday", Config{Secrets: []string{"k"}}, "url"},
	}
	for _, c := range cases {
		_, err := New(c.provider, c.cfg)
		if !errors.Is(err, ErrConfig) || !bytes.Contains([]byte(err.Error()), []byte(c.field)) {
			t.Errorf("%s %+v: got %v, want ErrConfig naming %s", c.provider, c.cfg, err, c.field)
		}
	}
}
