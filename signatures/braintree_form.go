package signatures

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/url"
	"sync"
)

// braintreeFastPairs bounds the bodies braintreeFields reads itself. Braintree posts two fields;
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
// braintreeChars. The payload is unescaped, checked and searched for the end of its pair, for
// semicolons and for bad escapes in one pass: a pass per question cost as much as the
// HMAC-SHA1 of the payload.
func braintreeFields(body, buf []byte) (sigs string, payload []byte, payloadOK bool, err error) {
	// ParseQuery keeps going after an error and any error refuses the body. A pair with ";"
	// sets the error whatever came before it (and a later escape error does not replace it);
	// otherwise the first bad escape is the error, so stopping there gives the same answer.
	// Bodies with more pairs than the fast reading takes are ParseQuery's. The reading below
	// learns these as it goes; on an error it asks them of the whole body, in this order.
	fail := func(err error) (string, []byte, bool, error) {
		if bytes.Count(body, []byte("&"))+1 > braintreeFastPairs {
			return braintreeFormGeneral(body, buf)
		}
		if bytes.IndexByte(body, ';') >= 0 {
			return "", nil, false, errFormSemicolon
		}
		return "", nil, false, err
	}
	gotSig, gotPay, payloadOK, semicolon := false, false, true, false
	pairs := 1
	rest := body
	for len(rest) > 0 {
		if rest[0] == '&' {
			if pairs++; pairs > braintreeFastPairs {
				return braintreeFormGeneral(body, buf)
			}
			rest = rest[1:]
			continue
		}
		kl := 0
		for kl < len(rest) && rest[kl] != '=' && rest[kl] != '&' {
			kl++
		}
		k := rest[:kl]
		rest = rest[kl:]
		semicolon = semicolon || bytes.IndexByte(k, ';') >= 0
		if err := formEscapes(k); err != nil {
			return fail(err)
		}
		hasValue := len(rest) > 0 && rest[0] == '='
		if hasValue {
			rest = rest[1:]
		}
		if !gotPay && formKeyIs(k, "bt_payload") {
			gotPay, payload = true, buf[:0]
			if hasValue {
				var n int
				var semi bool
				var err error
				payload, payloadOK, n, semi, err = braintreeUnescape(payload, rest)
				if err != nil {
					return fail(err)
				}
				semicolon = semicolon || semi
				rest = rest[n:]
			}
			continue
		}
		var v []byte
		if hasValue {
			vl := bytes.IndexByte(rest, '&')
			if vl < 0 {
				vl = len(rest)
			}
			v, rest = rest[:vl], rest[vl:]
		}
		semicolon = semicolon || bytes.IndexByte(v, ';') >= 0
		if err := formEscapes(v); err != nil {
			return fail(err)
		}
		if !gotSig && formKeyIs(k, "bt_signature") {
			var short [128]byte // a signature list fits: one allocation, the string
			gotSig, sigs = true, string(formAppendUnescaped(short[:0], v))
		}
	}
	if semicolon {
		return "", nil, false, errFormSemicolon
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

// braintreeUnescape is formAppendUnescaped for the value of bt_payload at the start of s,
// which ends at the first "&" or with s: it appends the unescaped value to dst and returns the
// length of the value in s. ok reports whether every unescaped byte is one of braintreeChars,
// semicolon whether the value holds a ";", and err is formEscapes's error for the value.
func braintreeUnescape(dst, s []byte) (out []byte, ok bool, n int, semicolon bool, err error) {
	ok = true
	for n < len(s) {
		i := n + braintreePlainRun(s[n:])
		dst = append(dst, s[n:i]...)
		if i == len(s) {
			return dst, ok, i, semicolon, nil
		}
		c := s[i]
		switch c {
		case '&':
			return dst, ok, i, semicolon, nil
		case '+':
			c, n = ' ', i+1
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				bad := s[i:min(i+3, len(s))]
				if j := bytes.IndexByte(bad, '&'); j >= 0 {
					bad = bad[:j]
				}
				return nil, false, 0, false, url.EscapeError(bad)
			}
			c, n = unhex(s[i+1])<<4|unhex(s[i+2]), i+3
		case ';':
			semicolon, n = true, i+1
		default:
			n = i + 1
		}
		ok = ok && braintreeChars[c]
		dst = append(dst, c)
	}
	return dst, ok, n, semicolon, nil
}

// braintreePlainRun returns the length of the run of braintreePlain bytes s starts with. Letters
// and digits (the bytes of an encoded form's base64 between its escapes) are tested sixteen at
// a time (braintreeAlnumBlocks: SSE2 on amd64, words elsewhere), the other bytes one by one: a
// lookup per byte cost as much as the HMAC-SHA1 of the payload.
func braintreePlainRun(s []byte) int {
	n := len(s)
	for {
		s = s[braintreeAlnumBlocks(s):]
		// Fewer than 16 bytes are left, or one of the next 16 is not a letter or digit.
		if len(s) >= 8 && braintreeNotAlnum(binary.LittleEndian.Uint64(s)) == 0 {
			s = s[8:]
		}
		// Up to the first byte that is not a letter or digit, then past the plain bytes
		// there: "/", "=" and newlines (sent unescaped by some clients) go on with the run.
		j := 0
		for j < len(s) && braintreeAlnum[s[j]] {
			j++
		}
		k := j
		for k < len(s) && braintreePlain[s[k]] && !braintreeAlnum[s[k]] {
			k++
		}
		s = s[k:]
		if k == j {
			return n - len(s)
		}
	}
}

// braintreeAlnumBlocksWords is braintreeAlnumBlocks a word at a time, in Go.
func braintreeAlnumBlocksWords(s []byte) int {
	n := 0
	for len(s)-n >= 16 && braintreeNotAlnum(binary.LittleEndian.Uint64(s[n:]))|braintreeNotAlnum(binary.LittleEndian.Uint64(s[n+8:])) == 0 {
		n += 16
	}
	return n
}

// braintreeNotAlnum returns 0 when every byte of the word x is an ASCII letter or digit or
// "/", and otherwise a value with the high bit of some byte set.
//
// For a byte b below 0x80, 127+hi-b has its high bit set when b < hi, and b+127-lo when b > lo;
// neither borrows from nor carries into the next byte. A byte of 0x80 or more makes the result
// nonzero on its own, whatever the arithmetic did to its neighbours.
func braintreeNotAlnum(x uint64) uint64 {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	y := x | ones*0x20 // folds A-Z onto a-z, and nothing else onto them
	letters := (ones*(127+'z'+1) - y) & (y + ones*(127-('a'-1)))
	digits := (ones*(127+'9'+1) - x) & (x + ones*(127-('/'-1))) // "/" comes just before "0"
	return (x | ^(letters | digits)) & high
}

// braintreeAlnum marks the bytes braintreeNotAlnum accepts.
var braintreeAlnum = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/") {
		t[c] = true
	}
	return t
}()

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
