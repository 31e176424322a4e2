package signatures

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"testing"
	"time"
)

// No fixed PayPal vector is used: the SDKs' tests verify against live sandbox certificates that
// expire. The signer below follows the documented string independently of paypalMessage.

const paypalWebhookID = "1JE4291016473214C"

func paypalSigned(t testing.TB, key *rsa.PrivateKey, certURL, webhookID string, body []byte, at time.Time) *Request {
	t.Helper()
	id, ts := "69cd13f0-d67a-11e5-baa3-778b53f4ae55", at.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("%s|%s|%s|%d", id, ts, webhookID, crc32.ChecksumIEEE(body))
	sum := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return &Request{Header: http.Header{"Paypal-Transmission-Id": {id}, "Paypal-Transmission-Time": {ts},
		"Paypal-Transmission-Sig": {base64.StdEncoding.EncodeToString(sig)}, "Paypal-Cert-Url": {certURL},
		"Paypal-Auth-Algo": {"SHA256withRSA"}}, Body: body}
}

func TestPaypal(t *testing.T) {
	e := newPKIEnv(t)
	key := testRSAKey(t, 2)
	certURL := e.signingCert(t, "api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77", key)
	sandboxURL := e.signingCert(t, "api-m.sandbox.paypal.com/v1/notifications/certs/CERT-sandbox-1", key)
	f := e.fetcher(FetcherOptions{})
	cfg := Config{Secrets: []string{paypalWebhookID}, Fetcher: f}
	body := []byte(`{"id":"WH-2WR32451HC0233532-67976317FL4543714","event_type":"PAYMENT.CAPTURE.COMPLETED","create_time":"2026-03-14T15:09:26.000Z"}`)

	for _, u := range []string{certURL, sandboxURL} {
		if err := verify(t, "paypal", cfg, paypalSigned(t, key, u, paypalWebhookID, body, t0), t0); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
	t.Run("flipped body byte", func(t *testing.T) {
		r := paypalSigned(t, key, certURL, paypalWebhookID, body, t0)
		for _, i := range []int{0, len(body) / 2, len(body) - 1} {
			c := *r
			c.Body = append([]byte(nil), body...)
			c.Body[i] ^= 1
			if err := verify(t, "paypal", cfg, &c, t0); !errors.Is(err, ErrNoMatch) {
				t.Fatalf("byte %d: %v", i, err)
			}
		}
	})
	t.Run("missing headers", func(t *testing.T) {
		for _, h := range []string{"Paypal-Transmission-Id", "Paypal-Transmission-Time", "Paypal-Transmission-Sig", "Paypal-Cert-Url", "Paypal-Auth-Algo"} {
			r := paypalSigned(t, key, certURL, paypalWebhookID, body, t0)
			r.Header.Del(h)
			if err := verify(t, "paypal", cfg, r, t0); !errors.Is(err, ErrMissingHeader) {
				t.Errorf("without %s: %v", h, err)
			}
		}
	})
	t.Run("wrong key, webhook id or algorithm", func(t *testing.T) {
		if err := verify(t, "paypal", cfg, paypalSigned(t, testRSAKey(t, 3), certURL, paypalWebhookID, body, t0), t0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("other key: %v", err)
		}
		if err := verify(t, "paypal", cfg, paypalSigned(t, key, certURL, "OTHERWEBHOOK", body, t0), t0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("other webhook id: %v", err)
		}
		r := paypalSigned(t, key, certURL, paypalWebhookID, body, t0)
		r.Header.Set("Paypal-Auth-Algo", "SHA1withRSA")
		if err := verify(t, "paypal", cfg, r, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("SHA1withRSA: %v", err)
		}
	})
	t.Run("rotation: several webhook ids", func(t *testing.T) {
		two := Config{Secrets: []string{"WH-OLD", paypalWebhookID}, Fetcher: f}
		if err := verify(t, "paypal", two, paypalSigned(t, key, certURL, paypalWebhookID, body, t0), t0); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stale and future, when a tolerance is set", func(t *testing.T) {
		tol := Config{Secrets: []string{paypalWebhookID}, Fetcher: f, Tolerance: 5 * time.Minute}
		for _, skew := range []time.Duration{-301 * time.Second, 301 * time.Second} {
			if err := verify(t, "paypal", tol, paypalSigned(t, key, certURL, paypalWebhookID, body, t0.Add(skew)), t0); !errors.Is(err, ErrStale) {
				t.Errorf("skew %s: %v", skew, err)
			}
			if err := verify(t, "paypal", cfg, paypalSigned(t, key, certURL, paypalWebhookID, body, t0.Add(skew)), t0); err != nil {
				t.Errorf("skew %s without tolerance: %v", skew, err)
			}
		}
	})
	t.Run("certificate host pin and chain", func(t *testing.T) {
		e.signingCert(t, "evil.example.com/v1/notifications/certs/CERT-1", key)
		start := len(e.tr.seen())
		for _, u := range []string{"https://evil.example.com/v1/notifications/certs/CERT-1", "http://api.paypal.com/v1/notifications/certs/CERT-1",
			"https://api.paypal.com/v1/oauth2/token", "https://api.paypal.com.evil.com/v1/notifications/certs/CERT-1",
			// Paths that the server would normalise out of the pinned prefix.
			"https://api.paypal.com/v1/notifications/certs/../../oauth2/token", "https://api.paypal.com/v1/notifications/certs/./x/../../../x",
			"https://api.paypal.com/v1/notifications/certs/%2e%2e/%2e%2e/oauth2/token"} {
			if err := verify(t, "paypal", cfg, paypalSigned(t, key, u, paypalWebhookID, body, t0), t0); !errors.Is(err, ErrNoMatch) {
				t.Errorf("%s: %v", u, err)
			}
		}
		if seen := e.tr.seen()[start:]; len(seen) != 0 {
			t.Fatalf("fetched %v", seen)
		}
		// A certificate from the trusted CA, at a pinned URL, but not issued to a paypal.com name:
		// PayPal-Python-SDK notifications.py (_is_common_name_valid) refuses it, and so do we.
		e.serve("api.paypal.com/v1/notifications/certs/CERT-othername", pemOf(e.ca.issue(t, &key.PublicKey, "messageverificationcerts.example.com", nil, t0.Add(-time.Hour), t0.Add(time.Hour))))
		if err := verify(t, "paypal", cfg, paypalSigned(t, key, "https://api.paypal.com/v1/notifications/certs/CERT-othername", paypalWebhookID, body, t0), t0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("certificate for a name outside paypal.com: %v", err)
		}
		rogue := newTestCA(t, "Rogue", testRSAKey(t, 4))
		e.serve("api.paypal.com/v1/notifications/certs/CERT-rogue", pemOf(rogue.issue(t, &key.PublicKey, "messageverificationcerts.paypal.com", nil, t0.Add(-time.Hour), t0.Add(time.Hour))))
		if err := verify(t, "paypal", cfg, paypalSigned(t, key, "https://api.paypal.com/v1/notifications/certs/CERT-rogue", paypalWebhookID, body, t0), t0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("certificate from another CA: %v", err)
		}
	})
	if _, err := NewSigner("paypal", cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewSigner(paypal): %v", err)
	}
}
