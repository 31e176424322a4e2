package signatures

import (
	"encoding/base64"
	"net/http"
	"testing"

	svix "github.com/svix/svix-webhooks/go"
)

// The Standard Webhooks family runs on the HMAC core; svix-webhooks/go, the specification's
// reference library, is the cross-check in both directions and for every provider of the family.
func TestStandardWebhooksAgainstSvixLibrary(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"type":"invoice.paid","data":{"amount":1200}}`)
	for _, p := range []string{"standard-webhooks", "svix", "replicate", "openai", "resend", "clerk", "brex", "polar"} {
		prefix := "Webhook"
		if p == "svix" || p == "resend" || p == "clerk" {
			prefix = "Svix"
		}
		libSecret := secret
		if p == "polar" {
			// polar-js's validateEvent base64-encodes the secret's text, whatever its prefix,
			// before handing it to the Standard Webhooks library.
			libSecret = base64.StdEncoding.EncodeToString([]byte(secret))
		}
		wh, err := svix.NewWebhook(libSecret)
		if err != nil {
			t.Fatal(err)
		}
		// The library signs, we verify.
		sig, err := wh.Sign("msg_lib", t0, body)
		if err != nil {
			t.Fatal(err)
		}
		r := &Request{Method: "POST", Body: body, Header: http.Header{prefix + "-Id": {"msg_lib"},
			prefix + "-Timestamp": {formatTime(t0, tsSeconds)}, prefix + "-Signature": {"v1a,ignored " + sig}}}
		if err := verify(t, p, Config{Secrets: []string{secret}}, r, t0); err != nil {
			t.Errorf("%s: library-signed request rejected: %v", p, err)
		}
		// We sign, the library verifies.
		s, err := NewSigner(p, Config{Secrets: []string{secret}})
		if err != nil {
			t.Fatal(err)
		}
		r = &Request{Method: "POST", Body: body, Header: http.Header{}}
		if err := s.Sign(r, t0); err != nil {
			t.Fatal(err)
		}
		h := http.Header{"Webhook-Id": r.Header.Values(prefix + "-Id"), "Webhook-Timestamp": r.Header.Values(prefix + "-Timestamp"),
			"Webhook-Signature": r.Header.Values(prefix + "-Signature")}
		if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
			t.Errorf("%s: our signature rejected by the library: %v (%v)", p, err, r.Header)
		}
	}
	// The families do not read each other's headers.
	s, _ := NewSigner("svix", Config{Secrets: []string{secret}})
	r := &Request{Method: "POST", Body: body, Header: http.Header{}}
	_ = s.Sign(r, t0)
	if err := verify(t, "standard-webhooks", Config{Secrets: []string{secret}}, r, t0); err == nil {
		t.Fatal("standard-webhooks accepted svix-* headers")
	}
}
