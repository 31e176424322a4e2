package ledger

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
	"unicode/utf8"
)

// This file is a hand-written JSON codec for document. It produces exactly
// the bytes encoding/json's Marshal would, and reads what it writes; on
// anything it does not fully understand it gives up and the caller uses
// encoding/json instead, so correctness never depends on the fast path.

// marshalDocument encodes d as json.Marshal would.
func marshalDocument(d *document) ([]byte, error) {
	if b, ok := d.appendJSON(make([]byte, 0, 256+512*(len(d.Entries)+len(d.Runs)))); ok {
		return b, nil
	}
	return json.Marshal(d)
}

// unmarshalDocument decodes raw as json.Unmarshal would into a zero document.
func unmarshalDocument(raw []byte, d *document) error {
	if fastDecodeDocument(raw, d) {
		return nil
	}
	*d = document{}
	return json.Unmarshal(raw, d)
}

// ---- encoder ----

// appendJSON appends d's JSON to b. ok is false when d holds something the
// fast encoder does not handle (a time outside RFC 3339, an invalid raw
// message); the caller then falls back to encoding/json.
func (d *document) appendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"format":`...)
	b = appendInt(b, int64(d.Format))
	b = append(b, `,"scope":`...)
	b = appendJSONString(b, d.Scope)
	b = append(b, `,"seq":`...)
	b = appendUint(b, d.Seq)
	b = append(b, `,"token":`...)
	b = appendUint(b, d.Token)
	if !d.ExpiresAt.IsZero() {
		b = append(b, `,"expiresAt":`...)
		if b, ok = appendTime(b, d.ExpiresAt); !ok {
			return b, false
		}
	}
	if d.Holder != "" {
		b = append(b, `,"holder":`...)
		b = appendJSONString(b, d.Holder)
	}
	if len(d.Runs) > 0 {
		b = append(b, `,"runs":{`...)
		for i, k := range sortedKeys(d.Runs) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			if r := d.Runs[k]; r == nil {
				b = append(b, "null"...)
			} else if b, ok = r.appendJSON(b); !ok {
				return b, false
			}
		}
		b = append(b, '}')
	}
	if len(d.Entries) > 0 {
		b = append(b, `,"entries":{`...)
		for i, k := range sortedKeys(d.Entries) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			if e := d.Entries[k]; e == nil {
				b = append(b, "null"...)
			} else if b, ok = e.appendJSON(b); !ok {
				return b, false
			}
		}
		b = append(b, '}')
	}
	if d.LandedBase != 0 {
		b = append(b, `,"landedBase":`...)
		b = appendUint(b, d.LandedBase)
	}
	if len(d.Landings) > 0 {
		b = append(b, `,"landings":[`...)
		for i, l := range d.Landings {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"seq":`...)
			b = appendUint(b, l.Seq)
			b = append(b, `,"at":`...)
			if b, ok = appendTime(b, l.At); !ok {
				return b, false
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

func (r *runState) appendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, r.ID)
	b = append(b, `,"mode":`...)
	b = appendJSONString(b, string(r.Mode))
	b = append(b, `,"token":`...)
	b = appendUint(b, r.Token)
	b = append(b, `,"delivery":`...)
	b = appendInt(b, int64(r.Delivery))
	b = append(b, `,"contextAt":`...)
	if b, ok = appendTime(b, r.ContextAt); !ok {
		return b, false
	}
	b = append(b, `,"seenSeq":`...)
	b = appendUint(b, r.SeenSeq)
	if len(r.Acks) > 0 {
		b = append(b, `,"acks":[`...)
		for i, a := range r.Acks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a)
		}
		b = append(b, ']')
	}
	if !r.LeaseUntil.IsZero() {
		b = append(b, `,"leaseUntil":`...)
		if b, ok = appendTime(b, r.LeaseUntil); !ok {
			return b, false
		}
	}
	b = append(b, `,"lastActive":`...)
	if b, ok = appendTime(b, r.LastActive); !ok {
		return b, false
	}
	if r.Wrote {
		b = append(b, `,"wrote":true`...)
	}
	if r.Ended {
		b = append(b, `,"ended":true`...)
	}
	if r.Cancelled {
		b = append(b, `,"cancelled":true`...)
	}
	if !r.EndedAt.IsZero() {
		b = append(b, `,"endedAt":`...)
		if b, ok = appendTime(b, r.EndedAt); !ok {
			return b, false
		}
	}
	if r.EndReason != "" {
		b = append(b, `,"endReason":`...)
		b = appendJSONString(b, r.EndReason)
	}
	if r.LostLease {
		b = append(b, `,"lostLease":true`...)
	}
	if r.LeaseTTL != 0 {
		b = append(b, `,"leaseTtl":`...)
		b = appendInt(b, int64(r.LeaseTTL))
	}
	return append(b, '}'), true
}

func (e *Entry) appendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"scope":`...)
	b = appendJSONString(b, e.Scope)
	b = append(b, `,"intent":`...)
	b = appendJSONString(b, e.Intent)
	b = append(b, `,"payload":`...)
	if b, ok = appendRaw(b, e.Payload); !ok {
		return b, false
	}
	if e.Summary != "" {
		b = append(b, `,"summary":`...)
		b = appendJSONString(b, e.Summary)
	}
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(e.State))
	b = append(b, `,"attempt":`...)
	b = appendInt(b, int64(e.Attempt))
	if e.Failures != 0 {
		b = append(b, `,"failures":`...)
		b = appendInt(b, int64(e.Failures))
	}
	if e.MaxAttempts != 0 {
		b = append(b, `,"maxAttempts":`...)
		b = appendInt(b, int64(e.MaxAttempts))
	}
	if e.RunID != "" {
		b = append(b, `,"runId":`...)
		b = appendJSONString(b, e.RunID)
	}
	if e.Token != 0 {
		b = append(b, `,"token":`...)
		b = appendUint(b, e.Token)
	}
	if e.Delivery != 0 {
		b = append(b, `,"delivery":`...)
		b = appendInt(b, int64(e.Delivery))
	}
	b = append(b, `,"claimedAt":`...)
	if b, ok = appendTime(b, e.ClaimedAt); !ok {
		return b, false
	}
	b = append(b, `,"pendingTtl":`...)
	b = appendInt(b, int64(e.PendingTTL))
	if e.Redeliverable {
		b = append(b, `,"redeliverable":true`...)
	}
	if !e.SettledAt.IsZero() {
		b = append(b, `,"settledAt":`...)
		if b, ok = appendTime(b, e.SettledAt); !ok {
			return b, false
		}
	}
	if e.LandedSeq != 0 {
		b = append(b, `,"landedSeq":`...)
		b = appendUint(b, e.LandedSeq)
	}
	if len(e.Value) > 0 {
		b = append(b, `,"value":`...)
		if b, ok = appendRaw(b, e.Value); !ok {
			return b, false
		}
	}
	if e.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, e.Error)
	}
	if e.Abandoned {
		b = append(b, `,"abandoned":true`...)
	}
	if e.LateSettle {
		b = append(b, `,"lateSettle":true`...)
	}
	if e.ResolvedBy != "" {
		b = append(b, `,"resolvedBy":`...)
		b = appendJSONString(b, e.ResolvedBy)
	}
	return append(b, '}'), true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		b = append(b, '-')
		return appendUint(b, uint64(-v)) // -MinInt64 wraps to its own magnitude as uint64
	}
	return appendUint(b, uint64(v))
}

func appendUint(b []byte, v uint64) []byte {
	if v < 10 {
		return append(b, byte('0'+v))
	}
	var buf [20]byte
	i := len(buf)
	for v >= 10 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	i--
	buf[i] = byte('0' + v)
	return append(b, buf[i:]...)
}

// appendTime writes t as time.Time.MarshalJSON does; ok is false where
// MarshalJSON would fail.
func appendTime(b []byte, t time.Time) (_ []byte, ok bool) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	// The same checks as time.Time.appendStrictRFC3339.
	if len(b) < n0+len("2006-01-02T15:04:05Z") || b[n0+4] != '-' {
		return b, false
	}
	if b[len(b)-1] != 'Z' {
		c := b[len(b)-len("Z07:00")]
		if ('0' <= c && c <= '9') || 10*(b[len(b)-5]-'0')+(b[len(b)-4]-'0') >= 24 {
			return b, false
		}
	}
	return append(b, '"'), true
}

// appendRaw writes a json.RawMessage as encoding/json does: nil as null,
// otherwise validated and compacted with HTML escaping.
func appendRaw(b []byte, raw json.RawMessage) (_ []byte, ok bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	if !validJSON(raw) {
		return b, false
	}
	if rawIsCompactSafe(raw) {
		return append(b, raw...), true
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return b, false
	}
	var h bytes.Buffer
	json.HTMLEscape(&h, c.Bytes())
	return append(b, h.Bytes()...), true
}

// validJSON is json.Valid by the decoder's validating skipper, which costs
// a fraction of encoding/json's scanner; values nested deeper than the
// skipper goes are refused, and the caller falls back to encoding/json.
func validJSON(raw []byte) bool {
	p := parser{buf: raw}
	if !p.skip(0) {
		return false
	}
	p.ws()
	return p.i == len(raw)
}

// rawIsCompactSafe reports whether valid JSON raw has no whitespace outside
// strings and nothing encoding/json would HTML-escape.
func rawIsCompactSafe(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9):
			return false
		case in:
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

// htmlSafe and jsonSafe are the ASCII bytes encoding/json writes as they
// are, with and without HTML escaping.
var (
	htmlSafe = func() (t [utf8.RuneSelf]bool) {
		for c := 0x20; c < utf8.RuneSelf; c++ {
			t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
		}
		return t
	}()
	jsonSafe = func() (t [utf8.RuneSelf]bool) {
		for c := 0x20; c < utf8.RuneSelf; c++ {
			t[c] = c != '"' && c != '\\'
		}
		return t
	}()
)

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

// appendJSONString is encoding/json's appendString with HTML escaping.
func appendJSONString(dst []byte, src string) []byte {
	return appendQuoted(dst, src, &htmlSafe, false)
}

// appendQuoted is encoding/json's appendString: safe names the ASCII bytes
// written as they are (the others are escaped), U+2028 and U+2029 are
// escaped, and each invalid UTF-8 byte becomes \ufffd, or with
// rawReplacement the replacement character itself.
func appendQuoted(dst []byte, src string, safe *[utf8.RuneSelf]bool, rawReplacement bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		if c := src[i]; c < utf8.RuneSelf {
			if safe[c] {
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
			if rawReplacement {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, `\ufffd`...)
			}
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
