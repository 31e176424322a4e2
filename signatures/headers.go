package signatures

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

const (
	maxHeaderLen  = 8 << 10 // longer signature/timestamp headers are rejected before parsing
	maxCandidates = 32      // signatures read from one header; the rest are ignored
)

// headerValue returns the first value of the header name, matched case-insensitively (see the
// package doc for the duplicate and non-canonical rules).
func headerValue(h http.Header, name string) string {
	if h == nil {
		return ""
	}
	var buf [maxFastKey]byte
	var v []string
	if key, ok := canonicalKey(&buf, name); ok {
		v = h[string(key)] // the compiler does not copy key for the lookup
	} else {
		v = h[textproto.CanonicalMIMEHeaderKey(name)]
	}
	if len(v) > 0 {
		return v[0]
	}
	best, found := "", ""
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, name) && (found == "" || k < found) {
			best, found = v[0], k
		}
	}
	return best
}

// maxFastKey is the longest header name canonicalKey writes on the stack.
const maxFastKey = 64

// canonicalKey writes textproto.CanonicalMIMEHeaderKey(name) into buf, without the allocation
// that makes for a name that is not canonical yet (Contentful lists its signed headers in lower
// case). It handles names of letters, digits and dashes up to maxFastKey bytes; for any other,
// ok is false and the caller asks textproto.
func canonicalKey(buf *[maxFastKey]byte, name string) (key []byte, ok bool) {
	if len(name) > maxFastKey {
		return nil, false
	}
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z':
			if upper {
				c -= 'a' - 'A'
			}
		case 'A' <= c && c <= 'Z':
			if !upper {
				c += 'a' - 'A'
			}
		case '0' <= c && c <= '9' || c == '-':
		default:
			return nil, false
		}
		buf[i] = c
		upper = c == '-'
	}
	return buf[:len(name)], true
}

// requireHeader returns the header's first value or an error naming it.
func requireHeader(h http.Header, name string) (string, error) {
	v := headerValue(h, name)
	if v == "" {
		return "", fmt.Errorf("%w: %s", ErrMissingHeader, name)
	}
	if len(v) > maxHeaderLen {
		return "", fmt.Errorf("%w: %s is longer than %d bytes", ErrMalformed, name, maxHeaderLen)
	}
	return v, nil
}

func setHeader(r *Request, name, value string) {
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set(name, value)
}

type tsFormat uint8

const (
	tsSeconds tsFormat = iota
	tsMillis
	tsRFC3339
	tsAuto // unix seconds, or milliseconds when the number is that large, or RFC 3339
	// tsISOLocal: ISO 8601 without a zone, read as UTC (Orb's 2024-03-27T15:42:29.551); a zone,
	// when present, is honoured.
	tsISOLocal
)

const isoLocalLayout = "2006-01-02T15:04:05.999999999"

// parseTime reads a provider timestamp. Only plain digits count as a number (no sign, no
// spaces), so "+1" or "1e9" are malformed rather than silently accepted.
func parseTime(s string, f tsFormat) (time.Time, bool) {
	if f == tsISOLocal {
		if t, err := time.Parse(isoLocalLayout, s); err == nil {
			return t, true
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	if f == tsRFC3339 || (f == tsAuto && !startsWithDigits(s)) {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(whole) == 0 || len(whole) > 18 || !allDigits(whole) || (frac != "" && !allDigits(frac)) {
		return time.Time{}, false
	}
	if frac != "" && f != tsAuto {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	if f == tsMillis || (f == tsAuto && n >= 100_000_000_000) {
		return time.UnixMilli(n), true
	}
	return time.Unix(n, 0), true
}

func formatTime(t time.Time, f tsFormat) string {
	switch f {
	case tsMillis:
		return strconv.FormatInt(t.UnixMilli(), 10)
	case tsRFC3339:
		return t.UTC().Format(time.RFC3339Nano)
	case tsISOLocal:
		return t.UTC().Format("2006-01-02T15:04:05.000")
	}
	return strconv.FormatInt(t.Unix(), 10)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func startsWithDigits(s string) bool {
	whole, _, _ := strings.Cut(s, ".")
	return whole != "" && allDigits(whole)
}

// checkTime rejects a timestamp more than tol before or after now.
func checkTime(ts, now time.Time, tol time.Duration, name string) error {
	d := now.Sub(ts)
	switch {
	case d > tol:
		return fmt.Errorf("%w: %s is %s ago, tolerance %s", ErrStale, name, d.Round(time.Second), tol)
	case d < -tol:
		// ts.Sub(now), not -d: a timestamp so far ahead that d saturates has no negation.
		return fmt.Errorf("%w: %s is %s ahead of this clock, tolerance %s", ErrStale, name, ts.Sub(now).Round(time.Second), tol)
	}
	return nil
}

// freshTimestamp parses and checks a timestamp read from the named header or field.
func freshTimestamp(v string, f tsFormat, now time.Time, tol time.Duration, name string) error {
	ts, ok := parseTime(v, f)
	if !ok {
		return fmt.Errorf("%w: %s is not a valid timestamp", ErrMalformed, name)
	}
	return checkTime(ts, now, tol, name)
}

// equalSecret compares two secrets in constant time, hashing first so that neither the content
// nor the length of the configured secret shows in the timing.
func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// randomID makes an id for signers of schemes that sign a message id.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
