package signatures

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// contentfulCanonicalOracle is contentfulScheme.canonical as it was before the scratch buffers
// and the parsed-once URL; the verifier must build the same bytes and errors.
func contentfulCanonicalOracle(s *contentfulScheme, r *Request, signed string) ([]byte, error) {
	pu, _, err := requestURL(r, s.url)
	if err != nil {
		return nil, err
	}
	path := pu.EscapedPath()
	if pu.RawQuery != "" {
		path += "?" + pu.RawQuery
	}
	names := strings.Split(signed, ",")
	if len(names) > maxSignedHeaders {
		return nil, fmt.Errorf("%w: %s lists more than %d headers", ErrMalformed, contentfulSigned, maxSignedHeaders)
	}
	for i := range names {
		names[i] = strings.ToLower(strings.TrimSpace(names[i]))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if !slices.Contains(names, strings.ToLower(contentfulTS)) || !slices.Contains(names, strings.ToLower(contentfulSigned)) {
		return nil, fmt.Errorf("%w: %s must list the timestamp and itself", ErrMalformed, contentfulSigned)
	}
	hs := make([]string, 0, len(names))
	for _, n := range names {
		hs = append(hs, n+":"+strings.TrimSpace(headerValue(r.Header, n)))
	}
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = "POST"
	}
	b := make([]byte, 0, len(path)+256)
	b = append(b, method...)
	b = append(b, '\n')
	b = append(b, path...)
	b = append(b, '\n')
	b = append(b, strings.Join(hs, ";")...)
	return append(b, '\n'), nil
}

func TestContentfulCanonicalMatchesOracle(t *testing.T) {
	pieces := []string{"x-contentful-timestamp", "X-Contentful-Signed-Headers", " content-type ", "", "X-Extra",
		"x-contentful-timestamp", "x-missing", "weird name", "ÄB"}
	rng := rand.New(rand.NewPCG(16, 6))
	lists := []string{"", ",", strings.Repeat(",", 62) + "x-contentful-timestamp,x-contentful-signed-headers",
		strings.Repeat(",", 63) + "x-contentful-timestamp,x-contentful-signed-headers", "x-contentful-signed-headers,x-contentful-timestamp"}
	for range 3000 {
		n := rng.IntN(7)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = pieces[rng.IntN(len(pieces))]
		}
		lists = append(lists, strings.Join(parts, ","))
	}
	header := http.Header{"X-Contentful-Timestamp": {" 1700000000000 "}, "Content-Type": {"application/json"},
		"x-extra": {"lower-case key"}, "Weird name": {"w"}}
	for _, cfgURL := range []string{"https://a.example/hook?x=1", "not a url", ""} {
		s := newContentful(Config{Secrets: []string{"k"}, URL: cfgURL})
		for _, reqURL := range []string{"", cfgURL, "https://b.example/other%2Fpath", "/relative"} {
			for _, method := range []string{"", "post", "PUT"} {
				for _, list := range lists {
					r := &Request{Method: method, URL: reqURL, Header: header}
					want, wantErr := contentfulCanonicalOracle(s, r, list)
					var sc contentfulScratch
					err := s.canonical(r, list, &sc)
					if fmt.Sprint(err) != fmt.Sprint(wantErr) {
						t.Fatalf("%q %q %q: error %v, oracle %v", cfgURL, reqURL, list, err, wantErr)
					}
					if err == nil && !bytes.Equal(sc.buf, want) {
						t.Fatalf("%q %q %q: %q, oracle %q", cfgURL, reqURL, list, sc.buf, want)
					}
				}
			}
		}
	}
}

func FuzzContentfulCanonical(f *testing.F) {
	for _, s := range []string{"x-contentful-timestamp,x-contentful-signed-headers", " X-Contentful-Timestamp ,x-contentful-signed-headers,content-type,,",
		"a,b", ",,,"} {
		f.Add(s, "POST", "https://a.example/p?q=1")
	}
	f.Fuzz(func(t *testing.T, list, method, reqURL string) {
		s := newContentful(Config{Secrets: []string{"k"}, URL: "https://a.example/hook"})
		r := &Request{Method: method, URL: reqURL, Header: http.Header{"X-Contentful-Timestamp": {"1"}, "Content-Type": {"t"}}}
		want, wantErr := contentfulCanonicalOracle(s, r, list)
		var sc contentfulScratch
		err := s.canonical(r, list, &sc)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || (err == nil && !bytes.Equal(sc.buf, want)) {
			t.Fatalf("%q %q %q: %q %v, oracle %q %v", list, method, reqURL, sc.buf, err, want, wantErr)
		}
	})
}
