package signatures

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/textproto"
	"strings"
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
	fmtSingle sigFormat = iota // the whole value, after the prefix
	fmtList                    // values separated by sep, each after the prefix
	fmtKV                      // key=value pairs separated by sep (Stripe, Paddle, Calendly)
)

type hmacDef struct {
	hash    func() hash.Hash
	b64     bool
	headers []string // signature headers; the first one present is used, the first is signed
	prefix  string
	format  sigFormat
	sep     byte
	tsKey   string // fmtKV: key holding the timestamp
	sigKey  string // fmtKV: key holding a signature

	tsHeader string // header holding the timestamp
	tsJSON   string // or a gjson path into the (signed) body
	tsFormat tsFormat
	idHeader string
	content  []seg
	// tolerance is the default; 0 means the scheme has no timestamp check.
	tolerance time.Duration
	// urlForm rewrites the public URL before signing (HubSpot decodes some escapes).
	urlForm func(string) string
}

type hmacScheme struct {
	d       *hmacDef
	keys    [][]byte
	tol     time.Duration
	url     string
	urlForm string // url after d.urlForm, computed once
}

func newHMAC(d *hmacDef, cfg Config) (*hmacScheme, error) {
	s := &hmacScheme{d: d, url: cfg.URL, urlForm: cfg.URL}
	if d.urlForm != nil {
		s.urlForm = d.urlForm(cfg.URL)
	}
	for _, sec := range cfg.Secrets {
		s.keys = append(s.keys, []byte(sec))
	}
	if d.tolerance > 0 {
		s.tol = tolerance(cfg, d.tolerance)
	}
	return s, nil
}

func (s *hmacScheme) Verify(r *Request, now time.Time) error {
	_, err := s.match(r, now)
	return err
}

// match verifies r and returns the index of the secret that matched (Zoom's handshake needs it).
func (s *hmacScheme) match(r *Request, now time.Time) (int, error) {
	d := s.d
	name, raw := "", ""
	for _, h := range d.headers {
		if raw = headerValue(r.Header, h); raw != "" {
			name = h
			break
		}
	}
	if raw == "" {
		return -1, fmt.Errorf("%w: %s", ErrMissingHeader, d.headers[0])
	}
	if len(raw) > maxHeaderLen {
		return -1, fmt.Errorf("%w: %s is longer than %d bytes", ErrMalformed, name, maxHeaderLen)
	}

	var cands [maxCandidates]string
	n, ts, err := d.parse(raw, &cands)
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %s", ErrMalformed, name, err)
	}
	var sigs [maxCandidates][sha512.Size]byte
	var lens [maxCandidates]int
	decoded := 0
	for i := 0; i < n; i++ {
		if l, ok := decodeSig(sigs[decoded][:], cands[i], d.b64); ok {
			lens[decoded] = l
			decoded++
		}
	}
	if decoded == 0 {
		return -1, fmt.Errorf("%w: %s: no decodable signature", ErrMalformed, name)
	}

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

	var sum [sha512.Size]byte
	for k, key := range s.keys {
		got := s.mac(key, r, ts, id, u, sum[:0])
		for i := 0; i < decoded; i++ {
			if hmac.Equal(got, sigs[i][:lens[i]]) {
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

// mac computes the scheme's MAC with one key, streaming the body into the hash without copying.
func (s *hmacScheme) mac(key []byte, r *Request, ts, id, u string, dst []byte) []byte {
	m := hmac.New(s.d.hash, key)
	var scratch []byte // shared by the short parts: one allocation instead of one per part
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
		scratch = append(scratch[:0], v...)
		m.Write(scratch)
	}
	return m.Sum(dst)
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
	if d.tsHeader != "" || d.format == fmtKV {
		ts = formatTime(now, d.tsFormat)
		if d.tsHeader != "" {
			setHeader(r, d.tsHeader, ts)
		}
	} else if d.tsJSON != "" {
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
	sum := s.mac(s.keys[0], r, ts, id, u, nil)
	enc := hex.EncodeToString(sum)
	if d.b64 {
		enc = base64.StdEncoding.EncodeToString(sum)
	}
	v := d.prefix + enc
	if d.format == fmtKV {
		v = d.tsKey + "=" + ts + string(d.sep) + d.sigKey + "=" + enc
	}
	setHeader(r, d.headers[0], v)
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
