package ledger

import (
	"encoding/json"
	"math"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// fastDecodeDocument decodes raw into the zero document d as json.Unmarshal
// would. It reports false on anything it does not fully understand,
// including every invalid input; d is then in an unspecified state and the
// caller must reset it and use encoding/json.
func fastDecodeDocument(raw []byte, d *document) bool {
	p := &parser{buf: raw}
	if !p.document(d) {
		return false
	}
	p.ws()
	return p.i == len(p.buf)
}

type parser struct {
	buf []byte
	i   int
	// scope is the document's scope once read, reused for entries' scopes;
	// intent and runID are the last ones read. Entries mostly repeat them,
	// so reusing the string saves an allocation per entry.
	scope, intent, runID string
}

func (p *parser) ws() {
	for p.i < len(p.buf) {
		switch p.buf[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (p *parser) peek() byte {
	p.ws()
	if p.i < len(p.buf) {
		return p.buf[p.i]
	}
	return 0
}

func (p *parser) lit(s string) bool {
	if len(p.buf)-p.i >= len(s) && string(p.buf[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// null consumes a null literal if one is next.
func (p *parser) null() bool {
	return p.peek() == 'n' && p.lit("null")
}

// object parses an object, calling field for each key with the parser at
// the value. Keys must be plain ASCII without escapes (anything else could
// need encoding/json's case folding or unescaping); field must consume the
// value.
func (p *parser) object(field func(key []byte) bool) bool {
	return members(p, p.plainKey, field)
}

// members parses an object whose keys key reads, calling value for each
// with the parser at the value.
func members[K any](p *parser, key func() (K, bool), value func(K) bool) bool {
	if p.peek() != '{' {
		return false
	}
	p.i++
	if p.peek() == '}' {
		p.i++
		return true
	}
	for {
		k, ok := key()
		if !ok || p.peek() != ':' {
			return false
		}
		p.i++
		p.ws()
		if !value(k) {
			return false
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

// plainKey reads a field name: see object.
func (p *parser) plainKey() ([]byte, bool) {
	if p.peek() != '"' {
		return nil, false
	}
	return p.rawKey()
}

// rawKey reads a quoted key made of printable ASCII without escapes.
func (p *parser) rawKey() ([]byte, bool) {
	start := p.i + 1
	for j := start; j < len(p.buf); j++ {
		c := p.buf[j]
		if c == '"' {
			p.i = j + 1
			return p.buf[start:j], true
		}
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return nil, false
		}
	}
	return nil, false
}

// mapKey reads a map key as a string (any valid JSON string).
func (p *parser) mapKey() (string, bool) {
	if p.peek() != '"' {
		return "", false
	}
	return p.str()
}

// str reads a JSON string. It gives up on invalid UTF-8 and unpaired
// surrogates, which encoding/json replaces with U+FFFD.
func (p *parser) str() (string, bool) {
	b, ok := p.strBytes(nil)
	if !ok {
		return "", false
	}
	if p.scope != "" && string(b) == p.scope {
		return p.scope, true
	}
	return string(b), true
}

// strBytes reads a JSON string at p.i and returns its contents: a slice of
// the input when it has no escapes, else appended to scratch.
func (p *parser) strBytes(scratch []byte) ([]byte, bool) {
	if p.i >= len(p.buf) || p.buf[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	j := start
	ascii := true
	for ; j < len(p.buf); j++ {
		c := p.buf[j]
		if c == '"' {
			if !ascii && !utf8.Valid(p.buf[start:j]) {
				return nil, false
			}
			p.i = j + 1
			return p.buf[start:j], true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if j >= len(p.buf) {
		return nil, false
	}
	// Slow path: escapes.
	out := append(scratch[:0], p.buf[start:j]...)
	for j < len(p.buf) {
		c := p.buf[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return nil, false
			}
			p.i = j + 1
			return out, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(p.buf) {
			return nil, false
		}
		e := p.buf[j+1]
		j += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.buf, j)
			if !ok {
				return nil, false
			}
			j += 4
			if utf16.IsSurrogate(r) {
				if j+6 > len(p.buf) || p.buf[j] != '\\' || p.buf[j+1] != 'u' {
					return nil, false
				}
				r2, ok := hex4(p.buf, j+2)
				if !ok {
					return nil, false
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return nil, false
				}
				j += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func hex4(b []byte, j int) (rune, bool) {
	if j+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[j : j+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// digits reads a JSON integer (no fraction or exponent) and returns its
// sign and magnitude; ok is false on anything else or past uint64.
func (p *parser) digits() (neg bool, v uint64, ok bool) {
	j := p.i
	if j < len(p.buf) && p.buf[j] == '-' {
		neg = true
		j++
	}
	start := j
	for ; j < len(p.buf) && '0' <= p.buf[j] && p.buf[j] <= '9'; j++ {
		d := uint64(p.buf[j] - '0')
		if v > (math.MaxUint64-d)/10 {
			return false, 0, false // overflows; let encoding/json report it
		}
		v = v*10 + d
	}
	n := j - start
	if n == 0 || (n > 1 && p.buf[start] == '0') {
		return false, 0, false
	}
	if j < len(p.buf) {
		switch p.buf[j] {
		case '.', 'e', 'E':
			return false, 0, false
		}
	}
	p.i = j
	return neg, v, true
}

// uintField decodes into a uint64; null leaves it unchanged.
func (p *parser) uintField(dst *uint64) bool {
	if p.null() {
		return true
	}
	neg, v, ok := p.digits()
	if !ok || neg {
		return false
	}
	*dst = v
	return true
}

func (p *parser) int64Field(dst *int64) bool {
	if p.null() {
		return true
	}
	neg, v, ok := p.digits()
	switch {
	case !ok || v > math.MaxInt64+1 || !neg && v > math.MaxInt64:
		return false
	case neg:
		*dst = -int64(v) // -(MinInt64) wraps back to MinInt64
	default:
		*dst = int64(v)
	}
	return true
}

func (p *parser) intField(dst *int) bool {
	v := int64(*dst)
	if !p.int64Field(&v) {
		return false
	}
	if int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

// internedField decodes a string, reusing *last when equal.
func (p *parser) internedField(dst, last *string) bool {
	if p.null() {
		return true
	}
	b, ok := p.strBytes(nil)
	if !ok {
		return false
	}
	if string(b) != *last {
		*last = string(b)
	}
	*dst = *last
	return true
}

func (p *parser) stringField(dst *string) bool {
	if p.null() {
		return true
	}
	s, ok := p.str()
	if ok {
		*dst = s
	}
	return ok
}

func (p *parser) boolField(dst *bool) bool {
	switch p.peek() {
	case 't':
		if p.lit("true") {
			*dst = true
			return true
		}
	case 'f':
		if p.lit("false") {
			*dst = false
			return true
		}
	case 'n':
		return p.lit("null")
	}
	return false
}

// timeField decodes a time as time.Time.UnmarshalJSON does, with a fast
// path for UTC timestamps.
func (p *parser) timeField(dst *time.Time) bool {
	if p.null() {
		return true // UnmarshalJSON ignores null
	}
	start := p.i
	if _, ok := p.strBytes(nil); !ok {
		return false
	}
	q := p.buf[start:p.i]
	if t, ok := parseUTC(q); ok {
		*dst = t
		return true
	}
	return dst.UnmarshalJSON(q) == nil
}

// parseUTC parses "YYYY-MM-DDTHH:MM:SS[.fffffffff]Z" including quotes.
func parseUTC(q []byte) (time.Time, bool) {
	if len(q) < len(`"2006-01-02T15:04:05Z"`) || q[len(q)-2] != 'Z' {
		return time.Time{}, false
	}
	s := q[1 : len(q)-2]
	num := func(b []byte) (int, bool) {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := num(s[0:4])
	month, ok2 := num(s[5:7])
	day, ok3 := num(s[8:10])
	hour, ok4 := num(s[11:13])
	minute, ok5 := num(s[14:16])
	sec, ok6 := num(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return time.Time{}, false
	}
	if month < 1 || month > 12 || day < 1 || day > 28 && day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[19:]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		n, ok := num(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// rawField decodes a json.RawMessage: a copy of the value's bytes.
func (p *parser) rawField(dst *json.RawMessage) bool {
	p.ws()
	start := p.i
	if !p.skip(0) {
		return false
	}
	*dst = append(json.RawMessage(nil), p.buf[start:p.i]...)
	return true
}

// skip validates and skips one JSON value.
func (p *parser) skip(depth int) bool {
	if depth > 1000 {
		return false
	}
	switch p.peek() {
	case '{':
		p.i++
		if p.peek() == '}' {
			p.i++
			return true
		}
		for {
			if p.peek() != '"' || !p.skipString() || p.peek() != ':' {
				return false
			}
			p.i++
			if !p.skip(depth + 1) {
				return false
			}
			switch p.peek() {
			case ',':
				p.i++
			case '}':
				p.i++
				return true
			default:
				return false
			}
		}
	case '[':
		p.i++
		if p.peek() == ']' {
			p.i++
			return true
		}
		for {
			if !p.skip(depth + 1) {
				return false
			}
			switch p.peek() {
			case ',':
				p.i++
			case ']':
				p.i++
				return true
			default:
				return false
			}
		}
	case '"':
		return p.skipString()
	case 't':
		return p.lit("true")
	case 'f':
		return p.lit("false")
	case 'n':
		return p.lit("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return p.skipNumber()
	}
	return false
}

// skipString skips a JSON string without checking UTF-8, as the
// encoding/json scanner does.
func (p *parser) skipString() bool {
	j := p.i + 1
	for j < len(p.buf) {
		c := p.buf[j]
		switch {
		case c == '"':
			p.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if j+1 >= len(p.buf) {
				return false
			}
			switch p.buf[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if _, ok := hex4(p.buf, j+2); !ok {
					return false
				}
				j += 6
			default:
				return false
			}
		default:
			j++
		}
	}
	return false
}

func (p *parser) skipNumber() bool {
	b, j := p.buf, p.i
	isDigit := func(j int) bool { return j < len(b) && '0' <= b[j] && b[j] <= '9' }
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case isDigit(j):
		for isDigit(j) {
			j++
		}
	default:
		return false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if !isDigit(j) {
			return false
		}
		for isDigit(j) {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !isDigit(j) {
			return false
		}
		for isDigit(j) {
			j++
		}
	}
	p.i = j
	return true
}

// unknown skips the value of a key the type does not declare. A key that
// case-folds to a declared one would be matched by encoding/json, so the
// fast path gives up on it.
func (p *parser) unknown(key []byte, fields []string) bool {
	for _, f := range fields {
		if strings.EqualFold(string(key), f) {
			return false
		}
	}
	return p.skip(0)
}

var (
	documentFields = []string{"format", "scope", "seq", "token", "expiresAt", "holder", "runs", "entries",
		"landedBase", "landings"}
	runFields = []string{"id", "mode", "token", "delivery", "contextAt", "seenSeq", "acks", "leaseUntil",
		"lastActive", "wrote", "ended", "cancelled", "endedAt", "endReason", "lostLease", "leaseTtl"}
	entryFields = []string{"id", "scope", "intent", "payload", "summary", "state", "attempt", "failures",
		"maxAttempts", "runId", "token", "delivery", "claimedAt", "pendingTtl", "redeliverable", "settledAt",
		"landedSeq", "value", "error", "abandoned", "lateSettle", "resolvedBy"}
)

func (p *parser) document(d *document) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "format":
			return p.intField(&d.Format)
		case "scope":
			if !p.stringField(&d.Scope) {
				return false
			}
			p.scope = d.Scope
			return true
		case "seq":
			return p.uintField(&d.Seq)
		case "token":
			return p.uintField(&d.Token)
		case "expiresAt":
			return p.timeField(&d.ExpiresAt)
		case "holder":
			return p.stringField(&d.Holder)
		case "runs":
			return pointerMap(p, &d.Runs, func(r *runState, _ string) bool { return p.run(r) })
		case "entries":
			return pointerMap(p, &d.Entries, p.entry)
		case "landedBase":
			return p.uintField(&d.LandedBase)
		case "landings":
			return p.landings(&d.Landings)
		}
		return p.unknown(key, documentFields)
	})
}

// mapOf parses an object with arbitrary string keys.
func (p *parser) mapOf(value func(k string) bool) bool {
	return members(p, p.mapKey, value)
}

func (p *parser) run(r *runState) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return p.stringField(&r.ID)
		case "mode":
			return enumField(p, &r.Mode, ModeSupersede, ModeExclusive, ModeIndependent)
		case "token":
			return p.uintField(&r.Token)
		case "delivery":
			return p.intField(&r.Delivery)
		case "contextAt":
			return p.timeField(&r.ContextAt)
		case "seenSeq":
			return p.uintField(&r.SeenSeq)
		case "acks":
			return p.acks(&r.Acks)
		case "leaseUntil":
			return p.timeField(&r.LeaseUntil)
		case "lastActive":
			return p.timeField(&r.LastActive)
		case "wrote":
			return p.boolField(&r.Wrote)
		case "ended":
			return p.boolField(&r.Ended)
		case "cancelled":
			return p.boolField(&r.Cancelled)
		case "endedAt":
			return p.timeField(&r.EndedAt)
		case "endReason":
			return p.stringField(&r.EndReason)
		case "lostLease":
			return p.boolField(&r.LostLease)
		case "leaseTtl":
			v := int64(r.LeaseTTL)
			if !p.int64Field(&v) {
				return false
			}
			r.LeaseTTL = time.Duration(v)
			return true
		}
		return p.unknown(key, runFields)
	})
}

// enumField reads a string that is usually one of known, reusing the
// constant instead of allocating; anything else is kept as read.
func enumField[T ~string](p *parser, dst *T, known ...T) bool {
	if p.null() {
		return true
	}
	b, ok := p.strBytes(nil)
	if !ok {
		return false
	}
	for _, k := range known {
		if string(b) == string(k) {
			*dst = k
			return true
		}
	}
	*dst = T(b)
	return true
}

func (p *parser) landings(dst *[]landing) bool {
	if p.null() {
		*dst = nil
		return true
	}
	if p.peek() != '[' {
		return false
	}
	p.i++
	out := []landing{}
	if p.peek() == ']' {
		p.i++
		*dst = out
		return true
	}
	for {
		var l landing
		ok := p.object(func(key []byte) bool {
			switch string(key) {
			case "seq":
				return p.uintField(&l.Seq)
			case "at":
				return p.timeField(&l.At)
			}
			return p.unknown(key, landingFields)
		})
		if !ok {
			return false
		}
		out = append(out, l)
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			*dst = out
			return true
		default:
			return false
		}
	}
}

var landingFields = []string{"seq", "at"}

func (p *parser) acks(dst *[]string) bool {
	if p.null() {
		*dst = nil
		return true
	}
	if p.peek() != '[' {
		return false
	}
	p.i++
	out := []string{}
	if p.peek() == ']' {
		p.i++
		*dst = out
		return true
	}
	for {
		if p.peek() != '"' {
			// encoding/json would leave a null element as ""; keep it simple.
			return false
		}
		s, ok := p.str()
		if !ok {
			return false
		}
		out = append(out, s)
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			*dst = out
			return true
		default:
			return false
		}
	}
}

func (p *parser) entry(e *Entry, mapKey string) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			if p.null() {
				return true
			}
			b, ok := p.strBytes(nil)
			if !ok {
				return false
			}
			if string(b) == mapKey {
				e.ID = mapKey
			} else {
				e.ID = string(b)
			}
			return true
		case "scope":
			return p.stringField(&e.Scope)
		case "intent":
			return p.internedField(&e.Intent, &p.intent)
		case "payload":
			return p.rawField(&e.Payload)
		case "summary":
			return p.stringField(&e.Summary)
		case "state":
			return enumField(p, &e.State, StatePending, StateCommitted, StateFailed, StateAmbiguous)
		case "attempt":
			return p.intField(&e.Attempt)
		case "failures":
			return p.intField(&e.Failures)
		case "maxAttempts":
			return p.intField(&e.MaxAttempts)
		case "runId":
			return p.internedField(&e.RunID, &p.runID)
		case "token":
			return p.uintField(&e.Token)
		case "delivery":
			return p.intField(&e.Delivery)
		case "claimedAt":
			return p.timeField(&e.ClaimedAt)
		case "pendingTtl":
			v := int64(e.PendingTTL)
			if !p.int64Field(&v) {
				return false
			}
			e.PendingTTL = time.Duration(v)
			return true
		case "redeliverable":
			return p.boolField(&e.Redeliverable)
		case "settledAt":
			return p.timeField(&e.SettledAt)
		case "landedSeq":
			return p.uintField(&e.LandedSeq)
		case "value":
			return p.rawField(&e.Value)
		case "error":
			return p.stringField(&e.Error)
		case "abandoned":
			return p.boolField(&e.Abandoned)
		case "lateSettle":
			return p.boolField(&e.LateSettle)
		case "resolvedBy":
			return p.stringField(&e.ResolvedBy)
		}
		return p.unknown(key, entryFields)
	})
}

// pointerMap decodes a JSON object of objects into *m as encoding/json
// would into a map[string]*V: null clears the map, a null member is a nil
// entry, and members are added to a map that already exists.
func pointerMap[V any](p *parser, m *map[string]*V, decode func(v *V, key string) bool) bool {
	if p.null() {
		*m = nil
		return true
	}
	if *m == nil {
		*m = map[string]*V{}
	}
	return p.mapOf(func(k string) bool {
		if p.null() {
			(*m)[k] = nil
			return true
		}
		v := new(V)
		if !decode(v, k) {
			return false
		}
		(*m)[k] = v
		return true
	})
}
