package signatures

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// oldAdyenVerify is verification of standard notifications as it was before the fields were
// written straight into the HMAC: the body copied by GetBytes, each item's signed string joined
// into a new buffer, a new HMAC per item.
func oldAdyenVerify(s *adyenScheme, body []byte) error {
	arr := gjson.GetBytes(body, "notificationItems")
	if !arr.IsArray() {
		return fmt.Errorf("%w: body notificationItems[] (or header %s)", ErrMissingHeader, adyenHeader)
	}
	items := arr.Array()
	if len(items) == 0 {
		return fmt.Errorf("%w: body notificationItems[] is empty", ErrMissingHeader)
	}
	if len(items) > maxAdyenItems {
		return fmt.Errorf("%w: body has more than %d notification items", ErrMalformed, maxAdyenItems)
	}
	sigs := make([][sha256.Size]byte, len(items))
	read := make([]adyenItem, len(items))
	for i, it := range items {
		read[i] = adyenRead(it.Get("NotificationRequestItem"))
		raw := read[i].sig
		if raw.Type != gjson.String || raw.Str == "" {
			return fmt.Errorf("%w: body notificationItems[%d].NotificationRequestItem.additionalData.hmacSignature", ErrMissingHeader, i)
		}
		if l, ok := decodeSig(sigs[i][:], raw.Str, true); !ok || l != sha256.Size {
			return fmt.Errorf("%w: body notificationItems[%d] hmacSignature", ErrMalformed, i)
		}
	}
	for _, key := range s.keys {
		ok := true
		for i := range read {
			if hmac.Equal(adyenMAC(key, adyenJoin(&read[i].vals, false)), sigs[i][:]) {
				continue
			}
			if !hmac.Equal(adyenMAC(key, adyenJoin(&read[i].vals, true)), sigs[i][:]) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: body notificationItems[].hmacSignature (every item must verify under one key)", ErrNoMatch)
}

func adyenVerifyAgrees(t *testing.T, s *adyenScheme, body []byte) error {
	t.Helper()
	got, want := s.Verify(&Request{Body: body}, t0), oldAdyenVerify(s, body)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("body %s:\nverify %v\nbefore %v", body, got, want)
	}
	return got
}

// adyenValues are field values for generated items: separators the escaped form changes,
// unicode, JSON escapes, numbers, booleans, null, nested values.
var adyenValues = []string{`"plain"`, `"a:b"`, `"back\\slash"`, `"\\:"`, `"::"`, `""`, `"é€"`, `"\u0041\n"`,
	`1130`, `-1.5e3`, `true`, `false`, `null`, `{"x":1}`, `["a"]`, `"7914073381342284"`}

func adyenGenItem(r *rand.Rand) map[string]string {
	item := map[string]string{}
	for _, f := range []string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference", "eventCode", "success", "reason"} {
		if r.IntN(6) > 0 {
			item[f] = adyenValues[r.IntN(len(adyenValues))]
		}
	}
	if r.IntN(6) > 0 {
		item["amount"] = `{"value":` + adyenValues[r.IntN(len(adyenValues))] + `,"currency":` + adyenValues[r.IntN(len(adyenValues))] + `}`
	}
	return item
}

func adyenItemJSON(item map[string]string, sig string) string {
	var b strings.Builder
	b.WriteString(`{"NotificationRequestItem":{`)
	for k, v := range item {
		b.WriteString(`"` + k + `":` + v + `,`)
	}
	b.WriteString(`"additionalData":{"hmacSignature":` + sig + `}}}`)
	return b.String()
}

// TestAdyenVerifyAgreesWithBefore: verification answers exactly as before on generated batches,
// signed plainly, signed escaped (Ruby SDK), under the second key, forged, tampered, truncated.
func TestAdyenVerifyAgreesWithBefore(t *testing.T) {
	keys := familyKeys(t, "adyen")
	s, err := newAdyen(Config{Secrets: []string{keys[0].verify, keys[1].verify}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(16, 3))
	answers := map[string]int{}
	for range 3000 {
		var items []string
		for range 1 + r.IntN(6) {
			item := adyenGenItem(r)
			nri := gjson.Parse(adyenItemJSON(item, `""`)).Get("NotificationRequestItem")
			key := s.keys[r.IntN(2)]
			var sig string
			switch r.IntN(8) {
			case 0:
				sig = `"` + base64.StdEncoding.EncodeToString(adyenMAC(key, adyenSigned(nri, true))) + `"`
			case 1:
				sig = `"AAAA"`
			case 2:
				sig = `42`
			case 3:
				sig = `"` + base64.StdEncoding.EncodeToString(adyenMAC(key, []byte("forged"))) + `"`
			default:
				sig = `"` + base64.StdEncoding.EncodeToString(adyenMAC(key, adyenSigned(nri, false))) + `"`
			}
			items = append(items, adyenItemJSON(item, sig))
		}
		body := []byte(`{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`)
		switch r.IntN(4) {
		case 0:
			body[r.IntN(len(body))] ^= byte(1 + r.IntN(255))
		case 1:
			body = body[:r.IntN(len(body))]
		}
		answers[fmt.Sprint(adyenVerifyAgrees(t, s, body))]++
	}
	// The generated batches reach every answer: accepted, forged, malformed and missing.
	if answers["<nil>"] == 0 || len(answers) < 5 {
		t.Fatalf("generated batches reached too few answers: %v", answers)
	}
}
