package signatures

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The signatures below were computed by twilio-node 6.3.1 (npm), whose tests are not in its
// package: `getExpectedTwilioSignature(token, url, params, algorithm)` with token 12345 and the
// URL and parameters of Twilio's published example (testdata/vectors.yaml). The oracle suite
// (signatures/oracles) checks the same against the SDK itself on every CI run.
const (
	twilioExampleURL    = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioExampleBody   = "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212"
	twilioExampleSHA1   = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	twilioExampleSHA256 = "033hgUJA9M/hXIZsYjwkerEP/DBm35nEri5FhCYjA5s="
	// The JSON body of twilio-python's test_validation_of_body_succeeds, under HMAC_SHA256.
	twilioJSONURL    = "https://mycompany.com/myapp.php?foo=1&bar=2&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
	twilioJSONBody   = `{"property": "value", "boolean": true}`
	twilioJSONSHA256 = "+UOCWf84gdgo/5Hpg4m5/EgKnJA2/TbOw5sPNVr3bPk="
)

func twilioRequest(url, body, sig, settings string) *Request {
	h := http.Header{twilioHeader: {sig}}
	if settings != "" {
		h.Set(twilioSettingsHeader, settings)
	}
	return &Request{Method: http.MethodPost, URL: url, Header: h, Body: []byte(body)}
}

// Twilio signs a SharedKey's webhooks with the algorithm its settings header names, and the
// gateway verifies each as twilio-node does: the header read the same way (first non-empty
// algorithm= entry, trimmed, any case), no header meaning HMAC_SHA1.
func TestTwilioVerifiesTheAlgorithmTheSettingsHeaderNames(t *testing.T) {
	cfg := Config{Secrets: []string{"12345"}, URL: twilioExampleURL}
	for _, tc := range []struct {
		name, url, body, sig, settings string
	}{
		{"no settings header: HMAC_SHA1", twilioExampleURL, twilioExampleBody, twilioExampleSHA1, ""},
		{"HMAC_SHA1 named", twilioExampleURL, twilioExampleBody, twilioExampleSHA1, "key=webhooks_sharedkey_1,algorithm=HMAC_SHA1"},
		{"empty algorithm: HMAC_SHA1", twilioExampleURL, twilioExampleBody, twilioExampleSHA1, "key=webhooks_sharedkey_1,algorithm="},
		{"HMAC_SHA256", twilioExampleURL, twilioExampleBody, twilioExampleSHA256, "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256"},
		{"HMAC_SHA256, spaces and lower case", twilioExampleURL, twilioExampleBody, twilioExampleSHA256, "key=webhooks_sharedkey_1, algorithm = hmac_sha256 "},
		{"HMAC_SHA256 over a JSON body's bodySHA256", twilioJSONURL, twilioJSONBody, twilioJSONSHA256, "algorithm=HMAC_SHA256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := verify(t, "twilio", cfg, twilioRequest(tc.url, tc.body, tc.sig, tc.settings), time.Time{}); err != nil {
				t.Fatalf("signed as twilio-node signs, refused: %v", err)
			}
			tampered := strings.Replace(tc.body, "1234", "1235", 1)
			if tampered == tc.body {
				tampered = strings.Replace(tc.body, "value", "valuf", 1)
			}
			if err := verify(t, "twilio", cfg, twilioRequest(tc.url, tampered, tc.sig, tc.settings), time.Time{}); !errors.Is(err, ErrNoMatch) {
				t.Fatalf("one byte of the body changed: %v, want ErrNoMatch", err)
			}
		})
	}
	// The algorithm must be the one named: each signature is refused under the other's name.
	if err := verify(t, "twilio", cfg, twilioRequest(twilioExampleURL, twilioExampleBody, twilioExampleSHA256, ""), time.Time{}); err == nil {
		t.Error("an HMAC_SHA256 signature without the settings header was accepted as HMAC_SHA1")
	}
	if err := verify(t, "twilio", cfg, twilioRequest(twilioExampleURL, twilioExampleBody, twilioExampleSHA1, "algorithm=HMAC_SHA256"), time.Time{}); err == nil {
		t.Error("an HMAC_SHA1 signature was accepted under algorithm=HMAC_SHA256")
	}
}

// An algorithm the gateway does not implement is its own error, not a malformed header and
// not a mismatch: no secret is tried, and the operator learns the gateway needs upgrading.
func TestTwilioUnsupportedAlgorithmIsItsOwnError(t *testing.T) {
	cfg := Config{Secrets: []string{"12345"}, URL: twilioExampleURL}
	for _, settings := range []string{"key=k,algorithm=HMAC_SHA512", "algorithm=ED25519", "algorithm=" + strings.Repeat("X", 5000)} {
		err := verify(t, "twilio", cfg, twilioRequest(twilioExampleURL, twilioExampleBody, twilioExampleSHA1, settings), time.Time{})
		if !errors.Is(err, ErrUnsupportedAlgorithm) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrNoMatch) {
			t.Errorf("%.40s: %v, want ErrUnsupportedAlgorithm alone", settings, err)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("the error repeats the header without bound: %d bytes", len(err.Error()))
		}
	}
	s, _ := NewSigner("twilio", cfg)
	if err := s.Sign(twilioRequest(twilioExampleURL, twilioExampleBody, "", "algorithm=HMAC_SHA512"), time.Time{}); !errors.Is(err, ErrUnsupportedAlgorithm) {
		t.Errorf("signer asked for HMAC_SHA512: %v", err)
	}
}

// twilio-node and twilio-python write each distinct value of a repeated parameter once
// (twilio-node: new Set(values), sorted): Digits=5678&Digits=1234&Digits=1234 is signed as
// "Digits1234Digits5678", twilio-python's test_compute_signature_duplicate_query_dict signature.
func TestTwilioRepeatedValuesAreSignedOnce(t *testing.T) {
	cfg := Config{Secrets: []string{"12345"}, URL: twilioExampleURL}
	body := "Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234&Digits=1234"
	if err := verify(t, "twilio", cfg, twilioRequest(twilioExampleURL, body, "IK+Dwps556ElfBT0I3Rgjkr1wJU=", ""), time.Time{}); err != nil {
		t.Fatalf("a repeated value, signed as Twilio's SDKs sign it, refused: %v", err)
	}
	// The signer agrees with the verifier and the SDKs.
	s, _ := NewSigner("twilio", cfg)
	r := twilioRequest(twilioExampleURL, body, "", "")
	if err := s.Sign(r, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Get(twilioHeader); got != "IK+Dwps556ElfBT0I3Rgjkr1wJU=" {
		t.Errorf("signer wrote %s, twilio-node writes IK+Dwps556ElfBT0I3Rgjkr1wJU=", got)
	}
}

// The signer signs as Twilio does for a SharedKey when the request names HMAC_SHA256.
func TestTwilioSignerFollowsTheSettingsHeader(t *testing.T) {
	cfg := Config{Secrets: []string{"12345"}, URL: twilioExampleURL}
	s, _ := NewSigner("twilio", cfg)
	r := twilioRequest(twilioExampleURL, twilioExampleBody, "", "key=k,algorithm=HMAC_SHA256")
	if err := s.Sign(r, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Get(twilioHeader); got != twilioExampleSHA256 {
		t.Errorf("signer wrote %s, twilio-node writes %s", got, twilioExampleSHA256)
	}
}
