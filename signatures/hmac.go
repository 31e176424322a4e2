package signatures

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// The body-HMAC providers differ only in data: which hash, which header, how the header lists its
// signatures, where the timestamp and id come from and what bytes are signed. hmacDef is that data;
// hmacScheme is the one verifier and signer for all of them.

type segKind uint8

const (
	segLit segKind = iota
	segBody
	segTS
	segID
	segURL
	segMethod
)

type seg struct {
	kind segKind
	lit  string
}

// Template building blocks for the provider table.
var (
	sBody   = seg{kind: segBody}
	sTS     = seg{kind: segTS}
	sID     = seg{kind: segID}
	sURL    = seg{kind: segURL}
	sMethod = seg{kind: segMethod}
)

func bodyOnlySeg() []seg { return []seg{sBody} }

func lit(s string) seg { return seg{kind: segLit, lit: s} }

type sigFormat uint8

const (
	fmtSingle  sigFormat = iota // the whole value, after the prefix
	fmtList                     // values separated by sep, each after the prefix
	fmtKV                       // key=value pairs separated by sep (Stripe, Paddle, Calendly)
	fmtTSFirst                  // the timestamp, then signatures, separated by sep (Recurly)
)

// keyForm says how a configured secret becomes the HMAC key.
type keyForm uint8

const (
	keyRaw        keyForm = iota // the secret's UTF-8 bytes
	keyHex                       // hex-decoded (Onfleet)
	keyBase64                    // standard base64-decoded (Airtable, Microsoft Teams)
	keyWhsec                     // base64 after an optional whsec_ prefix (Standard Webhooks)
	keyWhsecOrRaw                // whsec_ → base64-decoded, anything else → its UTF-8 bytes (OpenAI)
	// keyRawThenBase64: the secret's UTF-8 bytes, and also its base64 decoding (after an
	// optional whsec_) when it has one (Polar).
	keyRawThenBase64
)

// sigEnc is how the signature is written in the header.
type sigEnc uint8

const (
	encHex    sigEnc = iota
	encBase64        // standard base64 with padding
	encB64URL        // base64url without padding (Sanity); padding is tolerated
)

type hmacDef struct {
	hash    func() hash.Hash
	b64     bool   // shorthand for enc: encBase64
	enc     sigEnc // encHex unless b64 is set
	key     keyForm
	headers []string // signature headers; the first one present is used, the first is signed
	// allHeaders: every listed header present contributes candidates (Box sends a primary and a
	// secondary signature); the signer writes headers[i] with secret i.
	allHeaders bool
	// numbered: headers[0] is a prefix and every header prefix+N (N = 1, 2, ...) holds one
	// signature, one per active key (DocuSign's X-DocuSign-Signature-1..N).
	numbered bool
	// fixed headers must be present with exactly these values (Box's version and algorithm).
	fixed  [][2]string
	prefix string
	format sigFormat
	sep    byte
	tsKey  string // fmtKV: key holding the timestamp
	sigKey string // fmtKV: key holding a signature

	tsHeader string // header holding the timestamp
	tsJSON   string // or a gjson path into the (signed) body
	tsFormat tsFormat
	idHeader string
	content  []seg
	// tolerance is the default; 0 means the scheme has no timestamp check.
	tolerance time.Duration
	// urlForm rewrites the public URL before signing (HubSpot decodes some escapes).
	urlForm func(string) string
	// challengeBody, when set, reports a body that the provider's own handshake would sign on
	// request (X's CRC answers are MACs of the token under the same key): such a body is refused
	// whatever its signature, or the handshake would be a signing oracle for it.
	challengeBody func([]byte) bool
	// bodyForm, when set, gives a second form of the body that the provider may have signed
	// instead (Box: its JSON with non-ASCII and "/" escaped); verification tries it when the
	// body as received does not match.
	bodyForm func([]byte) []byte
}

type hmacScheme struct {
	d    *hmacDef
	keys [][]byte
	// macs[i] holds keyed HMACs under keys[i]: a reset HMAC restarts from its keyed state, where
	// a new one hashes the key's pads again (a third of verifying a 1 KiB body).
	macs []*sync.Pool
	// alt[i], when not nil, holds HMACs under a second key derived from secret i
	// (keyRawThenBase64).
	alt     []*sync.Pool
	tol     time.Duration
	url     string
	urlForm string // url after d.urlForm, computed once
}

func newHMAC(d *hmacDef, cfg Config) (*hmacScheme, error) {
	s := &hmacScheme{d: d, url: cfg.URL, urlForm: cfg.URL}
	if d.urlForm != nil {
		s.urlForm = d.urlForm(cfg.URL)
	}
	for i, sec := range cfg.Secrets {
		k, err := deriveKey(d.key, sec)
		if err != nil {
			return nil, fmt.Errorf("%w: secrets[%d]: %v", ErrConfig, i, err)
		}
		s.keys = append(s.keys, k)
		s.macs = append(s.macs, macPool(d.hash, k))
		var alt *sync.Pool
		if d.key == keyRawThenBase64 {
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sec, "whsec_"))
			if err == nil && len(b) > 0 && !bytes.Equal(b, k) {
				alt = macPool(d.hash, b)
			}
		}
		s.alt = append(s.alt, alt)
	}
	switch {
	case d.tolerance > 0:
		s.tol = tolerance(cfg, d.tolerance)
	case d.hasTimestamp():
		// A signed timestamp the provider's own library does not check (Sanity): checked only
		// when the source sets a tolerance.
		s.tol = cfg.Tolerance
	}
	return s, nil
}

func macPool(h func() hash.Hash, k []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return &keyedMAC{h: hmac.New(h, k)} }}
}

func deriveKey(f keyForm, sec string) ([]byte, error) {
	switch f {
	case keyHex:
		b, err := hex.DecodeString(strings.TrimSpace(sec))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("want a hex-encoded key")
		}
		return b, nil
	case keyBase64:
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sec))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("want a base64-encoded key")
		}
		return b, nil
	case keyWhsec, keyWhsecOrRaw:
		rest, prefixed := strings.CutPrefix(sec, "whsec_")
		if f == keyWhsecOrRaw && !prefixed {
			return []byte(sec), nil
		}
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("not a whsec_ base64 secret")
		}
		return b, nil
	}
	return []byte(sec), nil
}

func (d *hmacDef) hasTimestamp() bool {
	return d.tsHeader != "" || d.tsJSON != "" || d.format == fmtKV || d.format == fmtTSFirst
}

func (d *hmacDef) encoding() sigEnc {
	if d.b64 {
		return encBase64
	}
	return d.enc
}

func (d *hmacDef) encode(sum []byte) string {
	switch d.encoding() {
	case encBase64:
		return base64.StdEncoding.EncodeToString(sum)
	case encB64URL:
		return base64.RawURLEncoding.EncodeToString(sum)
	}
	return hex.EncodeToString(sum)
}

func (d *hmacDef) decode(dst []byte, s string) (int, bool) {
	switch d.encoding() {
	case encBase64:
		return decodeSig(dst, s, true)
	case encB64URL:
		s = strings.TrimRight(s, "=")
		if base64.RawURLEncoding.DecodedLen(len(s)) > len(dst) {
			return 0, false
		}
		l, err := base64.RawURLEncoding.Decode(dst, []byte(s))
		return l, err == nil
	}
	return decodeSig(dst, s, false)
}

// rawHeaders collects the signature header values the scheme reads, returning how many and the
// name of the first (for errors).
func (d *hmacDef) rawHeaders(h http.Header, out *[maxCandidates]string) (int, string) {
	switch {
	case d.numbered:
		n := 0
		for i := 1; i <= maxCandidates; i++ {
			v := headerValue(h, d.headers[0]+strconv.Itoa(i))
			if v == "" {
				break
			}
			out[n] = v
			n++
		}
		return n, d.headers[0] + "1"
	case d.allHeaders:
		n, name := 0, ""
		for _, hn := range d.headers {
			if v := headerValue(h, hn); v != "" && n < maxCandidates {
				if name == "" {
					name = hn
				}
				out[n] = v
				n++
			}
		}
		return n, name
	}
	for _, hn := range d.headers {
		if v := headerValue(h, hn); v != "" {
			out[0] = v
			return 1, hn
		}
	}
	return 0, ""
}

func (s *hmacScheme) Verify(r *Request, now time.Time) error {
	_, err := s.match(r, now)
	return err
}

// match verifies r and returns the index of the secret that matched (Zoom's handshake needs it).
func (s *hmacScheme) match(r *Request, now time.Time) (int, error) {
	d := s.d
	var raws [maxCandidates]string
	nraw, name := d.rawHeaders(r.Header, &raws)
	if nraw == 0 {
		first := d.headers[0]
		if d.numbered {
			first += "1"
		}
		return -1, fmt.Errorf("%w: %s", ErrMissingHeader, first)
	}
	for _, f := range d.fixed {
		v, err := requireHeader(r.Header, f[0])
		if err != nil {
			return -1, err
		}
		if v != f[1] {
			return -1, fmt.Errorf("%w: %s is %q, want %q", ErrMalformed, f[0], v, f[1])
		}
	}
	if d.challengeBody != nil && d.challengeBody(r.Body) {
		return -1, fmt.Errorf("%w: body has the form of a handshake challenge, which is never an event", ErrMalformed)
	}
	var cands [maxCandidates]string
	n, ts := 0, ""
	for i := 0; i < nraw && n < maxCandidates; i++ {
		if len(raws[i]) > maxHeaderLen {
			return -1, fmt.Errorf("%w: %s is longer than %d bytes", ErrMalformed, name, maxHeaderLen)
		}
		if nraw == 1 { // the common case: parse in place
			pn, pts, err := d.parse(raws[0], &cands)
			if err != nil {
				return -1, fmt.Errorf("%w: %s: %s", ErrMalformed, name, err)
			}
			n, ts = pn, pts
			break
		}
		var part [maxCandidates]string
		pn, pts, err := d.parse(raws[i], &part)
		if err != nil {
			return -1, fmt.Errorf("%w: %s: %s", ErrMalformed, name, err)
		}
		if ts == "" {
			ts = pts
		}
		n += copy(cands[n:], part[:pn])
	}
	var sigs [maxCandidates][sha512.Size]byte
	var lens [maxCandidates]int
	decoded := 0
	for i := 0; i < n; i++ {
		if l, ok := d.decode(sigs[decoded][:], cands[i]); ok {
			lens[decoded] = l
			decoded++
		}
	}
	if decoded == 0 {
		return -1, fmt.Errorf("%w: %s: no decodable signature", ErrMalformed, name)
	}

	var err error
	if d.tsHeader != "" {
		if ts, err = requireHeader(r.Header, d.tsHeader); err != nil {
			return -1, err
		}
	} else if d.tsJSON != "" {
		v := gjson.GetBytes(r.Body, d.tsJSON)
		if !v.Exists() {
			return -1, fmt.Errorf("%w: body field %s", ErrMissingHeader, d.tsJSON)
		}
		ts = v.Raw
	} else if d.format == fmtKV && ts == "" {
		return -1, fmt.Errorf("%w: %s has no %s= timestamp", ErrMissingHeader, name, d.tsKey)
	} else if d.format == fmtTSFirst && ts == "" {
		return -1, fmt.Errorf("%w: %s has no timestamp", ErrMissingHeader, name)
	}
	if s.tol > 0 {
		if err := freshTimestamp(ts, d.tsFormat, now, s.tol, s.tsName()); err != nil {
			return -1, err
		}
	}
	id := ""
	if d.idHeader != "" {
		if id, err = requireHeader(r.Header, d.idHeader); err != nil {
			return -1, err
		}
	}
	u, err := s.publicURL(r)
	if err != nil {
		return -1, err
	}

	try := func(r *Request) int {
		var sum [sha512.Size]byte
		for k := range s.keys {
			for _, pool := range [2]*sync.Pool{s.macs[k], s.alt[k]} {
				if pool == nil {
					continue
				}
				got := s.mac(pool, r, ts, id, u, sum[:0])
				for i := 0; i < decoded; i++ {
					if hmac.Equal(got, sigs[i][:lens[i]]) {
						return k
					}
				}
			}
		}
		return -1
	}
	if k := try(r); k >= 0 {
		return k, nil
	}
	if d.bodyForm != nil {
		if b := d.bodyForm(r.Body); !bytes.Equal(b, r.Body) {
			alt := *r
			alt.Body = b
			if k := try(&alt); k >= 0 {
				return k, nil
			}
		}
	}
	return -1, fmt.Errorf("%w: %s", ErrNoMatch, name)
}

func (s *hmacScheme) tsName() string {
	switch {
	case s.d.tsHeader != "":
		return s.d.tsHeader
	case s.d.tsJSON != "":
		return "body field " + s.d.tsJSON
	}
	return s.d.headers[0] + " " + s.d.tsKey
}

func (s *hmacScheme) publicURL(r *Request) (string, error) {
	if !s.d.usesURL() {
		return "", nil
	}
	u := r.URL
	if u == "" || u == s.url {
		u = s.urlForm
	} else if s.d.urlForm != nil {
		u = s.d.urlForm(u)
	}
	if u == "" {
		return "", fmt.Errorf("%w: url: required, this scheme signs the public URL", ErrConfig)
	}
	return u, nil
}

func (d *hmacDef) usesURL() bool {
	for _, p := range d.content {
		if p.kind == segURL {
			return true
		}
	}
	return false
}

// keyedMAC is an HMAC under one key and the buffer the short signed parts are copied into
// (writing a string to a hash.Hash would allocate a copy per part).
type keyedMAC struct {
	h       hash.Hash
	scratch []byte
	// sum receives the MAC, which is then copied to the caller: handing the caller's buffer to
	// hash.Hash.Sum would move it to the heap.
	sum [sha512.Size]byte
}

// mac appends the scheme's MAC with an HMAC from pool to dst, streaming the body into the hash
// without copying it.
func (s *hmacScheme) mac(pool *sync.Pool, r *Request, ts, id, u string, dst []byte) []byte {
	km := pool.Get().(*keyedMAC)
	defer pool.Put(km)
	m := km.h
	m.Reset()
	for _, p := range s.d.content {
		v := ""
		switch p.kind {
		case segBody:
			m.Write(r.Body)
			continue
		case segLit:
			v = p.lit
		case segTS:
			v = ts
		case segID:
			v = id
		case segURL:
			v = u
		case segMethod:
			if v = r.Method; v == "" {
				v = "POST"
			}
		}
		km.scratch = append(km.scratch[:0], v...)
		m.Write(km.scratch)
	}
	return append(dst, m.Sum(km.sum[:0])...)
}

// parse splits a signature header into candidates (at most maxCandidates) and, for key=value
// formats, the timestamp.
func (d *hmacDef) parse(raw string, out *[maxCandidates]string) (n int, ts string, err error) {
	switch d.format {
	case fmtSingle:
		v, ok := strings.CutPrefix(strings.TrimSpace(raw), d.prefix)
		if !ok {
			return 0, "", fmt.Errorf("missing %q prefix", d.prefix)
		}
		out[0] = v
		return 1, "", nil
	case fmtList:
		rest := raw
		for rest != "" && n < maxCandidates {
			var item string
			item, rest, _ = strings.Cut(rest, string(d.sep))
			if v, ok := strings.CutPrefix(strings.TrimSpace(item), d.prefix); ok && v != "" {
				out[n] = v
				n++
			}
		}
		if n == 0 {
			return 0, "", fmt.Errorf("no %q signature", d.prefix)
		}
		return n, "", nil
	case fmtTSFirst:
		ts, rest, _ := strings.Cut(raw, string(d.sep))
		for rest != "" && n < maxCandidates {
			var item string
			item, rest, _ = strings.Cut(rest, string(d.sep))
			if v := strings.TrimSpace(item); v != "" {
				out[n] = v
				n++
			}
		}
		if n == 0 {
			return 0, "", fmt.Errorf("no signature after the timestamp")
		}
		return n, strings.TrimSpace(ts), nil
	}
	rest, pairs := raw, 0
	for rest != "" && pairs < 2*maxCandidates {
		var item string
		item, rest, _ = strings.Cut(rest, string(d.sep))
		pairs++
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			continue
		}
		switch {
		case k == d.tsKey && ts == "":
			ts = v
		case k == d.sigKey && n < maxCandidates && v != "":
			out[n] = v
			n++
		}
	}
	if n == 0 {
		return 0, ts, fmt.Errorf("no %s= signature", d.sigKey)
	}
	return n, ts, nil
}

func decodeSig(dst []byte, s string, b64 bool) (int, bool) {
	if b64 {
		if base64.StdEncoding.DecodedLen(len(s)) > len(dst)+2 {
			return 0, false
		}
		var tmp [sha512.Size + 3]byte
		l, err := base64.StdEncoding.Decode(tmp[:], []byte(s))
		if err != nil || l > len(dst) {
			return 0, false
		}
		return copy(dst, tmp[:l]), true
	}
	if len(s) > 2*len(dst) {
		return 0, false
	}
	l, err := hex.Decode(dst, []byte(s))
	return l, err == nil
}

func (s *hmacScheme) Sign(r *Request, now time.Time) error {
	d := s.d
	ts := ""
	if d.tsHeader != "" || d.format == fmtKV || d.format == fmtTSFirst {
		ts = formatTime(now, d.tsFormat)
		if d.tsHeader != "" {
			setHeader(r, d.tsHeader, ts)
		}
	} else if d.tsJSON != "" {
		r.Body = withBodyTimestamp(r.Body, d.tsJSON, formatTime(now, d.tsFormat))
		ts = gjson.GetBytes(r.Body, d.tsJSON).Raw
	}
	id := ""
	if d.idHeader != "" {
		if id = headerValue(r.Header, d.idHeader); id == "" {
			id = randomID()
			setHeader(r, d.idHeader, id)
		}
	}
	u, err := s.publicURL(r)
	if err != nil {
		return err
	}
	for _, f := range d.fixed {
		setHeader(r, f[0], f[1])
	}
	value := func(k int) string {
		enc := d.encode(s.mac(s.macs[k], r, ts, id, u, nil))
		switch d.format {
		case fmtKV:
			return d.tsKey + "=" + ts + string(d.sep) + d.sigKey + "=" + enc
		case fmtTSFirst:
			return ts + string(d.sep) + enc
		}
		return d.prefix + enc
	}
	switch {
	case d.numbered:
		for i := range s.keys {
			setHeader(r, d.headers[0]+strconv.Itoa(i+1), value(i))
		}
	case d.allHeaders:
		for i := range s.keys {
			if i < len(d.headers) {
				setHeader(r, d.headers[i], value(i))
			}
		}
	default:
		setHeader(r, d.headers[0], value(0))
	}
	return nil
}

// newGenericHMAC builds the configurable "hmac" scheme.
func newGenericHMAC(cfg Config) (*hmacScheme, error) {
	c := cfg.HMAC
	if c == nil {
		return nil, fmt.Errorf("%w: hmac: settings are required for the generic provider", ErrConfig)
	}
	if c.Header == "" {
		return nil, fmt.Errorf("%w: hmac.header is required", ErrConfig)
	}
	d := &hmacDef{headers: []string{textproto.CanonicalMIMEHeaderKey(c.Header)}, prefix: c.Prefix}
	switch strings.ToLower(c.Algorithm) {
	case "sha1":
		d.hash = sha1.New
	case "sha256", "":
		d.hash = sha256.New
	case "sha512":
		d.hash = sha512.New
	default:
		return nil, fmt.Errorf("%w: hmac.algorithm %q: want sha1, sha256 or sha512", ErrConfig, c.Algorithm)
	}
	switch strings.ToLower(c.Encoding) {
	case "hex", "":
	case "base64":
		d.b64 = true
	default:
		return nil, fmt.Errorf("%w: hmac.encoding %q: want hex or base64", ErrConfig, c.Encoding)
	}
	if len(c.Separator) > 1 {
		return nil, fmt.Errorf("%w: hmac.separator must be one character", ErrConfig)
	}
	if c.Separator != "" {
		d.format, d.sep = fmtList, c.Separator[0]
	}
	tmpl := c.Template
	if tmpl == "" {
		tmpl = "{body}"
	}
	var err error
	if d.content, err = parseTemplate(tmpl); err != nil {
		return nil, err
	}
	has := map[segKind]bool{}
	for _, p := range d.content {
		has[p.kind] = true
	}
	if !has[segBody] {
		return nil, fmt.Errorf("%w: hmac.template must contain {body}", ErrConfig)
	}
	if has[segID] {
		if c.IDHeader == "" {
			return nil, fmt.Errorf("%w: hmac.id_header is required by {id}", ErrConfig)
		}
		d.idHeader = textproto.CanonicalMIMEHeaderKey(c.IDHeader)
	}
	if has[segTS] && c.TimestampHeader == "" {
		return nil, fmt.Errorf("%w: hmac.timestamp_header is required by {timestamp}", ErrConfig)
	}
	if c.TimestampHeader != "" && !has[segTS] {
		// An unsigned timestamp proves nothing: anyone replaying a request sets a fresh one.
		return nil, fmt.Errorf("%w: hmac.timestamp_header is set but hmac.template does not sign {timestamp}: add it to the template, or drop timestamp_header", ErrConfig)
	}
	if c.TimestampHeader != "" {
		d.tsHeader = textproto.CanonicalMIMEHeaderKey(c.TimestampHeader)
		d.tsFormat = tsAuto
		d.tolerance = 300 * time.Second
		if c.Tolerance > 0 {
			d.tolerance = c.Tolerance
			cfg.Tolerance = 0
		}
	}
	if has[segURL] && cfg.URL == "" {
		return nil, fmt.Errorf("%w: url: required by {url}", ErrConfig)
	}
	if c.Tolerance < 0 {
		return nil, fmt.Errorf("%w: hmac.tolerance must not be negative", ErrConfig)
	}
	return newHMAC(d, cfg)
}

func parseTemplate(t string) ([]seg, error) {
	var out []seg
	for t != "" {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			out = append(out, lit(t))
			break
		}
		if i > 0 {
			out = append(out, lit(t[:i]))
		}
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%w: hmac.template: unclosed {", ErrConfig)
		}
		switch name := t[i+1 : i+j]; name {
		case "body":
			out = append(out, sBody)
		case "timestamp":
			out = append(out, sTS)
		case "id":
			out = append(out, sID)
		case "url":
			out = append(out, sURL)
		case "method":
			out = append(out, sMethod)
		default:
			return nil, fmt.Errorf("%w: hmac.template: unknown placeholder {%s}", ErrConfig, name)
		}
		t = t[i+j+1:]
	}
	return out, nil
}

// withBodyTimestamp adds the signing time as the top-level field the scheme
// reads its timestamp from (Linear's webhookTimestamp), in front of a JSON
// object's other members, when the body does not have it: a test event
// without it could never verify. A body that has it, or is no object, is
// signed as it is.
func withBodyTimestamp(body []byte, field, ts string) []byte {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || strings.ContainsAny(field, ".*?|#@\\") || gjson.GetBytes(body, field).Exists() || !gjson.ValidBytes(body) {
		return body
	}
	if !allDigits(ts) {
		ts = strconv.Quote(ts)
	}
	rest := bytes.TrimLeft(trimmed[1:], " \t\r\n")
	out := []byte(`{"` + field + `":` + ts)
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}
