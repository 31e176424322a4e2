package signatures

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
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

// The word test agrees with the byte table for every byte value at every position of a word,
// among plain bytes and among other odd bytes, and on random words.
func TestBraintreePlainWordAgreesWithTable(t *testing.T) {
	tableSays := func(w []byte) bool {
		for _, c := range w {
			if !braintreeAlnum[c] {
				return false
			}
		}
		return true
	}
	check := func(w []byte) {
		t.Helper()
		if got, want := braintreeNotAlnum(binary.LittleEndian.Uint64(w)) == 0, tableSays(w); got != want {
			t.Fatalf("word %q: %v, table %v", w, got, want)
		}
	}
	for _, filler := range []string{"AAAAAAAA", "zZ09/=\n9", "aaaaaaa+", "@[`{.:<>"} {
		for pos := range 8 {
			for c := range 256 {
				w := []byte(filler)
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(16, 5))
	alphabet := []byte("AZaz09/=\n+%@[`{.:<>\x00\x7f\x80\xff ")
	for range 200000 {
		w := make([]byte, 8)
		for i := range w {
			if r.IntN(2) == 0 {
				w[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				w[i] = byte(r.Uint32())
			}
		}
		check(w)
	}
}

// Long payloads, where the word test does the work, read as the separate steps read them: the
// value ends at the first "&", its bad escape is formEscapes's error, it unescapes as
// formAppendUnescaped unescapes it, and it passes the character test exactly when the old test
// passes it.
func TestBraintreeUnescapeLongPayloads(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 6))
	pieces := []string{"PG5vdGlmaWNhdGlvbj4", "YWFh", "%2B", "%2F", "%3D", "%0A", "/", "=", "\n", "+", "%20", "%C3%A9",
		"!", "\xff", ";", "&", "%", "%2", "%G0", "%2&"}
	for range 5000 {
		var b bytes.Buffer
		for b.Len() < r.IntN(3000) {
			p := pieces[r.IntN(len(pieces))]
			if r.IntN(8) > 0 {
				p = pieces[r.IntN(2)]
			}
			b.WriteString(p)
		}
		s := b.Bytes()
		value, _, _ := bytes.Cut(s, []byte("&"))
		got, ok, n, semi, err := braintreeUnescape(nil, s)
		if wantErr := formEscapes(value); fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: error %v, want %v", s, err, wantErr)
		}
		if err != nil {
			continue
		}
		want := formAppendUnescaped(nil, value)
		if n != len(value) || !bytes.Equal(got, want) || ok != oldBraintreePayloadChars(want) || semi != bytes.Contains(value, []byte(";")) {
			t.Fatalf("%q: read %d, unescaped %q (%v, semicolon %v), want %d, %q (%v)", s, n, got, ok, semi, len(value), want, oldBraintreePayloadChars(want))
		}
	}
}

// oldBraintreeXML and oldBraintreeChallenge are the payload checks as verification made them
// before they ran on the stack.
func oldBraintreeXML(payload string) bool {
	head := payload[:min(len(payload), 128)]
	head = strings.ReplaceAll(head, "\n", "")
	if len(head) > 64 {
		head = head[:64]
	}
	head = head[:len(head)/4*4]
	b, err := base64.StdEncoding.DecodeString(head)
	b = bytes.TrimLeft(b, " \t\r\n")
	return err == nil && len(b) > 0 && b[0] == '<'
}

func oldBraintreeChallenge(payload []byte) bool {
	return braintreeChallenge.Match(bytes.TrimSpace(payload))
}

// The payload checks answer as before on payloads of XML and other text, base64-encoded with
// line breaks in various places, on hex strings of all lengths around a challenge's, and on
// random bytes.
func TestBraintreePayloadChecksAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 7))
	texts := []string{"<notification/>", " \n\t<x>", "plain text", "\x00<", "", "<", "  ", braintreeXMLBody}
	hexdigits := "0123456789abcdefABCDEF"
	for range 20000 {
		var p []byte
		switch r.IntN(5) {
		case 4: // a bad character near the 64th base64 character, behind line breaks
			p = []byte(base64.StdEncoding.EncodeToString([]byte(braintreeXMLBody)))
			p[56+r.IntN(12)] = '!'
			for range 1 + r.IntN(3) {
				at := r.IntN(70)
				p = append(p[:at], append([]byte("\n"), p[at:]...)...)
			}
		case 0:
			enc := base64.StdEncoding.EncodeToString([]byte(texts[r.IntN(len(texts))] + strings.Repeat("a", r.IntN(100))))
			for i := 0; i < len(enc); i++ {
				if r.IntN(20) == 0 {
					p = append(p, '\n')
				}
				p = append(p, enc[i])
			}
		case 1:
			for range r.IntN(40) {
				p = append(p, hexdigits[r.IntN(len(hexdigits))])
			}
			if r.IntN(2) == 0 {
				p = append([]byte(" \n"[:r.IntN(3)]), p...)
			}
		case 2:
			for range r.IntN(200) {
				p = append(p, "AZaz09+/=\n\r "[r.IntN(12)])
			}
		default:
			for range r.IntN(200) {
				p = append(p, byte(r.Uint32()))
			}
		}
		if got, want := braintreeXML(p), oldBraintreeXML(string(p[:min(len(p), 128)])); got != want {
			t.Fatalf("%q: XML %v, before %v", p, got, want)
		}
		if got, want := braintreeIsChallenge(p), oldBraintreeChallenge(p); got != want {
			t.Fatalf("%q: challenge %v, before %v", p, got, want)
		}
	}
}

// braintreeAlnumBlocks (SSE2 on amd64) and its Go form agree with the table: a byte of every
// value at every position of the first, second and third block, and random blocks.
func TestBraintreeAlnumBlocksAgreeWithTable(t *testing.T) {
	want := func(s []byte) int {
		n := 0
		for len(s)-n >= 16 {
			for _, c := range s[n : n+16] {
				if !braintreeAlnum[c] {
					return n
				}
			}
			n += 16
		}
		return n
	}
	check := func(s []byte) {
		t.Helper()
		w := want(s)
		if got := braintreeAlnumBlocks(s); got != w {
			t.Fatalf("%q: %d, table %d", s, got, w)
		}
		if got := braintreeAlnumBlocksWords(s); got != w {
			t.Fatalf("%q: words %d, table %d", s, got, w)
		}
	}
	filler := []byte("YWFhPG5vdGlm/09zZAZazaz09/YWFhPG5vdGlm/09zZAZazaz09/")
	for pos := range 48 {
		for c := range 256 {
			s := append([]byte(nil), filler...)
			s[pos] = byte(c)
			check(s)
			check(s[:pos+1])
		}
	}
	r := rand.New(rand.NewPCG(16, 8))
	alphabet := []byte("AZaz09/@[`{.:+=\n%\x00\x7f\x80\xff")
	for range 20000 {
		s := make([]byte, r.IntN(80))
		for i := range s {
			if r.IntN(40) == 0 {
				s[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				s[i] = filler[r.IntN(len(filler))]
			}
		}
		check(s)
	}
}
