package signatures

import (
	"bytes"
	"crypto/hmac"
	"fmt"
	"hash"
	"net/url"
	"slices"
	"sync"
)

// formParams is a form body read once into name/value pairs, sorted as Twilio, Plivo V3 and
// Mandrill sign them. A part without escapes is a slice of the body; an escaped part is decoded
// into buf, so a verification that reuses a formParams allocates nothing.
type formParams struct {
	pairs []formPair
	buf   []byte
}

type formPair struct{ k, v []byte }

// parse reads body with url.ParseQuery's rules and errors, in the same order: the first item
// (left to right) with a semicolon, a bad escape in its name or then in its value, is reported.
func (f *formParams) parse(body []byte) error {
	f.pairs, f.buf = f.pairs[:0], f.buf[:0]
	for rest := body; len(rest) > 0; {
		item := rest
		if i := bytes.IndexByte(rest, '&'); i >= 0 {
			item, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(item) == 0 {
			continue
		}
		if bytes.IndexByte(item, ';') >= 0 {
			return fmt.Errorf("%w: form body: invalid semicolon separator in query", ErrMalformed)
		}
		k, v := item, item[len(item):]
		if i := bytes.IndexByte(item, '='); i >= 0 {
			k, v = item[:i], item[i+1:]
		}
		var err error
		if k, err = f.unescape(k); err != nil {
			return err
		}
		if v, err = f.unescape(v); err != nil {
			return err
		}
		f.pairs = append(f.pairs, formPair{k, v})
	}
	slices.SortFunc(f.pairs, func(a, b formPair) int {
		if c := bytes.Compare(a.k, b.k); c != 0 {
			return c
		}
		return bytes.Compare(a.v, b.v)
	})
	return nil
}

// dedup keeps one of each run of equal pairs, which parse has made adjacent: Twilio's SDKs
// write a repeated name's distinct values once each.
func (f *formParams) dedup() {
	f.pairs = slices.CompactFunc(f.pairs, func(a, b formPair) bool {
		return bytes.Equal(a.k, b.k) && bytes.Equal(a.v, b.v)
	})
}

// unescape decodes s as url.QueryUnescape does ('+' is a space), returning s itself when it has
// no escapes. Slices handed out earlier stay valid when buf grows: they keep the old array.
func (f *formParams) unescape(s []byte) ([]byte, error) {
	i := bytes.IndexByte(s, '%')
	if j := bytes.IndexByte(s, '+'); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	if i < 0 {
		return s, nil
	}
	start := len(f.buf)
	f.buf = append(f.buf, s[:i]...)
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			f.buf = append(f.buf, ' ')
		case '%':
			if i+2 >= len(s) || !isHexDigit(s[i+1]) || !isHexDigit(s[i+2]) {
				// url.QueryUnescape words the error; its answer is the one callers have always seen.
				u, err := url.QueryUnescape(string(s))
				if err == nil {
					f.buf = append(f.buf[:start], u...)
					return f.buf[start:], nil
				}
				return nil, fmt.Errorf("%w: form body: %v", ErrMalformed, err)
			}
			f.buf = append(f.buf, hexValue(s[i+1])<<4|hexValue(s[i+2]))
			i += 2
		default:
			f.buf = append(f.buf, c)
		}
	}
	return f.buf[start:], nil
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexValue(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// appendTo appends the sorted pairs as name+value with no separators.
func (f *formParams) appendTo(b []byte) []byte {
	for _, p := range f.pairs {
		b = append(append(b, p.k...), p.v...)
	}
	return b
}

// flushAt is the size at which gathered short parts are handed to the hash: one Write per part
// would cost more than copying them, and a long part is written in place rather than copied.
const flushAt = 512

// writeTo writes the sorted pairs as name+value into km's hash, gathering short parts in its
// scratch buffer.
func (f *formParams) writeTo(km *keyedMAC) {
	buf := km.scratch[:0]
	for _, p := range f.pairs {
		for _, part := range [2][]byte{p.k, p.v} {
			if len(part) < flushAt {
				buf = append(buf, part...)
				if len(buf) < flushAt {
					continue
				}
			} else if len(buf) > 0 {
				km.h.Write(buf)
				buf = buf[:0]
				km.h.Write(part)
				continue
			} else {
				km.h.Write(part)
				continue
			}
			km.h.Write(buf)
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		km.h.Write(buf)
	}
	km.scratch = buf[:0]
}

// writeString writes s into km's hash through its scratch buffer (a string converted in the
// call would be copied to the heap).
func (km *keyedMAC) writeString(s string) {
	km.scratch = append(km.scratch[:0], s...)
	km.h.Write(km.scratch)
}

// sum is the MAC of what was written, in km's own buffer.
func (km *keyedMAC) sumBytes() []byte { return km.h.Sum(km.sum[:0]) }

// macPools returns one pool of keyed HMACs per key: a reset HMAC restarts from its keyed state,
// where hmac.New hashes the key's pads again.
func macPools(h func() hash.Hash, keys [][]byte) []*sync.Pool {
	pools := make([]*sync.Pool, len(keys))
	for i, k := range keys {
		pools[i] = &sync.Pool{New: func() any { return &keyedMAC{h: hmac.New(h, k)} }}
	}
	return pools
}

func newFormPool() *sync.Pool { return &sync.Pool{New: func() any { return new(formParams) }} }
