package signatures

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// oldBraintreePayloadChars is the character test verification used before the table.
func oldBraintreePayloadChars(p []byte) bool {
	for _, c := range p {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '\n') {
			return false
		}
	}
	return true
}

// braintreeFieldsAgree checks the single-scan reading of a Braintree form against the general
// one (url.ParseQuery, as verification read it before): same fields, same payload check, and a
// body refused by one is refused by the other with the same error.
func braintreeFieldsAgree(t *testing.T, body []byte) {
	t.Helper()
	s1, p1, ok1, err1 := braintreeFields(body, nil)
	s2, p2, ok2, err2 := braintreeFormGeneral(body, nil)
	if fmt.Sprint(err1) != fmt.Sprint(err2) {
		t.Fatalf("body %q: error %v, general reading %v", body, err1, err2)
	}
	if err2 != nil {
		return
	}
	if s1 != s2 || !bytes.Equal(p1, p2) || ok1 != ok2 || ok2 != oldBraintreePayloadChars(p2) {
		t.Fatalf("body %q: fast (%q, %q, %v), general (%q, %q, %v)", body, s1, p1, ok1, s2, p2, ok2)
	}
}

// braintreeTokens are the pieces generated bodies are made of: the field names, spelled plainly
// and escaped, the separators, valid escapes in both cases, "+", invalid and cut-off escapes,
// base64 and non-base64 bytes.
var braintreeTokens = []string{"bt_signature", "bt_payload", "bt%5Fpayload", "bt_p%61yload", "BT_payload",
	"bt_payload ", "bt+payload", "=", "=", "&", "&", ";", "%2B", "%2b", "%2F", "%2f", "%3D", "%3d", "%0A", "%0a",
	"%20", "%25", "%26", "%3B", "+", "%", "%2", "%zz", "%g0", "%0", "Y", "WFh", "PG5vdGlm", "/", "\n", "!", "é",
	"\x00", "\xff", "%FF", "pub|", "0123456789abcdef"}

func braintreeGenBody(r *rand.Rand) []byte {
	var b bytes.Buffer
	switch r.IntN(3) {
	case 0: // shaped like a notification, with one token changed or inserted
		b.WriteString("bt_signature=pub%7C" + "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567" + "&bt_payload=PG5vdGlm%2BaWNh%2Ftion%3D%0A")
		at := r.IntN(b.Len() + 1)
		body := append([]byte{}, b.Bytes()[:at]...)
		body = append(body, braintreeTokens[r.IntN(len(braintreeTokens))]...)
		return append(body, b.Bytes()[at:]...)
	case 1: // many pairs, past the single-scan bound
		for i := range braintreeFastPairs + r.IntN(4) - 2 {
			if i > 0 {
				b.WriteByte('&')
			}
			b.WriteString(braintreeTokens[r.IntN(len(braintreeTokens))])
		}
		return b.Bytes()
	}
	for range r.IntN(40) {
		b.WriteString(braintreeTokens[r.IntN(len(braintreeTokens))])
	}
	return b.Bytes()
}

func TestBraintreeFieldsAgreeWithParseQuery(t *testing.T) {
	for _, body := range []string{
		"", "&", "&&", ";", "bt_payload=a;b", "bt_payload=%", "bt_payload=%2", "bt_payload=%zz", "bt_pay%zzload=x",
		"bt_payload=YW%2bJj%2BZA%3d%3D", "bt_payload=YW+Jj", "bt_payload=YWJj%0A", "bt_payload=YWJj%0a",
		"bt_payload=a&bt_payload=b", "bt_payload=&bt_payload=b", "bt%5Fsignature=s&bt%5fpayload=p",
		"bt_signature=a%7Cb%26c%7Cd&bt_payload=p", "=x&bt_payload", "bt_payload=x=y", "bt_payload=%C3%A9",
	} {
		braintreeFieldsAgree(t, []byte(body))
	}
	r := rand.New(rand.NewPCG(16, 1))
	for range 20000 {
		braintreeFieldsAgree(t, braintreeGenBody(r))
	}
}

func FuzzBraintreeForm(f *testing.F) {
	r := rand.New(rand.NewPCG(16, 2))
	for range 20 {
		f.Add(braintreeGenBody(r))
	}
	f.Fuzz(func(t *testing.T, body []byte) { braintreeFieldsAgree(t, body) })
}

// The pooled HMACs verification uses give the HMAC a fresh one gives, however often reused
// and whatever was hashed before, under each of several keys.
func TestBraintreePooledHMACAgrees(t *testing.T) {
	s, err := newBraintree(Config{Secrets: []string{"pub:priv", "pub2:other"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(16, 4))
	for range 500 {
		data := make([]byte, r.IntN(300))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		for _, k := range s.keys {
			var sum [20]byte
			if got, want := k.sum(&sum, data), k.digest(data); !bytes.Equal(got, want) {
				t.Fatalf("key %s, %q: pooled %x, fresh %x", k.public, data, got, want)
			}
		}
	}
}
