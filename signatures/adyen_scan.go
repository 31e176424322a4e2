package signatures

import (
	"strings"

	"github.com/tidwall/gjson"
)

// adyenBatch is what verification reads from a standard notification body: whether
// notificationItems is an array, its length, and its items read by adyenRead when there are no
// more than maxAdyenItems of them.
type adyenBatch struct {
	array bool
	n     int
	items []adyenItem
}

// adyenReadGJSON reads a batch with gjson: the top-level notificationItems, then each
// element's NotificationRequestItem. It reads any input, and it is the reference adyenScan is
// tested against.
func adyenReadGJSON(body string, b *adyenBatch) {
	arr := gjson.Get(body, "notificationItems")
	if !arr.IsArray() {
		return
	}
	elems := arr.Array()
	b.array, b.n = true, len(elems)
	if b.n > maxAdyenItems {
		return
	}
	for _, e := range elems {
		b.items = append(b.items, adyenRead(e.Get("NotificationRequestItem")))
	}
}

// adyenScanDepth bounds the nesting adyenScan follows; deeper bodies go to gjson.
const adyenScanDepth = 128

// adyenScan reads a batch as adyenReadGJSON does, in one pass over the body: gjson walked a
// notification once for the array, once per item and once per nested object, and a long reason
// or additionalData was crossed every time. It reads only strict JSON objects (RFC 8259
// grammar outside strings, JSON whitespace) whose notification items (each a
// "NotificationRequestItem"), amounts and additionalData are objects; for those its answers are gjson's. It returns false
// for anything else, and the caller reads the body with gjson instead: correctness never rests
// on the scanner guessing how gjson treats broken JSON.
//
// String contents are not validated: gjson reads a string up to the first quote not escaped by
// a backslash whatever the bytes in between, and so does adyenScan. A string with a backslash
// is unescaped by gjson itself.
func adyenScan(body string, b *adyenBatch) bool {
	sc := adyenScanner{s: body}
	sc.ws()
	if !sc.eat('{') {
		return false
	}
	seen := false
	ok := sc.members(func(key string) bool {
		if seen || key != "notificationItems" {
			return sc.skip(1)
		}
		seen = true
		if sc.peek() != '[' {
			return sc.skip(1) // present but not an array: refused, as gjson's IsArray refuses it
		}
		b.array = true
		return sc.items(b)
	})
	if !ok {
		return false
	}
	sc.ws()
	return sc.i == len(sc.s)
}

type adyenScanner struct {
	s string
	i int
}

func (sc *adyenScanner) ws() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (sc *adyenScanner) peek() byte {
	sc.ws()
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

func (sc *adyenScanner) eat(c byte) bool {
	if sc.peek() == c {
		sc.i++
		return true
	}
	return false
}

// members reads the members of an object whose "{" has been read, through its "}", calling
// member with each key (unescaped as gjson unescapes it) at the start of the member's value;
// member reads the value.
func (sc *adyenScanner) members(member func(key string) bool) bool {
	if sc.eat('}') {
		return true
	}
	for {
		if sc.peek() != '"' {
			return false
		}
		_, key, ok := sc.str()
		if !ok || !sc.eat(':') || sc.peek() == 0 {
			return false
		}
		if !member(key) {
			return false
		}
		if sc.eat('}') {
			return true
		}
		if !sc.eat(',') {
			return false
		}
	}
}

// str reads the string at sc.i, returning it as written with its quotes and its value.
func (sc *adyenScanner) str() (raw, val string, ok bool) {
	start := sc.i
	rest := sc.s[start+1:]
	q := strings.IndexByte(rest, '"')
	if q < 0 {
		return "", "", false
	}
	if strings.IndexByte(rest[:q], '\\') < 0 {
		sc.i = start + 1 + q + 1
		return sc.s[start:sc.i], rest[:q], true
	}
	// A quote ends the string unless an odd run of backslashes stands before it.
	for {
		run := 0
		for run < q && rest[q-1-run] == '\\' {
			run++
		}
		if run%2 == 0 {
			break
		}
		next := strings.IndexByte(rest[q+1:], '"')
		if next < 0 {
			return "", "", false
		}
		q += 1 + next
	}
	sc.i = start + 1 + q + 1
	raw = sc.s[start:sc.i]
	return raw, gjson.Parse(raw).Str, true
}

// value reads the scalar at sc.i as adyenValue reads it from gjson: a string's value, a number
// or boolean as written, null as empty. ok is false for an object or array, and for anything
// that is not JSON.
func (sc *adyenScanner) value() (r gjson.Result, ok bool) {
	if sc.i >= len(sc.s) {
		return r, false
	}
	start := sc.i
	switch c := sc.s[start]; {
	case c == '"':
		r.Raw, r.Str, ok = sc.str()
		r.Type = gjson.String
		return r, ok
	case c == 't':
		r.Type, ok = gjson.True, sc.lit("true")
	case c == 'f':
		r.Type, ok = gjson.False, sc.lit("false")
	case c == 'n':
		r.Type, ok = gjson.Null, sc.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		r.Type, ok = gjson.Number, sc.number()
	default:
		return r, false
	}
	r.Raw = sc.s[start:sc.i]
	return r, ok
}

// scalar is adyenValue of the scalar at sc.i.
func (sc *adyenScanner) scalar(dst *string) bool {
	r, ok := sc.value()
	if ok {
		*dst = adyenValue(r)
	}
	return ok
}

func (sc *adyenScanner) lit(word string) bool {
	if !strings.HasPrefix(sc.s[sc.i:], word) {
		return false
	}
	sc.i += len(word)
	return true
}

// number reads a number in RFC 8259's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc *adyenScanner) number() bool {
	s, i := sc.s, sc.i
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	sc.i = i
	return true
}

// skip reads any JSON value at sc.i; depth is the nesting of the value.
func (sc *adyenScanner) skip(depth int) bool {
	if depth > adyenScanDepth {
		return false
	}
	switch sc.peek() {
	case '{':
		sc.i++
		return sc.members(func(string) bool { return sc.skip(depth + 1) })
	case '[':
		sc.i++
		return sc.elements(func() bool { return sc.skip(depth + 1) })
	}
	_, ok := sc.value()
	return ok
}

// elements reads the elements of an array whose "[" has been read, through its "]", calling
// element at the start of each.
func (sc *adyenScanner) elements(element func() bool) bool {
	if sc.eat(']') {
		return true
	}
	for {
		if sc.peek() == 0 || !element() {
			return false
		}
		if sc.eat(']') {
			return true
		}
		if !sc.eat(',') {
			return false
		}
	}
}

// items reads the notificationItems array at sc.i into b.
func (sc *adyenScanner) items(b *adyenBatch) bool {
	sc.i++ // "["
	return sc.elements(func() bool {
		b.n++
		if sc.s[sc.i] != '{' {
			return false
		}
		sc.i++
		var it adyenItem
		found := false
		ok := sc.members(func(key string) bool {
			if found || key != "NotificationRequestItem" {
				return sc.skip(3)
			}
			found = true
			return sc.item(&it)
		})
		if ok && b.n <= maxAdyenItems {
			b.items = append(b.items, it)
		}
		return ok
	})
}

// item reads a NotificationRequestItem object as adyenRead does: the first of duplicate keys
// counts.
func (sc *adyenScanner) item(it *adyenItem) bool {
	if sc.s[sc.i] != '{' {
		return false
	}
	sc.i++
	var seen [len(adyenFields) + 2]bool // the plain fields, then amount and additionalData
	field := func(i int) bool {
		if seen[i] {
			return sc.skip(4)
		}
		seen[i] = true
		if c := sc.s[sc.i]; c == '{' || c == '[' {
			// An object or array field is empty in the signed string.
			return sc.skip(4)
		}
		return sc.scalar(&it.vals[i])
	}
	return sc.members(func(key string) bool {
		switch key {
		case "pspReference":
			return field(0)
		case "originalReference":
			return field(1)
		case "merchantAccountCode":
			return field(2)
		case "merchantReference":
			return field(3)
		case "eventCode":
			return field(6)
		case "success":
			return field(7)
		case "amount":
			if seen[8] {
				return sc.skip(4)
			}
			seen[8] = true
			return sc.object(func(key string) bool {
				switch key {
				case "value":
					if !seen[4] {
						seen[4] = true
						return sc.nested(&it.vals[4])
					}
				case "currency":
					if !seen[5] {
						seen[5] = true
						return sc.nested(&it.vals[5])
					}
				}
				return sc.skip(5)
			})
		case "additionalData":
			if seen[9] {
				return sc.skip(4)
			}
			seen[9] = true
			sigSeen := false
			return sc.object(func(key string) bool {
				if sigSeen || key != "hmacSignature" {
					return sc.skip(5)
				}
				sigSeen = true
				return sc.sig(&it.sig)
			})
		}
		return sc.skip(4)
	})
}

// object reads an object at sc.i member by member, and refuses anything else: gjson's lookups
// inside a string or array have their own rules.
func (sc *adyenScanner) object(member func(key string) bool) bool {
	if sc.s[sc.i] != '{' {
		return false
	}
	sc.i++
	return sc.members(member)
}

// nested reads a value inside amount, as adyenValue reads it.
func (sc *adyenScanner) nested(dst *string) bool {
	if c := sc.s[sc.i]; c == '{' || c == '[' {
		return sc.skip(5)
	}
	return sc.scalar(dst)
}

// sig reads the hmacSignature value as gjson's Get returns it: Type and Raw, and Str for a
// string.
func (sc *adyenScanner) sig(r *gjson.Result) bool {
	start := sc.i
	if c := sc.s[sc.i]; c == '{' || c == '[' {
		if !sc.skip(5) {
			return false
		}
		*r = gjson.Result{Type: gjson.JSON, Raw: sc.s[start:sc.i]}
		return true
	}
	v, ok := sc.value()
	*r = gjson.Result{Type: v.Type, Raw: v.Raw, Str: v.Str}
	return ok
}
