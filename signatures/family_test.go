package signatures

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.yaml.in/yaml/v3"
)

// Hooks into the shared harness (harness_test.go, bench_test.go, handshake_test.go) for the
// providers of family.go.

// familyOwnHarness: schemes whose keys are fetched at run time cannot be signed from a secret
// string; the shared harness skips them and fetched_test.go covers the same cases.
var familyOwnHarness = map[string]bool{"sns": true, "paypal": true, "plaid": true}

// familyNotHMAC: left out of the HMAC-vs-bare ratio benchmark. Adyen and Braintree are HMAC
// schemes over fields inside the body: they are in it, against a bare HMAC of the whole body.
var familyNotHMAC = map[string]bool{"sns": true, "paypal": true, "plaid": true, "telnyx": true,
	"vonage": true, "monday": true}

// familyUnsignedRetry: providers whose documentation asks for a 5xx on an unsigned request.
var familyUnsignedRetry = map[string]bool{"vonage": true}

var familyHandshakes = map[string]bool{"braintree": true, "sns": true, "monday": true}

func familyNames() []string { return slices.Sorted(maps.Keys(familyRegistry)) }

func familyKeys(t testing.TB, provider string) []keyPair {
	t.Helper()
	if _, ok := familyRegistry[provider]; !ok {
		return nil
	}
	out := make([]keyPair, 3)
	for i := range out {
		switch provider {
		case "telnyx":
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = keyPair{base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv.Seed())}
		case "adyen":
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			out[i] = sharedKey(strings.ToUpper(hex.EncodeToString(b)))
		case "braintree":
			out[i] = sharedKey(fmt.Sprintf("pub%d:priv-%d-%x", i, i, i*7919))
		default:
			out[i] = sharedKey(fmt.Sprintf("secret-%s-%d", provider, i))
		}
	}
	return out
}

const adyenTwoItems = `{"live":"false","notificationItems":[` +
	`{"NotificationRequestItem":{"additionalData":{"authCode":"1234"},"amount":{"currency":"EUR","value":1130},"eventCode":"AUTHORISATION","eventDate":"2026-03-14T15:09:26+01:00","merchantAccountCode":"Shop:EU","merchantReference":"order\\1","pspReference":"7914073381342284","success":"true"}},` +
	`{"NotificationRequestItem":{"amount":{"currency":"EUR","value":500},"eventCode":"REFUND","merchantAccountCode":"Shop","merchantReference":"order-2","originalReference":"7914073381342284","pspReference":"8815000000000001","success":"false"}}]}`

const braintreeXMLBody = `<?xml version="1.0" encoding="UTF-8"?><notification><kind>subscription_went_past_due</kind>` +
	`<timestamp type="datetime">2026-03-14T15:09:26Z</timestamp><subject><subscription><id>sub_1</id></subscription></subject></notification>`

func familyBody(provider string, _ time.Time) []byte {
	switch provider {
	case "adyen":
		return []byte(adyenTwoItems)
	case "braintree":
		return []byte(braintreeXMLBody)
	case "telnyx":
		return []byte(`{"data":{"event_type":"message.received","id":"0ccc7b54-4df3-4bca-a65a-3da1ecc777f0","occurred_at":"2026-03-14T15:09:26.000+00:00","payload":{"text":"héllo"}}}`)
	case "vonage":
		return []byte(`{"message_uuid":"aaaaaaaa-bbbb-cccc-dddd-0123456789ab","status":"delivered","timestamp":"2026-03-14T15:09:26Z"}`)
	case "monday":
		return []byte(`{"event":{"type":"create_pulse","triggerUuid":"b3f1c2d4e5f60718293a4b5c6d7e8f90","boardId":1}}`)
	}
	return nil
}

func TestRegistryDisjoint(t *testing.T) {
	for n := range familyRegistry {
		if _, dup := registry[n]; dup {
			t.Errorf("%s is in both registries", n)
		}
	}
}

type familyVectors struct {
	Adyen []struct {
		Source, Key, Item, Signed, Signature string
	} `yaml:"adyen"`
	BraintreeChallenge []struct {
		Source     string
		PublicKey  string `yaml:"public_key"`
		PrivateKey string `yaml:"private_key"`
		Challenge  string
		Answer     string
	} `yaml:"braintree_challenge"`
}

func loadFamilyVectors(t *testing.T) familyVectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/family_vectors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v familyVectors
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAdyenPublishedVectors: the SDKs' items, signing strings and signatures.
func TestAdyenPublishedVectors(t *testing.T) {
	vs := loadFamilyVectors(t).Adyen
	if len(vs) < 3 {
		t.Fatalf("only %d adyen vectors", len(vs))
	}
	for i, v := range vs {
		if got := string(adyenSignedOK(t, []byte(v.Item), false)); got != v.Signed {
			t.Errorf("%d: signed string %q, want %q (%s)", i, got, v.Signed, v.Source)
		}
		item := strings.TrimSuffix(v.Item, "}") + `,"additionalData":{"hmacSignature":"` + v.Signature + `"}}`
		body := []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":` + item + `}]}`)
		cfg := Config{Secrets: []string{v.Key}}
		if err := verify(t, "adyen", cfg, &Request{Body: body}, t0); err != nil {
			t.Errorf("%d: published vector rejected: %v (%s)", i, err, v.Source)
		}
		// The lower-case key is the same key.
		if err := verify(t, "adyen", Config{Secrets: []string{strings.ToLower(v.Key)}}, &Request{Body: body}, t0); err != nil {
			t.Errorf("%d: lower-case key: %v", i, err)
		}
		tampered := bytes.Replace(body, []byte(`"EUR"`), []byte(`"USD"`), 1)
		if err := verify(t, "adyen", cfg, &Request{Body: tampered}, t0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("%d: changed currency: %v", i, err)
		}
	}
}

func adyenSignedBody(t *testing.T, key string, body string) []byte {
	t.Helper()
	s, err := NewSigner("adyen", Config{Secrets: []string{key}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{Body: []byte(body)}
	if err := s.Sign(r, t0); err != nil {
		t.Fatal(err)
	}
	return r.Body
}

func TestAdyenEveryItemMustVerify(t *testing.T) {
	keys := familyKeys(t, "adyen")
	cfg := Config{Secrets: []string{keys[0].verify}}
	body := adyenSignedBody(t, keys[0].sign, adyenTwoItems)
	if err := verify(t, "adyen", cfg, &Request{Body: body}, t0); err != nil {
		t.Fatalf("signed batch: %v", err)
	}
	// Each signed field of each item is covered; an unsigned one (reason, additionalData) is not.
	for _, c := range []struct{ from, to string }{
		{`"value":500`, `"value":501`}, {`"success":"false"`, `"success":"true"`}, {`"eventCode":"REFUND"`, `"eventCode":"REFUNX"`},
		{`"originalReference":"7914073381342284"`, `"originalReference":"7914073381342285"`}, {`"merchantReference":"order-2"`, `"merchantReference":"order-3"`},
		{`"pspReference":"8815000000000001"`, `"pspReference":"8815000000000002"`}, {`"merchantAccountCode":"Shop"`, `"merchantAccountCode":"Shap"`},
	} {
		b := bytes.Replace(body, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(b, body) {
			t.Fatalf("%s not in body", c.from)
		}
		if err := verify(t, "adyen", cfg, &Request{Body: b}, t0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("second item %s → %s: %v", c.from, c.to, err)
		}
	}
	// An item signed with another key (even a configured one) spoils the batch: one key for all.
	other := adyenSignedBody(t, keys[1].sign, adyenTwoItems)
	second := gjson.GetBytes(other, "notificationItems.1.NotificationRequestItem.additionalData.hmacSignature").Str
	first := gjson.GetBytes(body, "notificationItems.1.NotificationRequestItem.additionalData.hmacSignature").Str
	mixed := bytes.Replace(body, []byte(first), []byte(second), 1)
	two := Config{Secrets: []string{keys[0].verify, keys[1].verify}}
	if err := verify(t, "adyen", two, &Request{Body: mixed}, t0); !errors.Is(err, ErrNoMatch) {
		t.Errorf("items under different keys: %v", err)
	}
	// A missing signature on any item, or no items, is a missing field.
	noSig := bytes.Replace(body, []byte(`"hmacSignature":"`+first+`"`), []byte(`"x":"y"`), 1)
	for name, b := range map[string][]byte{"item without signature": noSig, "no items": []byte(`{"notificationItems":[]}`),
		"not a notification": []byte(`{"id":"x"}`)} {
		if err := verify(t, "adyen", cfg, &Request{Body: b}, t0); !errors.Is(err, ErrMissingHeader) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Escaped-style signatures (Ruby SDK) verify too: the first item has ":" and "\" in fields.
	nri := gjson.Get(adyenTwoItems, "notificationItems.0.NotificationRequestItem")
	k0, _ := hex.DecodeString(keys[0].verify)
	esc := base64.StdEncoding.EncodeToString(adyenMAC(k0, adyenSignedOK(t, []byte(nri.Raw), true)))
	first0 := gjson.GetBytes(body, "notificationItems.0.NotificationRequestItem.additionalData.hmacSignature").Str
	if err := verify(t, "adyen", cfg, &Request{Body: bytes.Replace(body, []byte(first0), []byte(esc), 1)}, t0); err != nil {
		t.Errorf("escaped signing string: %v", err)
	}
}

func TestAdyenBankingWebhook(t *testing.T) {
	keys := familyKeys(t, "adyen")
	body := `{"data":{"balancePlatform":"YOUR_BP","id":"BA00000000000000000000001"},"environment":"test","type":"balancePlatform.accountHolder.updated"}`
	s, _ := NewSigner("adyen", Config{Secrets: []string{keys[0].sign}})
	r := &Request{Header: http.Header{}, Body: []byte(body)}
	if err := s.Sign(r, t0); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Secrets: []string{keys[1].verify, keys[0].verify}}
	if err := verify(t, "adyen", cfg, r, t0); err != nil {
		t.Fatalf("banking webhook: %v", err)
	}
	c := *r
	c.Body = bytes.Replace(r.Body, []byte("updated"), []byte("updatee"), 1)
	if err := verify(t, "adyen", cfg, &c, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("flipped banking body: %v", err)
	}
	c = *r
	c.Header = http.Header{adyenHeader: {"!!"}}
	if err := verify(t, "adyen", cfg, &c, t0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad header: %v", err)
	}
	if _, err := New("adyen", Config{Secrets: []string{"not-hex"}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("non-hex key: %v", err)
	}
}

func braintreeForm(sig, payload string) []byte {
	return []byte(url.Values{"bt_signature": {sig}, "bt_payload": {payload}}.Encode())
}

// Braintree: no fixed notification vector was found (the SDKs' specs build one at run time with
// sample_notification); the published bt_challenge answer (TestBraintreeChallenge) pins the key
// derivation, SHA-1 of the private key as the HMAC-SHA1 key, that signatures use too.
func TestBraintree(t *testing.T) {
	cfg := Config{Secrets: []string{"integration_public_key:integration_private_key"}}
	k, _ := newBraintree(cfg)
	payload := base64.StdEncoding.EncodeToString([]byte(braintreeXMLBody))
	sig := hex.EncodeToString(k.keys[0].digest([]byte(payload)))
	sigNL := hex.EncodeToString(k.keys[0].digest([]byte(payload + "\n")))
	cases := []struct {
		name string
		body []byte
		want error
	}{
		{"as signed", braintreeForm("integration_public_key|"+sig, payload), nil},
		{"signed with trailing newline", braintreeForm("integration_public_key|"+sigNL, payload), nil},
		{"our pair among others", braintreeForm("other|00&integration_public_key|"+sig, payload), nil},
		{"no pair for our public key", braintreeForm("other|"+sig, payload), ErrNoMatch},
		{"wrong signature", braintreeForm("integration_public_key|"+sigNL[:39]+"0", payload), ErrNoMatch},
		{"missing signature", []byte("bt_payload=" + url.QueryEscape(payload)), ErrMissingHeader},
		{"missing payload", []byte("bt_signature=" + url.QueryEscape("integration_public_key|"+sig)), ErrMissingHeader},
		{"illegal payload characters", braintreeForm("integration_public_key|"+sig, payload+"!"), ErrMalformed},
		{"bad form", []byte("bt_signature=%zz"), ErrMalformed},
	}
	for _, c := range cases {
		err := verify(t, "braintree", cfg, &Request{Body: c.body}, t0)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// The key is SHA-1 of the private key, not the private key itself.
	m := k.keys[0]
	m.mac = []byte("integration_private_key")
	raw := hex.EncodeToString(m.digest([]byte(payload)))
	if err := verify(t, "braintree", cfg, &Request{Body: braintreeForm("integration_public_key|"+raw, payload)}, t0); !errors.Is(err, ErrNoMatch) {
		t.Errorf("HMAC keyed with the raw private key accepted: %v", err)
	}
	for _, bad := range []string{"nocolon", ":priv", "pub:", "pu|b:priv"} {
		if _, err := New("braintree", Config{Secrets: []string{bad}}); !errors.Is(err, ErrConfig) {
			t.Errorf("secret %q: %v", bad, err)
		}
	}
}

// TestBraintreeChallenge: the published answer, and that the answer cannot be replayed as a
// notification (it is an HMAC under the same key).
func TestBraintreeChallenge(t *testing.T) {
	for _, v := range loadFamilyVectors(t).BraintreeChallenge {
		cfg := Config{Secrets: []string{v.PublicKey + ":" + v.PrivateKey}}
		get := &Request{Method: http.MethodGet, URL: testURL + "&bt_challenge=" + v.Challenge}
		resp, ok, err := Handshake("braintree", cfg, get, t0)
		if !ok || err != nil {
			t.Fatalf("handshake: %v %v", ok, err)
		}
		if string(resp.Body) != v.Answer || resp.Status != http.StatusOK || !strings.HasPrefix(resp.ContentType, "text/plain") {
			t.Fatalf("answer %d %q %q, want %q (%s)", resp.Status, resp.ContentType, resp.Body, v.Answer, v.Source)
		}
		_, sig, _ := strings.Cut(v.Answer, "|")
		replay := braintreeForm(v.Answer, v.Challenge)
		if err := verify(t, "braintree", cfg, &Request{Body: replay}, t0); !errors.Is(err, ErrMalformed) {
			t.Fatalf("challenge answer replayed as a notification: %v (sig %s)", err, sig)
		}
	}
	cfg := Config{Secrets: []string{"pub:priv"}}
	for _, q := range []string{"bt_challenge=NOTHEX0000000000000000", "bt_challenge=abc", "bt_challenge=" + strings.Repeat("a", 33)} {
		if _, ok, err := Handshake("braintree", cfg, &Request{Method: http.MethodGet, URL: testURL + "&" + q}, t0); !ok || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v %v", q, ok, err)
		}
	}
	// A POST, or a GET without bt_challenge, is not the handshake.
	if _, ok, _ := Handshake("braintree", cfg, &Request{Method: http.MethodPost, URL: testURL + "&bt_challenge=20f9f8ed05f77439fe955c977e4c8a53"}, t0); ok {
		t.Error("POST taken as the handshake")
	}
	if _, ok, _ := Handshake("braintree", cfg, &Request{Method: http.MethodGet, URL: testURL}, t0); ok {
		t.Error("GET without bt_challenge taken as the handshake")
	}
}

// Telnyx: no fixed vector was found in team-telnyx/telnyx-node's tests (they generate a key pair
// per run), so this checks the message layout against crypto/ed25519 directly.
func TestTelnyxMessageLayout(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	body := []byte(`{"data":{"id":"x"}}`)
	ts := fmt.Sprint(t0.Unix())
	sig := ed25519.Sign(priv, []byte(ts+"|"+string(body)))
	r := &Request{Header: http.Header{telnyxSig: {base64.StdEncoding.EncodeToString(sig)}, telnyxTS: {ts}}, Body: body}
	cfg := Config{Secrets: []string{base64.StdEncoding.EncodeToString(pub)}}
	if err := verify(t, "telnyx", cfg, r, t0); err != nil {
		t.Fatal(err)
	}
	// Discord's layout (no "|") must not verify.
	r.Header.Set(telnyxSig, base64.StdEncoding.EncodeToString(ed25519.Sign(priv, append([]byte(ts), body...))))
	if err := verify(t, "telnyx", cfg, r, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("message without separator: %v", err)
	}
	r.Header.Set(telnyxSig, hex.EncodeToString(sig))
	if err := verify(t, "telnyx", cfg, r, t0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("hex signature: %v", err)
	}
	if _, err := New("telnyx", Config{Secrets: []string{hex.EncodeToString(pub)}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("hex key: %v", err)
	}
}

func adyenSignedOK(t *testing.T, nri []byte, escaped bool) []byte {
	t.Helper()
	b, err := adyenSigned(nri, escaped)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
