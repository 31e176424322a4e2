package signatures

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// Every fuzz target asserts the package's promises on arbitrary input: no panic, and an error
// that wraps a sentinel unless the input really is authentic (which random input never is).

func sentinel(err error) bool {
	for _, s := range []error{ErrMissingHeader, ErrMalformed, ErrStale, ErrNoMatch, ErrConfig, ErrUnavailable} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func fuzzVerify(t *testing.T, provider string, cfg Config, r *Request) {
	s, err := New(provider, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(r, t0); err != nil && !sentinel(err) {
		t.Fatalf("%s: error without sentinel: %v", provider, err)
	}
}

// FuzzKVHeader: key=value signature lists (Stripe, Calendly with ",", Paddle with ";").
func FuzzKVHeader(f *testing.F) {
	for _, s := range []string{"t=1773500966,v1=abcd,v1=00,v0=ff", "ts=1773500966;h1=00", "t=,v1=", ",,,", "=", "t=1,t=2,v1=zz",
		"t=99999999999999999999,v1=00", "v1=" + string(make([]byte, 70))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		for _, p := range []string{"stripe", "calendly", "paddle"} {
			hdr := map[string]string{"stripe": "Stripe-Signature", "calendly": "Calendly-Webhook-Signature", "paddle": "Paddle-Signature"}[p]
			fuzzVerify(t, p, Config{Secrets: []string{"k"}}, &Request{Header: http.Header{hdr: {h}}, Body: []byte("{}")})
		}
	})
}

// FuzzPrefixedHeader: single and listed prefixed signatures, hex and base64 (GitHub, PagerDuty,
// Shopify, Typeform, Slack with its timestamp header).
func FuzzPrefixedHeader(f *testing.F) {
	for _, s := range []string{"sha256=00ff", "v1=00,v1=zz", "v1=", "sha256=====", "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", "v0=abc", " , , "} {
		f.Add(s, "1773500966")
	}
	f.Fuzz(func(t *testing.T, sig, ts string) {
		req := func(h ...string) *Request {
			r := &Request{Header: http.Header{}, Body: []byte("{}")}
			for i := 0; i+1 < len(h); i += 2 {
				r.Header[h[i]] = []string{h[i+1]}
			}
			return r
		}
		cfg := Config{Secrets: []string{"k"}}
		fuzzVerify(t, "github", cfg, req("X-Hub-Signature-256", sig))
		fuzzVerify(t, "pagerduty", cfg, req("X-Pagerduty-Signature", sig))
		fuzzVerify(t, "shopify", cfg, req("X-Shopify-Hmac-Sha256", sig))
		fuzzVerify(t, "typeform", cfg, req("Typeform-Signature", sig))
		fuzzVerify(t, "slack", cfg, req("X-Slack-Signature", sig, "X-Slack-Request-Timestamp", ts))
		fuzzVerify(t, "zendesk", cfg, req("X-Zendesk-Webhook-Signature", sig, "X-Zendesk-Webhook-Signature-Timestamp", ts))
		fuzzVerify(t, "twitch", cfg, req("Twitch-Eventsub-Message-Signature", sig, "Twitch-Eventsub-Message-Timestamp", ts, "Twitch-Eventsub-Message-Id", "i"))
		hc := Config{Secrets: []string{"k"}, HMAC: &HMACConfig{Header: "X-S", Separator: " ", Encoding: "base64",
			Template: "{timestamp}.{body}", TimestampHeader: "X-T"}}
		fuzzVerify(t, "hmac", hc, req("X-S", sig, "X-T", ts))
	})
}

// FuzzStandardHeader: the Standard Webhooks / Svix signature list and timestamp.
func FuzzStandardHeader(f *testing.F) {
	for _, s := range []string{"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "v1a,abc v1,", "v1,", ",", "v2,x v1,y", "   "} {
		f.Add(s, "1773500966", "msg_1")
	}
	f.Fuzz(func(t *testing.T, sig, ts, id string) {
		cfg := Config{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
		fuzzVerify(t, "standard-webhooks", cfg, &Request{Header: http.Header{"Webhook-Signature": {sig}, "Webhook-Timestamp": {ts}, "Webhook-Id": {id}}})
		fuzzVerify(t, "svix", cfg, &Request{Header: http.Header{"svix-signature": {sig}, "svix-timestamp": {ts}, "svix-id": {id}}})
	})
}

// FuzzTimestamp: the timestamp parser in every format, and the freshness check on its result.
func FuzzTimestamp(f *testing.F) {
	for _, s := range []string{"1773500966", "1773500966123", "1.5", "2026-03-14T15:09:26Z", "", "-1", "+1", "9223372036854775807", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, fm := range []tsFormat{tsSeconds, tsMillis, tsRFC3339, tsAuto} {
			if err := freshTimestamp(s, fm, t0, 300*time.Second, "x"); err != nil && !sentinel(err) {
				t.Fatal(err)
			}
		}
	})
}

// FuzzBasicAuth: Postmark's Authorization header and the token headers.
func FuzzBasicAuth(f *testing.F) {
	for _, s := range []string{"Basic dXNlcjpwYXNz", "Basic", "basic !!!", "Bearer x", "Basic Og=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		fuzzVerify(t, "postmark", Config{Secrets: []string{"user:pass"}}, &Request{Header: http.Header{"Authorization": {h}}})
		fuzzVerify(t, "gitlab", Config{Secrets: []string{"tok"}}, &Request{Header: http.Header{"X-Gitlab-Token": {h}}})
	})
}

// FuzzTwilio: the signature header, the URL (port variants, bodySHA256) and the form body.
func FuzzTwilio(f *testing.F) {
	f.Add("RSOYDt4T1cUTdK1PDd93/VVr8B8=", "https://mycompany.com/myapp.php?foo=1&bar=2", "CallSid=CA1&Digits=1234")
	f.Add("a9nBmqA0ju/hNViExpshrM61xv4=", "https://x:443/?bodySHA256=zz", `{"a":1}`)
	f.Add("", "::", "%zz")
	f.Add("AAAA", "http://[::1]:80/p", "a=1&a=2&;=")
	f.Fuzz(func(t *testing.T, sig, u, body string) {
		fuzzVerify(t, "twilio", Config{Secrets: []string{"12345"}, URL: "https://example.com/hook"},
			&Request{URL: u, Header: http.Header{"X-Twilio-Signature": {sig}}, Body: []byte(body)})
	})
}

// FuzzBodySignature: signatures carried in the body (Mailgun, Microsoft Graph) and the JSON
// handshake detectors that read the body (Slack, Zoom, Discord).
func FuzzBodySignature(f *testing.F) {
	for _, s := range []string{`{"signature":{"timestamp":"1773500966","token":"t","signature":"00"}}`,
		`{"value":[{"clientState":"k"},{"clientState":1}]}`, `timestamp=1&token=t&signature=zz`,
		`{"type":"url_verification","challenge":"c"}`, `{"event":"endpoint.url_validation","payload":{"plainToken":1}}`,
		`{"type":1}`, `[`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b string) {
		r := &Request{Method: "POST", Header: http.Header{}, Body: []byte(b)}
		fuzzVerify(t, "mailgun", Config{Secrets: []string{"k"}}, r)
		fuzzVerify(t, "msgraph", Config{Secrets: []string{"k"}}, r)
		for _, p := range []string{"slack", "zoom", "discord", "intercom"} {
			cfg := Config{Secrets: []string{"k"}}
			if p == "discord" {
				cfg.Secrets = []string{"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"}
			}
			if _, handled, err := Handshake(p, cfg, r, t0); err != nil && (!handled || !sentinel(err)) {
				t.Fatalf("%s: %v %v", p, handled, err)
			}
		}
	})
}

// FuzzPublicKeySignature: Discord's hex Ed25519 and SendGrid's base64 DER ECDSA signatures.
func FuzzPublicKeySignature(f *testing.F) {
	f.Add("00", "1773500966")
	f.Add("MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=", "1588788367")
	f.Add("MAYCAQACAQA=", "x")
	f.Fuzz(func(t *testing.T, sig, ts string) {
		fuzzVerify(t, "discord", Config{Secrets: []string{"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"}, Tolerance: time.Minute},
			&Request{Header: http.Header{"X-Signature-Ed25519": {sig}, "X-Signature-Timestamp": {ts}}})
		fuzzVerify(t, "sendgrid", Config{Secrets: []string{"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="}},
			&Request{Header: http.Header{"X-Twilio-Email-Event-Webhook-Signature": {sig}, "X-Twilio-Email-Event-Webhook-Timestamp": {ts}}})
	})
}

// FuzzQueryHandshake: handshakes that read the request URL's query.
func FuzzQueryHandshake(f *testing.F) {
	for _, s := range []string{"https://h/p?hub.mode=subscribe&hub.verify_token=v&hub.challenge=1", "https://h/p?crc_token=x",
		"https://h/p?challenge=%zz", "::", "https://h/p?validationToken=", "?challenge=a;b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		cfg := Config{Secrets: []string{"k"}, VerifyToken: "v"}
		for _, p := range []string{"meta", "x", "nylas", "dropbox", "msgraph", "asana"} {
			if _, handled, err := Handshake(p, cfg, &Request{Method: "GET", URL: u, Header: http.Header{"X-Hook-Secret": {u}}}, t0); err != nil && (!handled || !sentinel(err)) {
				t.Fatalf("%s: %v %v", p, handled, err)
			}
		}
	})
}
