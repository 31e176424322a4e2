package signatures

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Plaid publishes no fixed vector (its keys are fetched per kid); the keys here are generated.

type plaidKeys struct {
	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey
	expired map[string]int64
	asked   []map[string]string
}

func plaidServer(t testing.TB, e *pkiEnv, host string) *plaidKeys {
	t.Helper()
	pk := &plaidKeys{keys: map[string]*ecdsa.PrivateKey{}, expired: map[string]int64{}}
	e.route(host+"/webhook_verification_key/get", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req map[string]string
		_ = json.Unmarshal(b, &req)
		pk.mu.Lock()
		defer pk.mu.Unlock()
		pk.asked = append(pk.asked, req)
		k := pk.keys[req["key_id"]]
		if r.Method != http.MethodPost || k == nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error_code":"INVALID_KEY_ID"}`))
			return
		}
		var exp any
		if v, ok := pk.expired[req["key_id"]]; ok {
			exp = v
		}
		pub, _ := k.PublicKey.Bytes()
		_ = json.NewEncoder(w).Encode(map[string]any{"key": map[string]any{"alg": "ES256", "crv": "P-256", "kid": req["key_id"],
			"kty": "EC", "use": "sig", "x": b64url(pub[1:33]), "y": b64url(pub[33:]), "created_at": 1560466143, "expired_at": exp},
			"request_id": "req-1"})
	})
	return pk
}

func (pk *plaidKeys) add(kid string) *ecdsa.PrivateKey {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pk.mu.Lock()
	pk.keys[kid] = k
	pk.mu.Unlock()
	return k
}

func (pk *plaidKeys) requests() int {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	return len(pk.asked)
}

func plaidToken(t testing.TB, key *ecdsa.PrivateKey, kid string, body []byte, iat time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iat": iat.Unix(), "request_body_sha256": bodyHash(body)})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlaid(t *testing.T) {
	e := newPKIEnv(t)
	pk := plaidServer(t, e, "production.plaid.com")
	k1, k2 := pk.add("kid-1"), pk.add("kid-2")
	cfg := Config{Secrets: []string{"client-abc:secret-xyz"}, Fetcher: e.fetcher(FetcherOptions{})}
	body := []byte(`{"webhook_type":"TRANSACTIONS","webhook_code":"SYNC_UPDATES_AVAILABLE","item_id":"item-1"}`)
	req := func(tok string, b []byte) *Request {
		return &Request{Header: http.Header{"Plaid-Verification": {tok}}, Body: b}
	}

	for range 3 {
		if err := verify(t, "plaid", cfg, req(plaidToken(t, k1, "kid-1", body, t0), body), t0); err != nil {
			t.Fatal(err)
		}
	}
	if n := pk.requests(); n != 1 {
		t.Fatalf("%d key fetches for a warm kid", n)
	}
	if a := pk.asked[0]; a["client_id"] != "client-abc" || a["secret"] != "secret-xyz" || a["key_id"] != "kid-1" {
		t.Fatalf("key request %v", a)
	}
	// Rotation: a second kid is fetched and accepted.
	if err := verify(t, "plaid", cfg, req(plaidToken(t, k2, "kid-2", body, t0), body), t0); err != nil {
		t.Fatalf("second kid: %v", err)
	}

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	hsTok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iat": t0.Unix(), "request_body_sha256": bodyHash(body)})
	hsTok.Header["kid"] = "kid-hs"
	hs, _ := hsTok.SignedString([]byte("client-abc:secret-xyz"))
	noneTok := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iat": t0.Unix(), "request_body_sha256": bodyHash(body)})
	noneTok.Header["kid"] = "kid-none"
	none, _ := noneTok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	noKid := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iat": t0.Unix()})
	noKidTok, _ := noKid.SignedString(k1)
	flipped := append([]byte(nil), body...)
	flipped[len(flipped)/2] ^= 1

	before := pk.requests()
	cases := []struct {
		name string
		r    *Request
		want error
	}{
		{"flipped body byte", req(plaidToken(t, k1, "kid-1", body, t0), flipped), ErrNoMatch},
		{"missing header", &Request{Header: http.Header{}, Body: body}, ErrMissingHeader},
		{"wrong key for the kid", req(plaidToken(t, ec, "kid-1", body, t0), body), ErrNoMatch},
		{"iat 301 s old", req(plaidToken(t, k1, "kid-1", body, t0.Add(-301*time.Second)), body), ErrStale},
		{"iat 301 s ahead", req(plaidToken(t, k1, "kid-1", body, t0.Add(301*time.Second)), body), ErrStale},
		{"HS256 with the credentials", req(hs, body), ErrNoMatch},
		{"alg none", req(none, body), ErrNoMatch},
		{"no kid", req(noKidTok, body), ErrMalformed},
		{"garbage", req("a.b.c", body), ErrMalformed},
	}
	for _, c := range cases {
		if err := verify(t, "plaid", cfg, c.r, t0); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if n := pk.requests(); n != before {
		t.Fatalf("refused tokens caused %d key fetches", n-before)
	}
	for _, ok := range []time.Duration{-299 * time.Second, 299 * time.Second} {
		if err := verify(t, "plaid", cfg, req(plaidToken(t, k1, "kid-1", body, t0.Add(ok)), body), t0); err != nil {
			t.Errorf("iat %s: %v", ok, err)
		}
	}

	// Unknown kid: refused, and remembered for a minute.
	for range 3 {
		if err := verify(t, "plaid", cfg, req(plaidToken(t, ec, "kid-unknown", body, t0), body), t0); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if n := pk.requests() - before; n != 1 {
		t.Fatalf("unknown kid fetched %d times, want 1", n)
	}
	// An expired key is refused.
	k3 := pk.add("kid-3")
	pk.mu.Lock()
	pk.expired["kid-3"] = t0.Add(-time.Hour).Unix()
	pk.mu.Unlock()
	if err := verify(t, "plaid", cfg, req(plaidToken(t, k3, "kid-3", body, t0), body), t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("expired key: %v", err)
	}

	// Sandbox credentials use the sandbox host, and only it.
	sb := plaidServer(t, e, "sandbox.plaid.com")
	ks := sb.add("kid-s")
	sbCfg := Config{Secrets: []string{"sandbox:client-abc:secret-xyz"}, Fetcher: e.fetcher(FetcherOptions{})}
	if err := verify(t, "plaid", sbCfg, req(plaidToken(t, ks, "kid-s", body, t0), body), t0); err != nil || sb.requests() != 1 {
		t.Fatalf("sandbox: %v (%d requests)", err, sb.requests())
	}
	for _, bad := range []string{"nocolon", "staging:a:b", "a:b:c:d", ":b"} {
		if _, err := New("plaid", Config{Secrets: []string{bad}}); !errors.Is(err, ErrConfig) {
			t.Errorf("secret %q: %v", bad, err)
		}
	}
	if _, err := New("plaid", Config{Secrets: []string{"a:b", "c:d"}}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "secrets") {
		t.Errorf("two credentials: %v", err)
	}
}

// Made-up key ids cost at most MaxFetches outbound requests a minute, all
// together: past the budget a verification that needs a fetch is
// ErrUnavailable (the provider retries), and known keys still verify.
func TestPlaidFetchesAreBounded(t *testing.T) {
	e := newPKIEnv(t)
	pk := plaidServer(t, e, "production.plaid.com")
	k1 := pk.add("kid-1")
	cfg := Config{Secrets: []string{"client-abc:secret-xyz"}, Fetcher: e.fetcher(FetcherOptions{MaxFetches: 5})}
	body := []byte(`{"webhook_type":"ITEM"}`)
	req := func(kid string) *Request {
		return &Request{Header: http.Header{"Plaid-Verification": {plaidToken(t, k1, kid, body, t0)}}, Body: body}
	}
	if err := verify(t, "plaid", cfg, req("kid-1"), t0); err != nil {
		t.Fatal(err)
	}
	unavailable := 0
	for i := range 100 {
		err := verify(t, "plaid", cfg, req(fmt.Sprintf("made-up-%d", i)), t0)
		if errors.Is(err, ErrUnavailable) {
			unavailable++
		} else if !errors.Is(err, ErrNoMatch) {
			t.Fatalf("made-up kid %d: %v", i, err)
		}
	}
	if n := pk.requests(); n != 5 {
		t.Fatalf("101 kids asked %d fetches, want the budget of 5", n)
	}
	if unavailable != 96 {
		t.Fatalf("%d answered unavailable, want 96", unavailable)
	}
	if err := verify(t, "plaid", cfg, req("kid-1"), t0); err != nil {
		t.Fatalf("a cached key past the budget: %v", err)
	}
	// A minute later the budget is back.
	if err := verify(t, "plaid", cfg, req("made-up-late"), t0.Add(time.Minute)); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("a minute later: %v", err)
	}
}
