package signatures

import (
	"bytes"
	"errors"
	"net/url"
	"sync"
)

// braintreeFastPairs bounds the bodies read by braintreeFormFast. Braintree posts two fields;
// a body with more pairs goes through url.ParseQuery, which also applies Go's limit on the
// number of parameters (GODEBUG urlmaxqueryparams, 10000 by default), so that limit keeps
// applying exactly as before unless it is set below this bound.
const braintreeFastPairs = 16

// braintreeBufs holds the buffers the payload is unescaped into, so that a notification costs
// no allocation proportional to its size. Buffers grown past 1 MiB are not kept.
var braintreeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

var errFormSemicolon = errors.New("invalid semicolon separator in query")

// braintreeFields returns the first bt_signature and bt_payload of a form body, unescaped, with
// the error url.ParseQuery would give for the same body (verification refuses a body
// ParseQuery refuses). payload is appended to buf; payloadOK reports whether it holds only
// braintreeChars, found in the same pass over the bytes (a second pass cost as much as the
// HMAC-SHA1 of the payload).
func braintreeFields(body, buf []byte) (sigs string, payload []byte, payloadOK bool, err error) {
	if bytes.Count(body, []byte("&"))+1 > braintreeFastPairs {
		return braintreeFormGeneral(body, buf)
	}
	// ParseQuery keeps going after an error and any error refuses the body. A pair with ";"
	// sets the error whatever came before it (and a later escape error does not replace it);
	// otherwise the first bad escape is the error, so stopping there gives the same answer.
	if bytes.IndexByte(body, ';') >= 0 {
		return "", nil, false, errFormSemicolon
	}
	gotSig, gotPay, payloadOK := false, false, true
	rest := body
	for len(rest) > 0 {
		var pair []byte
		pair, rest, _ = bytes.Cut(rest, []byte("&"))
		if len(pair) == 0 {
			continue
		}
		k, v, _ := bytes.Cut(pair, []byte("="))
		if err := formEscapes(k); err != nil {
			return "", nil, false, err
		}
		if err := formEscapes(v); err != nil {
			return "", nil, false, err
		}
		switch {
		case !gotSig && formKeyIs(k, "bt_signature"):
			gotSig, sigs = true, string(formAppendUnescaped(nil, v))
		case !gotPay && formKeyIs(k, "bt_payload"):
			gotPay = true
			payload, payloadOK = braintreeUnescape(buf[:0], v)
		}
	}
	return sigs, payload, payloadOK, nil
}

// braintreeFormGeneral is the general reading of the form, through url.ParseQuery.
func braintreeFormGeneral(body, buf []byte) (string, []byte, bool, error) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return "", nil, false, err
	}
	p := append(buf[:0], vals.Get("bt_payload")...)
	return vals.Get("bt_signature"), p, braintreePayloadChars(p), nil
}

// formEscapes returns url.QueryUnescape's error for s, if it has one: a "%" not followed by two
// hex digits.
func formEscapes(s []byte) error {
	for i := bytes.IndexByte(s, '%'); i >= 0; {
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			bad := s[i:]
			if len(bad) > 3 {
				bad = bad[:3]
			}
			return url.EscapeError(bad)
		}
		j := bytes.IndexByte(s[i+3:], '%')
		if j < 0 {
			break
		}
		i += 3 + j
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// formAppendUnescaped appends the query-unescaped s to dst; s has passed formEscapes. Runs of
// bytes that stand for themselves are copied whole.
func formAppendUnescaped(dst, s []byte) []byte {
	for len(s) > 0 {
		i := 0
		for i < len(s) && formPlain[s[i]] {
			i++
		}
		dst = append(dst, s[:i]...)
		if i == len(s) {
			break
		}
		if s[i] == '+' {
			dst = append(dst, ' ')
			s = s[i+1:]
			continue
		}
		dst = append(dst, unhex(s[i+1])<<4|unhex(s[i+2]))
		s = s[i+3:]
	}
	return dst
}

// braintreeUnescape is formAppendUnescaped for bt_payload, also reporting whether every
// unescaped byte is one of braintreeChars.
func braintreeUnescape(dst, s []byte) ([]byte, bool) {
	ok := true
	for len(s) > 0 {
		i := 0
		for i+8 <= len(s) && braintreePlain[s[i]] && braintreePlain[s[i+1]] && braintreePlain[s[i+2]] &&
			braintreePlain[s[i+3]] && braintreePlain[s[i+4]] && braintreePlain[s[i+5]] &&
			braintreePlain[s[i+6]] && braintreePlain[s[i+7]] {
			i += 8
		}
		for i < len(s) && braintreePlain[s[i]] {
			i++
		}
		dst = append(dst, s[:i]...)
		if i == len(s) {
			break
		}
		c := s[i]
		switch c {
		case '+':
			c, s = ' ', s[i+1:]
		case '%':
			c, s = unhex(s[i+1])<<4|unhex(s[i+2]), s[i+3:]
		default:
			s = s[i+1:]
		}
		ok = ok && braintreeChars[c]
		dst = append(dst, c)
	}
	return dst, ok
}

// braintreePlain marks the bytes of braintreeChars that a form value carries as they are.
var braintreePlain = func() (t [256]bool) {
	t = braintreeChars
	t['+'] = false
	return t
}()

// formPlain marks the bytes a form value carries as they are: all but "%" and "+".
var formPlain = func() (t [256]bool) {
	for c := range t {
		t[c] = c != '%' && c != '+'
	}
	return t
}()

// braintreeChars marks the bytes a bt_payload may hold: base64 and newlines, as the SDKs require.
var braintreeChars = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n") {
		t[c] = true
	}
	return t
}()

// formKeyIs reports whether the escaped key k unescapes to name.
func formKeyIs(k []byte, name string) bool {
	if len(k) < len(name) || len(k) > 3*len(name) {
		return false
	}
	var b [48]byte
	return string(formAppendUnescaped(b[:0], k)) == name
}
