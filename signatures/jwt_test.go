package signatures

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// No provider SDK publishes a fixed Vonage or monday.com token; these tests build tokens with
// golang-jwt directly, independent of our signer.

func hsToken(t *testing.T, key string, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bodyHash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestVonageClaims(t *testing.T) {
	const key = "vonage-signature-secret"
	body := familyBody("vonage", t0)
	cfg := Config{Secrets: []string{key}}
	good := jwt.MapClaims{"iat": t0.Unix(), "jti": "j1", "iss": "Vonage", "payload_hash": bodyHash(body), "api_key": "abc"}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	esTok, _ := jwt.NewWithClaims(jwt.SigningMethodES256, good).SignedString(ec)
	noneTok, _ := jwt.NewWithClaims(jwt.SigningMethodNone, good).SignedString(jwt.UnsafeAllowNoneSignatureType)
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, good).SignedString([]byte(key))
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	cases := []struct {
		name, auth string
		want       error
	}{
		{"valid", "Bearer " + hsToken(t, key, good), nil},
		{"upper-case hash", "Bearer " + hsToken(t, key, with("payload_hash", strings.ToUpper(bodyHash(body)))), nil},
		{"hash of another body", "Bearer " + hsToken(t, key, with("payload_hash", bodyHash([]byte("{}")))), ErrNoMatch},
		{"no payload_hash", "Bearer " + hsToken(t, key, with("payload_hash", nil)), ErrMissingHeader},
		{"no iat", "Bearer " + hsToken(t, key, with("iat", nil)), ErrMissingHeader},
		{"iat an hour old", "Bearer " + hsToken(t, key, with("iat", t0.Add(-time.Hour).Unix())), ErrStale},
		{"iat in the future", "Bearer " + hsToken(t, key, with("iat", t0.Add(time.Hour).Unix())), ErrStale},
		{"expired", "Bearer " + hsToken(t, key, with("exp", t0.Add(-time.Second).Unix())), ErrStale},
		{"wrong key", "Bearer " + hsToken(t, "other", good), ErrNoMatch},
		{"alg none", "Bearer " + noneTok, ErrNoMatch},
		{"ES256 token", "Bearer " + esTok, ErrNoMatch},
		{"HS512 token", "Bearer " + hs512, ErrNoMatch},
		{"not a JWT", "Bearer abc.def", ErrMalformed},
		{"unsigned callback", "", ErrUnavailable},
	}
	for _, c := range cases {
		r := &Request{Header: http.Header{"Authorization": {c.auth}}, Body: body}
		err := verify(t, "vonage", cfg, r, t0)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestMonday(t *testing.T) {
	const key = "monday-signing-secret"
	cfg := Config{Secrets: []string{key}, URL: "https://example.com/monday"}
	body := familyBody("monday", t0)
	claims := jwt.MapClaims{"accountId": 1, "userId": 2, "aud": "https://example.com/monday", "iat": t0.Unix(),
		"exp": t0.Add(5 * time.Minute).Unix(), "shortLivedToken": "slt"}
	with := func(k string, v any) string {
		c := jwt.MapClaims{}
		for kk, vv := range claims {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return hsToken(t, key, c)
	}
	withURL := Config{Secrets: []string{key}, URL: "https://example.com/monday"}
	cases := []struct {
		name string
		cfg  Config
		auth string
		want error
	}{
		{"raw token", cfg, with("x", nil), nil},
		{"Bearer token", cfg, "Bearer " + with("x", nil), nil},
		{"aud is our url", withURL, with("x", nil), nil},
		{"aud is another endpoint", withURL, with("aud", "https://other.example/hook"), ErrNoMatch},
		// The JWT does not cover the body: a token for another endpoint,
		// or one without aud, must never pass here.
		{"no aud", withURL, with("aud", nil), ErrNoMatch},
		{"expired", cfg, with("exp", t0.Add(-time.Minute).Unix()), ErrStale},
		{"no exp", cfg, with("exp", nil), ErrMissingHeader},
		{"wrong secret", cfg, hsToken(t, "other", claims), ErrNoMatch},
	}
	if _, err := New("monday", Config{Secrets: []string{key}}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "url") {
		t.Errorf("monday without url: %v, want ErrConfig naming url", err)
	}
	for _, c := range cases {
		err := verify(t, "monday", c.cfg, &Request{Header: http.Header{"Authorization": {c.auth}}, Body: body}, t0)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}

	// The challenge: echoed as the same JSON, no signature needed, nothing else claimed.
	resp, ok, err := Handshake("monday", cfg, &Request{Method: http.MethodPost, Body: []byte(`{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`)}, t0)
	if !ok || err != nil || resp.Status != http.StatusOK || resp.ContentType != "application/json" ||
		string(resp.Body) != `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}` {
		t.Fatalf("challenge: %v %v %+v", ok, err, resp)
	}
	if _, ok, _ := Handshake("monday", cfg, &Request{Method: http.MethodPost, Body: body}, t0); ok {
		t.Fatal("an event taken as the challenge")
	}
	if _, ok, err := Handshake("monday", cfg, &Request{Method: http.MethodPost, Body: []byte(`{"challenge":"` + strings.Repeat("a", 2000) + `"}`)}, t0); !ok || !errors.Is(err, ErrMalformed) {
		t.Fatalf("long challenge: %v %v", ok, err)
	}
}

// b64url is used by the Plaid tests too.
func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
