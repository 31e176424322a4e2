package signatures

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// box-node-sdk 10 verifies the body as received and, failing that, the body with its non-ASCII
// characters and "/" escaped (`jsonStringifyWithEscapedUnicode`): a delivery Box signed in that
// form is authentic. The escaped text below is written out by hand, as the SDK's escaping gives it.
func TestBoxAcceptsTheEscapedFormTheSDKTries(t *testing.T) {
	const key = "box-primary-key"
	body := `{"type":"webhook_event","id":"e1","source":{"name":"résumé/📄.pdf","path":"a\/b"}}`
	escaped := `{"type":"webhook_event","id":"e1","source":{"name":"r\u00e9sum\u00e9\/\ud83d\udcc4.pdf","path":"a\/b"}}`
	if got := string(boxEscaped([]byte(body))); got != escaped {
		t.Fatalf("boxEscaped:\n got %s\nwant %s", got, escaped)
	}
	ts := t0.UTC().Format(time.RFC3339)
	sign := func(signed string) string {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(signed))
		m.Write([]byte(ts))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	req := func(sig, b string) *Request {
		return &Request{Body: []byte(b), Header: http.Header{"Box-Signature-Primary": {sig}, "Box-Signature-Version": {"1"},
			"Box-Signature-Algorithm": {"HmacSHA256"}, "Box-Delivery-Timestamp": {ts}}}
	}
	cfg := Config{Secrets: []string{key}}
	for name, r := range map[string]*Request{
		"signed as received":        req(sign(body), body),
		"signed escaped":            req(sign(escaped), body),
		"escaped, received escaped": req(sign(escaped), escaped),
	} {
		if err := verify(t, "box", cfg, r, t0); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Either form must still match the body: another body's escaped signature does not.
	if err := verify(t, "box", cfg, req(sign(escaped), body[:len(body)-2]+`"}`), t0); !errors.Is(err, ErrNoMatch) {
		t.Errorf("a signature of another body's escaped form: %v", err)
	}
}

// @polar-sh/sdk 1.0 keys its Standard Webhooks HMAC with the secret's UTF-8 bytes and, when the
// secret (after an optional whsec_) is base64, with its decoding too.
func TestPolarAcceptsBothKeysTheSDKTries(t *testing.T) {
	raw := []byte("polar-endpoint-key-bytes")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	body := []byte(`{"type":"order.created","data":{"id":"ord_1"}}`)
	ts := strconv.FormatInt(t0.Unix(), 10)
	for name, key := range map[string][]byte{"UTF-8 bytes of the secret": []byte(secret), "base64 decoding": raw} {
		m := hmac.New(sha256.New, key)
		m.Write([]byte("msg_1." + ts + "."))
		m.Write(body)
		r := &Request{Body: body, Header: http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {ts},
			"Webhook-Signature": {"v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))}}}
		if err := verify(t, "polar", Config{Secrets: []string{secret}}, r, t0); err != nil {
			t.Errorf("signed with the %s: %v", name, err)
		}
	}
}
