package signatures

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Schemes whose signed string is built from the request around the body: the public URL, a
// nonce, sorted form parameters, a list of signed headers.

// sortedParams returns the form body's parameters as name+value pairs sorted by name (and by
// value within a name), with no separators: the concatenation Twilio, Plivo V3 and Mandrill sign.
// Verifiers hash the pairs from a pooled formParams instead of building this.
func sortedParams(body []byte) ([]byte, error) {
	var f formParams
	if err := f.parse(body); err != nil {
		return nil, err
	}
	return f.appendTo(make([]byte, 0, len(body))), nil
}

func macOf(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func keysOf(secrets []string) [][]byte {
	out := make([][]byte, len(secrets))
	for i, s := range secrets {
		out[i] = []byte(s)
	}
	return out
}

// requestURL is the URL the provider called: the request's, else the configured one.
func requestURL(r *Request, configured string) (*url.URL, string, error) {
	u := r.URL
	if u == "" {
		u = configured
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return nil, "", fmt.Errorf("%w: url: not an absolute URL", ErrConfig)
	}
	return pu, u, nil
}

// plivoScheme follows plivo/plivo-node lib/utils/v3Security.js (validateV3Signature): base64
// HMAC-SHA256 with the auth token, several comma-separated signatures allowed. Header names follow
// Plivo's docs as quoted in the research notes; the SDK takes the values as arguments, so the names
// are unconfirmed there (re-read for #16: a Plivo Java sample built on com.plivo.api reads
// X-Plivo-Signature-V3 and X-Plivo-Signature-V3-Nonce, but its repository could not be named). V2 (lib/utils/security.js) signs only the URL and the nonce, not the
// payload, so a captured V2 signature would authenticate any body: it is not accepted.
type plivoScheme struct {
	keys [][]byte
	url  string
	pu   *url.URL // url parsed once; nil when it does not parse (requestURL then reports it)
	// signedURL is pu's part of the signed string, read once.
	signedURL plivoURL
	macs      []*sync.Pool // keyed HMAC-SHA256s per key
	forms     *sync.Pool   // *formParams
}

func newPlivo(c Config) (*plivoScheme, error) {
	s := &plivoScheme{keys: keysOf(c.Secrets), url: c.URL, forms: newFormPool()}
	s.macs = macPools(sha256.New, s.keys)
	if u, err := url.Parse(c.URL); err == nil && u.Host != "" {
		s.pu, s.signedURL = u, plivoURLOf(u)
	}
	return s, nil
}

const (
	plivoV3      = "X-Plivo-Signature-V3"
	plivoV3Nonce = "X-Plivo-Signature-V3-Nonce"
	plivoV2      = "X-Plivo-Signature-V2"
	plivoV2Nonce = "X-Plivo-Signature-V2-Nonce"
)

// plivoV3Base is the string V3 signs before ".nonce": the URL without query, "?" and the sorted
// query string (name=value joined by &) when there is one, then for a POST with parameters a
// "." after a non-empty query and the sorted parameters as name+value.
func plivoV3Base(method string, u *url.URL, body []byte) (string, error) {
	prefix, params, err := plivoV3Parts(method, u, body)
	return prefix + string(params), err
}

// plivoV3Parts is plivoV3Base as the URL part and the parameters, so the MAC can read both
// without joining them.
func plivoV3Parts(method string, u *url.URL, body []byte) (string, []byte, error) {
	pl := plivoURLOf(u)
	base := pl.base
	if method == "GET" {
		if pl.query != "" {
			base += "?" + pl.query
		}
		return base, nil, nil
	}
	params, err := sortedParams(body)
	if err != nil {
		return "", nil, err
	}
	if pl.query != "" || len(params) > 0 {
		base += "?" + pl.query
	}
	if pl.query != "" && len(params) > 0 {
		base += "."
	}
	return base, params, nil
}

// plivoURL is what V3 signs of the URL: scheme, host and escaped path, and the query's
// parameters sorted by name then value, written name=value and joined by "&".
type plivoURL struct{ base, query string }

func plivoURLOf(u *url.URL) plivoURL {
	q, _ := url.ParseQuery(u.RawQuery)
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var qs []string
	for _, k := range keys {
		vs := q[k]
		slices.Sort(vs)
		for _, v := range vs {
			qs = append(qs, k+"="+v)
		}
	}
	return plivoURL{base: u.Scheme + "://" + u.Host + u.EscapedPath(), query: strings.Join(qs, "&")}
}

// writeSigned writes the string V3 signs into km's hash: plivoV3Base's string, "." and the
// nonce; f holds the parsed body unless the method is GET.
func (pl plivoURL) writeSigned(km *keyedMAC, method string, f *formParams, nonce string) {
	b := append(km.scratch[:0], pl.base...)
	params := false
	if method != "GET" {
		for _, p := range f.pairs {
			if len(p.k) > 0 || len(p.v) > 0 {
				params = true
				break
			}
		}
	}
	if pl.query != "" || params {
		b = append(append(b, '?'), pl.query...)
	}
	if pl.query != "" && params {
		b = append(b, '.')
	}
	km.h.Write(b)
	km.scratch = b
	if params {
		f.writeTo(km)
	}
	km.scratch = append(append(km.scratch[:0], '.'), nonce...)
	km.h.Write(km.scratch)
}

func (s *plivoScheme) Verify(r *Request, _ time.Time) error {
	pu, signedURL := s.pu, s.signedURL
	if pu == nil || (r.URL != "" && r.URL != s.url) {
		var err error
		if pu, _, err = requestURL(r, s.url); err != nil {
			return err
		}
		signedURL = plivoURLOf(pu)
	}
	sigName := plivoV3
	raw, err := requireHeader(r.Header, sigName)
	if err != nil {
		return err
	}
	nonce, err := requireHeader(r.Header, plivoV3Nonce)
	if err != nil {
		return err
	}
	method := r.Method
	if method == "" {
		method = "POST"
	}
	f := s.forms.Get().(*formParams)
	defer s.forms.Put(f)
	if method != "GET" {
		if err := f.parse(r.Body); err != nil {
			return err
		}
	}
	var sigs [maxCandidates][sha256.Size]byte
	n := 0
	for rest := raw; rest != "" && n < maxCandidates; {
		var item string
		item, rest, _ = strings.Cut(rest, ",")
		if l, ok := decodeSig(sigs[n][:], strings.TrimSpace(item), true); ok && l == sha256.Size {
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrMalformed, sigName)
	}
	for k := range s.keys {
		km := s.macs[k].Get().(*keyedMAC)
		km.h.Reset()
		signedURL.writeSigned(km, method, f, nonce)
		got := km.sumBytes()
		ok := false
		for i := range n {
			ok = ok || hmac.Equal(got, sigs[i][:])
		}
		s.macs[k].Put(km)
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, sigName)
}

// Sign writes a V3 signature with a fresh nonce.
func (s *plivoScheme) Sign(r *Request, _ time.Time) error {
	pu, _, err := requestURL(r, s.url)
	if err != nil {
		return err
	}
	method := r.Method
	if method == "" {
		method = "POST"
	}
	base, err := plivoV3Base(method, pu, r.Body)
	if err != nil {
		return err
	}
	nonce := randomID()
	setHeader(r, plivoV3Nonce, nonce)
	setHeader(r, plivoV3, base64.StdEncoding.EncodeToString(macOf(sha256.New, s.keys[0], []byte(base+"."+nonce))))
	return nil
}

// mandrillScheme: base64 HMAC-SHA1 with the webhook key over the webhook URL exactly as
// registered followed by the POST parameters sorted by name, name then value. Follows
// Mailchimp Transactional's "Authenticating webhook requests" recipe as quoted in the research notes
// (secondary source). Mailchimp's transactional SDKs (mailchimp-transactional-*) only call the
// API: no official verifier was found in the search index (#16).
type mandrillScheme struct {
	keys  [][]byte
	url   string
	macs  []*sync.Pool // keyed HMAC-SHA1s per key
	forms *sync.Pool   // *formParams
}

func newMandrill(c Config) *mandrillScheme {
	s := &mandrillScheme{keys: keysOf(c.Secrets), url: c.URL, forms: newFormPool()}
	s.macs = macPools(sha1.New, s.keys)
	return s
}

const mandrillHeader = "X-Mandrill-Signature"

// content returns the two parts Mandrill signs: the URL and the sorted parameters.
func (s *mandrillScheme) content(r *Request) ([]byte, []byte, error) {
	params, err := sortedParams(r.Body)
	if err != nil {
		return nil, nil, err
	}
	return []byte(s.signedURL(r)), params, nil
}

// signedURL is the webhook URL as registered, else the request's.
func (s *mandrillScheme) signedURL(r *Request) string {
	if s.url == "" {
		return r.URL
	}
	return s.url
}

func (s *mandrillScheme) Verify(r *Request, _ time.Time) error {
	raw, err := requireHeader(r.Header, mandrillHeader)
	if err != nil {
		return err
	}
	var sig [sha1.Size]byte
	if l, ok := decodeSig(sig[:], strings.TrimSpace(raw), true); !ok || l != sha1.Size {
		return fmt.Errorf("%w: %s", ErrMalformed, mandrillHeader)
	}
	f := s.forms.Get().(*formParams)
	defer s.forms.Put(f)
	if err := f.parse(r.Body); err != nil {
		return err
	}
	u := s.signedURL(r)
	for k := range s.keys {
		km := s.macs[k].Get().(*keyedMAC)
		km.h.Reset()
		km.writeString(u)
		f.writeTo(km)
		ok := hmac.Equal(km.sumBytes(), sig[:])
		s.macs[k].Put(km)
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, mandrillHeader)
}

func (s *mandrillScheme) Sign(r *Request, _ time.Time) error {
	u, params, err := s.content(r)
	if err != nil {
		return err
	}
	setHeader(r, mandrillHeader, base64.StdEncoding.EncodeToString(macOf(sha1.New, s.keys[0], u, params)))
	return nil
}

// trelloScheme: base64 HMAC-SHA1 with the app secret over the body followed by the callback URL
// given when the webhook was created (Config.URL). The recipe follows Hookdeck's trello-webhooks
// skill and Trello's guide as quoted in the research notes. Trello has no official server SDK; none
// was found in the search index (#16).
type trelloScheme struct {
	keys [][]byte
	url  string
}

const trelloHeader = "X-Trello-Webhook"

func (s *trelloScheme) Verify(r *Request, _ time.Time) error {
	raw, err := requireHeader(r.Header, trelloHeader)
	if err != nil {
		return err
	}
	var sig [sha1.Size]byte
	if l, ok := decodeSig(sig[:], strings.TrimSpace(raw), true); !ok || l != sha1.Size {
		return fmt.Errorf("%w: %s", ErrMalformed, trelloHeader)
	}
	for _, k := range s.keys {
		if hmac.Equal(macOf(sha1.New, k, r.Body, []byte(s.url)), sig[:]) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, trelloHeader)
}

func (s *trelloScheme) Sign(r *Request, _ time.Time) error {
	setHeader(r, trelloHeader, base64.StdEncoding.EncodeToString(macOf(sha1.New, s.keys[0], r.Body, []byte(s.url))))
	return nil
}

// contentfulScheme follows contentful/node-apps-toolkit src/requests/sign-request.ts and
// verify-request.ts: hex HMAC-SHA256 over METHOD, path, the signed headers and the body joined by
// "\n", the headers being exactly those listed in x-contentful-signed-headers, lower-cased,
// sorted, written name:value and joined by ";". The list must include the timestamp and the list
// itself. The path is the request's escaped path and raw query; the toolkit re-encodes it with
// JavaScript's encodeURI, which leaves an already-escaped path unchanged. The timestamp is in
// ms; the toolkit rejects only too-old requests (30 s by default), we reject both directions.
type contentfulScheme struct {
	keys [][]byte
	url  string
	tol  time.Duration
	// path is the configured URL's signed path, read once; ok is false when it does not parse
	// (requestURL then reports it).
	path    string
	pathOK  bool
	macs    []*sync.Pool // keyed HMAC-SHA256s per key
	scratch *sync.Pool   // *contentfulScratch
}

// contentfulScratch holds one verification's signed-header names and canonical request.
type contentfulScratch struct {
	names []string
	buf   []byte
}

func newContentful(c Config) *contentfulScheme {
	s := &contentfulScheme{keys: keysOf(c.Secrets), url: c.URL, tol: tolerance(c, contentfulDefault),
		scratch: &sync.Pool{New: func() any { return new(contentfulScratch) }}}
	s.macs = macPools(sha256.New, s.keys)
	if pu, err := url.Parse(c.URL); err == nil && pu.Host != "" {
		s.path, s.pathOK = contentfulPath(pu), true
	}
	return s
}

func contentfulPath(pu *url.URL) string {
	path := pu.EscapedPath()
	if pu.RawQuery != "" {
		path += "?" + pu.RawQuery
	}
	return path
}

const (
	contentfulSig     = "X-Contentful-Signature"
	contentfulSigned  = "X-Contentful-Signed-Headers"
	contentfulTS      = "X-Contentful-Timestamp"
	contentfulDefault = 30 * time.Second
	maxSignedHeaders  = 64
	// the names as canonical compares them
	contentfulTSLower     = "x-contentful-timestamp"
	contentfulSignedLower = "x-contentful-signed-headers"
)

// canonical appends to sc.buf the canonical request up to the body, which the MAC reads in
// place.
func (s *contentfulScheme) canonical(r *Request, signed string, sc *contentfulScratch) error {
	path := s.path
	if !s.pathOK || (r.URL != "" && r.URL != s.url) {
		pu, _, err := requestURL(r, s.url)
		if err != nil {
			return err
		}
		path = contentfulPath(pu)
	}
	if strings.Count(signed, ",") >= maxSignedHeaders {
		return fmt.Errorf("%w: %s lists more than %d headers", ErrMalformed, contentfulSigned, maxSignedHeaders)
	}
	names := sc.names[:0]
	for rest := signed; ; {
		name, tail, more := strings.Cut(rest, ",")
		names = append(names, strings.ToLower(strings.TrimSpace(name)))
		if !more {
			break
		}
		rest = tail
	}
	slices.Sort(names)
	names = slices.Compact(names)
	sc.names = names
	if !slices.Contains(names, contentfulTSLower) || !slices.Contains(names, contentfulSignedLower) {
		return fmt.Errorf("%w: %s must list the timestamp and itself", ErrMalformed, contentfulSigned)
	}
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = "POST"
	}
	b := append(sc.buf[:0], method...)
	b = append(b, '\n')
	b = append(b, path...)
	b = append(b, '\n')
	for i, n := range names {
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, n...)
		b = append(b, ':')
		b = append(b, strings.TrimSpace(headerValue(r.Header, n))...)
	}
	sc.buf = append(b, '\n')
	return nil
}

// macMatches says whether the MAC under keys[k] of the canonical request and the body is sig.
func (s *contentfulScheme) macMatches(k int, canonical, body, sig []byte) bool {
	km := s.macs[k].Get().(*keyedMAC)
	defer s.macs[k].Put(km)
	km.h.Reset()
	km.h.Write(canonical)
	km.h.Write(body)
	return hmac.Equal(km.sumBytes(), sig)
}

func (s *contentfulScheme) Verify(r *Request, now time.Time) error {
	raw, err := requireHeader(r.Header, contentfulSig)
	if err != nil {
		return err
	}
	signed, err := requireHeader(r.Header, contentfulSigned)
	if err != nil {
		return err
	}
	ts, err := requireHeader(r.Header, contentfulTS)
	if err != nil {
		return err
	}
	var sig [sha256.Size]byte
	if l, ok := decodeSig(sig[:], strings.TrimSpace(raw), false); !ok || l != sha256.Size {
		return fmt.Errorf("%w: %s", ErrMalformed, contentfulSig)
	}
	if err := freshTimestamp(ts, tsMillis, now, s.tol, contentfulTS); err != nil {
		return err
	}
	sc := s.scratch.Get().(*contentfulScratch)
	defer func() {
		clear(sc.names) // the pool should not keep a request's header names alive
		s.scratch.Put(sc)
	}()
	if err := s.canonical(r, signed, sc); err != nil {
		return err
	}
	for k := range s.keys {
		if s.macMatches(k, sc.buf, r.Body, sig[:]) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, contentfulSig)
}

// Sign signs the timestamp, the signed-headers list and Content-Type when present.
func (s *contentfulScheme) Sign(r *Request, now time.Time) error {
	setHeader(r, contentfulTS, formatTime(now, tsMillis))
	list := "x-contentful-signed-headers,x-contentful-timestamp"
	if headerValue(r.Header, "Content-Type") != "" {
		list = "content-type," + list
	}
	setHeader(r, contentfulSigned, list)
	var sc contentfulScratch
	if err := s.canonical(r, list, &sc); err != nil {
		return err
	}
	setHeader(r, contentfulSig, hex.EncodeToString(macOf(sha256.New, s.keys[0], sc.buf, r.Body)))
	return nil
}
