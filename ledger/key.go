package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Key names one effect: what (Intent) is done to which business object
// (Payload) within which scope. Two keys with the same scope, intent and
// payload (in any map key order) are the same effect.
type Key struct {
	Scope   string
	Intent  string
	Payload any
}

// legacyCanonicalJSON renders v as format 1 did: map keys sorted, no HTML
// escaping, numbers exactly as first written, invalid UTF-8 replaced by
// U+FFFD. It is still the first step of canonicalJSON, whose input it
// makes valid JSON, and it names the entries stored before RFC 8785 (see
// legacyEntryID). The general path goes through encoding/json's generic
// values; the shapes callers pass most (what encoding/json decodes into,
// Go integers, string maps) are written directly, to the same bytes, since
// every claim hashes its payload.
func legacyCanonicalJSON(v any) (json.RawMessage, error) {
	if out, ok := appendCanonical(make([]byte, 0, 128), v, 0); ok {
		return out, nil
	}
	var raw []byte
	switch t := v.(type) {
	case json.RawMessage:
		raw = t
	case []byte:
		raw = t
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("ledger: payload is not JSON-encodable: %w", err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("ledger: payload is not valid JSON: %w", err)
	}
	return encodeCanonical(generic)
}

// encodeCanonical writes a generic value without HTML escaping, so that "<"
// hashes the same whether it arrived as a Go string or inside raw JSON.
func encodeCanonical(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("ledger: payload: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// maxCanonicalDepth bounds the direct path's recursion; deeper values (and
// cyclic ones) take the general path, which reports cycles as errors.
const maxCanonicalDepth = 32

// appendCanonical appends what the general path of legacyCanonicalJSON would
// produce for v, or reports false for a value it does not handle directly.
func appendCanonical(dst []byte, v any, depth int) ([]byte, bool) {
	if depth > maxCanonicalDepth {
		return dst, false
	}
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, t), true
	case string:
		return appendCanonicalString(dst, t), true
	case int:
		return strconv.AppendInt(dst, int64(t), 10), true
	case int64:
		return strconv.AppendInt(dst, t, 10), true
	case int32:
		return strconv.AppendInt(dst, int64(t), 10), true
	case uint:
		return strconv.AppendUint(dst, uint64(t), 10), true
	case uint64:
		return strconv.AppendUint(dst, t, 10), true
	case uint32:
		return strconv.AppendUint(dst, uint64(t), 10), true
	case float64:
		return appendFloat64(dst, t)
	case map[string]string:
		return appendCanonicalMap(dst, t, func(dst []byte, v string) ([]byte, bool) {
			return appendCanonicalString(dst, v), true
		})
	case map[string]any:
		return appendCanonicalMap(dst, t, func(dst []byte, v any) ([]byte, bool) {
			return appendCanonical(dst, v, depth+1)
		})
	case []any:
		if t == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendCanonical(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	}
	return dst, false
}

// appendCanonicalMap writes m with its keys sorted. It declines maps with
// a key that is not valid UTF-8: the general path replaces such keys
// before it sorts (and merges keys that become equal), so their order and
// number are its to decide.
func appendCanonicalMap[V any](dst []byte, m map[string]V, value func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	if m == nil {
		return append(dst, "null"...), true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !utf8.ValidString(k) {
			return dst, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCanonicalString(dst, k)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = value(dst, m[k]); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendFloat64 is encoding/json's float format, which the general path
// keeps verbatim as a json.Number. NaN and infinities are not JSON: the
// general path reports them.
func appendFloat64(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9, as encoding/json writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

// appendCanonicalString writes s as the general path does: encoding/json's
// escapes without the HTML ones (U+2028 and U+2029 included), and each
// invalid UTF-8 byte as the replacement character itself (the general path
// decodes the \ufffd that json.Marshal writes for it, then writes the
// character unescaped).
func appendCanonicalString(dst []byte, src string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		if c := src[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			dst = appendEscapedASCII(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, src[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscapedASCII writes the escape encoding/json uses for an ASCII
// character it does not write as is.
func appendEscapedASCII(dst []byte, c byte) []byte {
	switch c {
	case '\\', '"':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}

// canonicalJSON renders v in the JSON Canonicalization Scheme (RFC 8785):
// keys sorted by their UTF-16 code units, no insignificant whitespace,
// strings escaped only where JSON requires it, and every number as the
// shortest ECMAScript rendering of the IEEE 754 double it denotes, so that
// 2500, 2500.0 and 2.5e3 are one value whatever language wrote them. An
// integer beyond 2^53 is rounded to a double like any other number: two
// that differ only past that precision are one value (send such ids as
// strings). legacy is the format 1 rendering, for finding entries stored
// under it.
func canonicalJSON(v any) (canonical, legacy json.RawMessage, err error) {
	legacy, err = legacyCanonicalJSON(v)
	if err != nil {
		return nil, nil, err
	}
	if m, ok := v.(map[string]string); ok && allASCII(m) {
		// The gateway's own keys (source and event id) are such maps,
		// and their legacy rendering is already RFC 8785's: keys in
		// byte order, which for ASCII is UTF-16 order, and the same
		// escapes (\", \\, \b \f \n \r \t, \u00xx for the other
		// control characters). Parsing it again cost 3.5 µs of every
		// claim (issue #29).
		return legacy, legacy, nil
	}
	canonical, err = jcs.Transform(legacy)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: payload cannot be canonicalised (RFC 8785): %w", err)
	}
	return canonical, legacy, nil
}

// allASCII reports whether every key and value of m is ASCII, where the
// legacy rendering and RFC 8785's agree byte for byte. U+2028 and U+2029
// (escaped only by the legacy rendering), keys past U+FFFF (ordered
// differently by UTF-16) and invalid UTF-8 are left to jcs.Transform.
func allASCII(m map[string]string) bool {
	ascii := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return false
			}
		}
		return true
	}
	for k, v := range m {
		if !ascii(k) || !ascii(v) {
			return false
		}
	}
	return true
}

// entryIDDomain starts every hashed entry id, so that the id of an entry
// cannot equal a hash of anything else written the same way.
const entryIDDomain = "replyonce/entry/v2"

// entryID is the stable identity of an effect. It doubles as the effect's
// idempotency key, so it must not depend on the attempt or the worker.
// Each field is written after its length, so no two (scope, intent,
// payload) triples hash the same bytes, whatever bytes they hold.
func entryID(scope, intent string, canonical []byte) string {
	// One buffer, on the stack for the usual sizes.
	var stack [256]byte
	b := append(stack[:0], entryIDDomain...)
	for _, field := range [...]string{scope, intent, string(canonical)} {
		b = binary.AppendUvarint(b, uint64(len(field)))
		b = append(b, field...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// legacyEntryID is the id format 1 gave an effect: fields joined with NUL
// (ambiguous when a scope or an intent holds one) over the legacy
// canonical payload. Entries stored under it keep it for life, since it is
// also the idempotency key their effect already sent to a provider; a
// claim for the same effect finds them through it (resolvedKey.idIn).
func legacyEntryID(scope, intent string, legacyCanonical []byte) string {
	var stack [256]byte
	b := append(stack[:0], scope...)
	b = append(b, 0)
	b = append(b, intent...)
	b = append(b, 0)
	b = append(b, legacyCanonical...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// resolvedKey is a Key with its payload rendered and hashed once.
type resolvedKey struct {
	scope, intent string
	payload       json.RawMessage
	id            string
	// legacyPayload is the format 1 rendering; its id is computed only
	// when a document might hold an entry stored under it.
	legacyPayload json.RawMessage
}

func resolveKey(k Key) (resolvedKey, error) {
	if err := checkScope(k.Scope); err != nil {
		return resolvedKey{}, err
	}
	if k.Intent == "" {
		return resolvedKey{}, fmt.Errorf("%w: intent is empty", ErrInvalid)
	}
	c, legacy, err := canonicalJSON(k.Payload)
	if err != nil {
		return resolvedKey{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return resolvedKey{scope: k.Scope, intent: k.Intent, payload: c, id: entryID(k.Scope, k.Intent, c), legacyPayload: legacy}, nil
}

// idIn is the id under which d keeps this key's entry: its own, or the
// format 1 id of an entry stored before the change of key format, so that
// an effect recorded then is replayed (or stays ambiguous) instead of
// running again under its new id. A key with no entry in d gets its own.
func (k resolvedKey) idIn(d *document) string {
	if len(d.Entries) == 0 || d.Entries[k.id] != nil || k.legacyPayload == nil {
		return k.id
	}
	old := legacyEntryID(k.scope, k.intent, k.legacyPayload)
	if e := d.Entries[old]; e != nil && e.Intent == k.intent {
		return old
	}
	return k.id
}

// IdempotencyKey returns the key an effect should pass to providers that
// accept one. It is the same for every attempt, worker and process.
func IdempotencyKey(k Key) (string, error) {
	r, err := resolveKey(k)
	if err != nil {
		return "", err
	}
	return idempotencyKeyFor(r.id), nil
}

func idempotencyKeyFor(id string) string { return "ro_" + id }
