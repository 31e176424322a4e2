package signatures

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The form-signing verifiers hash pooled pieces; these tests hold them to the signed strings the
// old code built (sortedParamsOracle, plivoV3Base; Twilio's with each distinct pair once, as its
// SDKs sign) on valid and malformed bodies.

func reqctxBodies() []string {
	bodies := []string{"", "=", "a", "&&", "MessageSid=SM1&Body=Hi+there%21", "b=2&a=1&a=0", "a=%zz", "a=1;b=2",
		"k=" + strings.Repeat("v", 1500) + "&j=%41", "=&=", "To=%2B15557654321&From=%2B1555"}
	return append(bodies, randomStrings(rand.New(rand.NewPCG(16, 4)), "ab=&%+;0fz", 400, 24)...)
}

func oracleMAC(h func() hash.Hash, key string, parts ...string) string {
	m := hmac.New(h, []byte(key))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// checkVerdict: an oracle error must come back word for word; otherwise the oracle's signature
// verifies and a flipped one does not.
func checkVerdict(t *testing.T, name, body string, oracleErr error, verify func(sig string) error, sig string) {
	t.Helper()
	if oracleErr != nil {
		if err := verify(sig); fmt.Sprint(err) != fmt.Sprint(oracleErr) {
			t.Fatalf("%s body %q: %v, oracle %v", name, body, err, oracleErr)
		}
		return
	}
	if err := verify(sig); err != nil {
		t.Fatalf("%s body %q: %v", name, body, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(sig)
	raw[0] ^= 1
	if err := verify(base64.StdEncoding.EncodeToString(raw)); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("%s body %q, flipped signature: %v", name, body, err)
	}
}

func TestFormSchemesMatchOldSignedStrings(t *testing.T) {
	const key, u = "k-16", "https://hooks.example.com/in?b=2&a=1"
	cfg := Config{Secrets: []string{"other", key}, URL: u}
	twilio, _ := New("twilio", cfg)
	mandrill, _ := New("mandrill", cfg)
	plivo, _ := New("plivo", cfg)
	pu, _ := url.Parse(u)
	for _, body := range reqctxBodies() {
		params, perr := sortedParamsOracle([]byte(body))
		distinct, _ := twilioParamsOracle([]byte(body))
		checkVerdict(t, "twilio", body, perr, func(sig string) error {
			return twilio.Verify(&Request{Method: "POST", Body: []byte(body), Header: http.Header{twilioHeader: {sig}}}, t0)
		}, oracleMAC(sha1.New, key, u, string(distinct)))
		checkVerdict(t, "mandrill", body, perr, func(sig string) error {
			return mandrill.Verify(&Request{Body: []byte(body), Header: http.Header{mandrillHeader: {sig}}}, t0)
		}, oracleMAC(sha1.New, key, u, string(params)))
		for _, method := range []string{"POST", "GET"} {
			base, err := plivoV3Base(method, pu, []byte(body))
			if method == "POST" && fmt.Sprint(err) != fmt.Sprint(perr) {
				t.Fatalf("plivoV3Base %q: %v, oracle %v", body, err, perr)
			}
			checkVerdict(t, "plivo "+method, body, err, func(sig string) error {
				return plivo.Verify(&Request{Method: method, Body: []byte(body),
					Header: http.Header{plivoV3: {sig}, plivoV3Nonce: {"n-1"}}}, t0)
			}, oracleMAC(sha256.New, key, base, ".n-1"))
		}
	}
}

// TestPlivoWriteSignedMatchesBase holds the hashed string to plivoV3Base for URLs with and
// without a query.
func TestPlivoWriteSignedMatchesBase(t *testing.T) {
	for _, raw := range []string{"https://a.example/p", "https://a.example/p?x=1&b=%20", "http://a.example:8080/?="} {
		pu, _ := url.Parse(raw)
		for _, body := range reqctxBodies() {
			for _, method := range []string{"POST", "GET"} {
				want, err := plivoV3Base(method, pu, []byte(body))
				if err != nil {
					continue
				}
				var f formParams
				if method != "GET" {
					if err := f.parse([]byte(body)); err != nil {
						t.Fatal(err)
					}
				}
				rec := &recordHash{}
				plivoURLOf(pu).writeSigned(&keyedMAC{h: rec}, method, &f, "nonce")
				if string(rec.b) != want+".nonce" {
					t.Fatalf("%s %s %q: hashed %q, want %q", method, raw, body, rec.b, want+".nonce")
				}
			}
		}
	}
}
