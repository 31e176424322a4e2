package signatures

import (
	"bytes"
	"errors"
	"testing"
)

// A member named twice is read as the first by gjson and as the last by JSON.parse (Adyen's
// SDK, and agents): verification would pass on values the agent never sees. Such bodies are
// malformed, whichever member the signature covers and whatever the letter case.
func TestAdyenRefusesMembersNamedTwice(t *testing.T) {
	keys := familyKeys(t, "adyen")
	cfg := Config{Secrets: []string{keys[0].verify}}
	body := adyenSignedBody(t, keys[0].sign, adyenTwoItems)
	if err := verify(t, "adyen", cfg, &Request{Body: body}, t0); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		// The agent reads pspReference "EVIL"; the signature covers 7914073381342284.
		"signed field, agent reads the later": bytes.Replace(body, []byte(`"pspReference":"7914073381342284"`),
			[]byte(`"pspReference":"7914073381342284","pspReference":"EVIL"`), 1),
		"signed field, other letter case": bytes.Replace(body, []byte(`"pspReference":"7914073381342284"`),
			[]byte(`"PSPReference":"EVIL","pspReference":"7914073381342284"`), 1),
		"amount": bytes.Replace(body, []byte(`"amount":{"currency":"EUR","value":1130}`),
			[]byte(`"amount":{"currency":"EUR","value":1130},"amount":{"currency":"EUR","value":999999}`), 1),
		"amount value": bytes.Replace(body, []byte(`"value":1130`), []byte(`"value":1130,"value":999999`), 1),
		"notificationItems": bytes.Replace(body, []byte(`{"live":"false",`),
			[]byte(`{"live":"false","notificationItems":[],`), 1),
		"NotificationRequestItem": bytes.Replace(body, []byte(`{"NotificationRequestItem":{"additionalData"`),
			[]byte(`{"NotificationRequestItem":{},"NotificationRequestItem":{"additionalData"`), 1),
	} {
		if bytes.Equal(b, body) {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if err := verify(t, "adyen", cfg, &Request{Body: b}, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// Only valid JSON is read: gjson would read the items of a body with trailing garbage or a
// missing brace, which JSON.parse refuses.
func TestAdyenRefusesBrokenJSON(t *testing.T) {
	keys := familyKeys(t, "adyen")
	cfg := Config{Secrets: []string{keys[0].verify}}
	body := adyenSignedBody(t, keys[0].sign, adyenTwoItems)
	for _, b := range [][]byte{append(bytes.Clone(body), '}'), body[:len(body)-1], append(bytes.Clone(body), " x"...)} {
		if err := verify(t, "adyen", cfg, &Request{Body: b}, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", b[len(b)-8:], err)
		}
	}
}
