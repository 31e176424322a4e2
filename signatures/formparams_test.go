package signatures

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// sortedParamsOracle is sortedParams as it was before formParams: url.QueryUnescape per part and
// a sort of string pairs. formParams must give its answers, errors included.
func sortedParamsOracle(body []byte) ([]byte, error) { return paramsOracle(body, false) }

// twilioParamsOracle is sortedParamsOracle with each distinct pair once, as Twilio's SDKs sign.
func twilioParamsOracle(body []byte) ([]byte, error) { return paramsOracle(body, true) }

func paramsOracle(body []byte, distinct bool) ([]byte, error) {
	type pair struct{ k, v string }
	var pairs []pair
	rest := string(body)
	for rest != "" {
		var item string
		item, rest, _ = strings.Cut(rest, "&")
		if item == "" {
			continue
		}
		if strings.IndexByte(item, ';') >= 0 {
			return nil, fmt.Errorf("%w: form body: invalid semicolon separator in query", ErrMalformed)
		}
		k, v, _ := strings.Cut(item, "=")
		var err error
		if k, err = oracleUnescape(k); err != nil {
			return nil, err
		}
		if v, err = oracleUnescape(v); err != nil {
			return nil, err
		}
		pairs = append(pairs, pair{k, v})
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	if distinct {
		pairs = slices.Compact(pairs)
	}
	b := make([]byte, 0, len(body))
	for _, p := range pairs {
		b = append(append(b, p.k...), p.v...)
	}
	return b, nil
}

func oracleUnescape(s string) (string, error) {
	u, err := url.QueryUnescape(s)
	if err != nil {
		return "", fmt.Errorf("%w: form body: %v", ErrMalformed, err)
	}
	return u, nil
}

// checkFormAgainstOracle compares sortedParams, and the bytes formParams hashes, with the oracle.
func checkFormAgainstOracle(t *testing.T, body []byte) {
	t.Helper()
	want, wantErr := sortedParamsOracle(body)
	got, err := sortedParams(body)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("body %q: error %v, oracle %v", body, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("body %q: params %q, oracle %q", body, got, want)
	}
	if wantErr != nil {
		return
	}
	var f formParams
	if err := f.parse(body); err != nil {
		t.Fatal(err)
	}
	rec := &recordHash{}
	f.writeTo(&keyedMAC{h: rec})
	if !bytes.Equal(rec.b, want) {
		t.Fatalf("body %q: hashed %q, oracle %q", body, rec.b, want)
	}
}

// recordHash is a hash.Hash that keeps what was written.
type recordHash struct{ b []byte }

func (h *recordHash) Write(p []byte) (int, error) { h.b = append(h.b, p...); return len(p), nil }
func (h *recordHash) Sum(b []byte) []byte         { return append(b, h.b...) }
func (h *recordHash) Reset()                      { h.b = h.b[:0] }
func (h *recordHash) Size() int                   { return 0 }
func (h *recordHash) BlockSize() int              { return 64 }

func TestFormParamsMatchesOracle(t *testing.T) {
	fixed := []string{"", "&", "&&a=1&&", "a", "a=", "=b", "==", "a=1&a=0&b=2", "b=2&a=1", "a+b=c+d",
		"%41=%42", "%4=1", "a=%", "a=%zz", "a=%4g", "a%=1", "a=1;b=2", "a=%ZZ;", "a=1&b=%", "x=%e2%82%ac",
		"To=%2B15557654321&Body=Hello+world%21", "a=" + strings.Repeat("b", 2000) + "&c=" + strings.Repeat("%41", 400),
		"k=v&k=v&k=", "%00=%ff", "a==b", "a=b=c", "+=+", "%2b=%2B"}
	for _, body := range fixed {
		checkFormAgainstOracle(t, []byte(body))
	}
	rng := rand.New(rand.NewPCG(16, 3))
	for _, b := range randomStrings(rng, "ab=&%+;0fFgz\xff ", 20000, 40) {
		checkFormAgainstOracle(t, []byte(b))
	}
	// Long parts exercise writeTo's direct writes and the gathering around them.
	for range 300 {
		var sb strings.Builder
		for range rng.IntN(12) {
			fmt.Fprintf(&sb, "k%d=%s&", rng.IntN(5), strings.Repeat("v%20", rng.IntN(300))+strings.Repeat("w", rng.IntN(900)))
		}
		checkFormAgainstOracle(t, []byte(sb.String()))
	}
}

func TestFormParamsReuseAllocatesNothing(t *testing.T) {
	body := []byte("To=%2B15557654321&Body=Hello+world%21&From=%2B15551234567&MessageSid=SM1")
	var f formParams
	km := &keyedMAC{h: &recordHash{}}
	allocs := testing.AllocsPerRun(100, func() {
		km.h.Reset()
		if err := f.parse(body); err != nil {
			t.Fatal(err)
		}
		f.writeTo(km)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per reused parse", allocs)
	}
}

func FuzzFormParams(f *testing.F) {
	for _, s := range []string{"a=1&b=2", "To=%2B1&Body=Hi+there", "a=%zz", "a;b", "&&=&", "%41%4"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFormAgainstOracle(t, body)
	})
}

func TestCanonicalKeyMatchesTextproto(t *testing.T) {
	names := []string{"", "a", "x-contentful-timestamp", "X-CONTENTFUL-SIGNED-HEADERS", "content-type", "-a-", "a--b",
		"9a", "a b", "a_b", "ä", strings.Repeat("a", 64), strings.Repeat("a", 65)}
	names = append(names, randomStrings(rand.New(rand.NewPCG(16, 5)), "aZ-9_ .é", 5000, 12)...)
	for _, name := range names {
		want := textproto.CanonicalMIMEHeaderKey(name)
		var buf [maxFastKey]byte
		if key, ok := canonicalKey(&buf, name); ok && string(key) != want {
			t.Fatalf("%q: %q, textproto %q", name, key, want)
		}
		h := http.Header{want: {"v"}}
		if got := headerValue(h, name); got != "v" {
			t.Fatalf("%q: headerValue %q from %v", name, got, h)
		}
	}
}

// randomStrings makes n strings of up to maxLen-1 bytes drawn from alphabet's
// bytes (not runes: a multi-byte letter is split on purpose).
func randomStrings(rng *rand.Rand, alphabet string, n, maxLen int) []string {
	out := make([]string, 0, n)
	for range n {
		b := make([]byte, rng.IntN(maxLen))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		out = append(out, string(b))
	}
	return out
}
