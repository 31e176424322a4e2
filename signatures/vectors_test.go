package signatures

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type vector struct {
	Provider string            `yaml:"provider"`
	Source   string            `yaml:"source"`
	Secret   string            `yaml:"secret"`
	URL      string            `yaml:"url"`
	Method   string            `yaml:"method"`
	Now      int64             `yaml:"now"`
	NowMS    int64             `yaml:"now_ms"`
	Headers  map[string]string `yaml:"headers"`
	Body     string            `yaml:"body"`
}

// TestPublishedVectors checks every vector in testdata/vectors.yaml verifies, and that the same
// request with one body byte changed does not.
func TestPublishedVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/vectors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := yaml.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 9 {
		t.Fatalf("only %d vectors", len(vs))
	}
	for i, v := range vs {
		t.Run(fmt.Sprintf("%d-%s", i, v.Provider), func(t *testing.T) {
			if v.Source == "" {
				t.Fatal("vector without a source")
			}
			now := time.Unix(v.Now, 0)
			if v.NowMS != 0 {
				now = time.UnixMilli(v.NowMS)
			}
			r := &Request{Method: v.Method, URL: v.URL, Header: http.Header{}, Body: []byte(v.Body)}
			for k, val := range v.Headers {
				r.Header[k] = []string{val} // as written, often not canonical
			}
			cfg := Config{Secrets: []string{v.Secret}, URL: v.URL, Tolerance: time.Minute}
			if err := verify(t, v.Provider, cfg, r, now); err != nil {
				t.Fatalf("published vector rejected: %v", err)
			}
			r.Body = append([]byte(nil), r.Body...)
			r.Body[len(r.Body)/2] ^= 0x20
			if err := verify(t, v.Provider, cfg, r, now); err == nil {
				t.Fatal("altered body accepted")
			}
		})
	}
}

// stripeGoSignature reproduces stripe-go's webhook.ComputeSignature (webhook/client.go): HMAC-SHA256
// keyed with the whole secret string over the decimal unix time, ".", then the payload.
func stripeGoSignature(ts time.Time, payload []byte, secret string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(fmt.Sprintf("%d", ts.Unix())))
	mac.Write([]byte("."))
	mac.Write(payload)
	return mac.Sum(nil)
}

func TestStripeAgainstStripeGoAlgorithm(t *testing.T) {
	const secret = "whsec_test_secret"
	body := []byte(`{"id":"evt_test_webhook","object":"event"}`)
	s, _ := NewSigner("stripe", Config{Secrets: []string{secret}})
	r := &Request{Header: http.Header{}, Body: body}
	if err := s.Sign(r, t0); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("t=%d,v1=%s", t0.Unix(), hex.EncodeToString(stripeGoSignature(t0, body, secret)))
	if got := r.Header.Get("Stripe-Signature"); got != want {
		t.Fatalf("signer: %s, stripe-go algorithm: %s", got, want)
	}
	// A header as stripe-go's tests build it: several v1 (rotation), a v0 and unknown keys, which
	// are ignored; a v0 alone is not enough.
	good := hex.EncodeToString(stripeGoSignature(t0, body, secret))
	other := hex.EncodeToString(stripeGoSignature(t0, body, "whsec_other"))
	cases := map[string]error{
		fmt.Sprintf("t=%d,v1=%s,v1=%s,v0=%s", t0.Unix(), other, good, other): nil,
		fmt.Sprintf("t=%d,v0=%s", t0.Unix(), good):                           ErrMalformed,
		fmt.Sprintf("t=%d,v1=%s", t0.Unix(), other):                          ErrNoMatch,
		fmt.Sprintf("v1=%s", good):                                           ErrMissingHeader,
		fmt.Sprintf("t=%d,v1=%s,x=y,junk", t0.Unix(), good):                  nil,
		fmt.Sprintf("t=%dx,v1=%s", t0.Unix(), good):                          ErrMalformed,
	}
	for h, want := range cases {
		r := &Request{Header: http.Header{"Stripe-Signature": {h}}, Body: body}
		err := verify(t, "stripe", Config{Secrets: []string{secret}}, r, t0)
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: got %v, want %v", h, err, want)
		}
	}
	// The secret is not base64-decoded or stripped: the bare suffix does not verify.
	if err := verify(t, "stripe", Config{Secrets: []string{strings.TrimPrefix(secret, "whsec_")}}, r, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("stripped secret: %v", err)
	}
}
