package ledger

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCanonicalHashing(t *testing.T) {
	a := Key{Scope: "s", Intent: "refund", Payload: map[string]any{"order": "A-1", "cents": 2500, "meta": map[string]any{"b": 1, "a": 2}}}
	b := Key{Scope: "s", Intent: "refund", Payload: json.RawMessage(`{"meta":{"a":2,"b":1},"cents":2500,"order":"A-1"}`)}
	type refund struct {
		Order string         `json:"order"`
		Cents int            `json:"cents"`
		Meta  map[string]int `json:"meta"`
	}
	c := Key{Scope: "s", Intent: "refund", Payload: refund{Order: "A-1", Cents: 2500, Meta: map[string]int{"b": 1, "a": 2}}}
	ka, _ := IdempotencyKey(a)
	kb, _ := IdempotencyKey(b)
	kc, _ := IdempotencyKey(c)
	if ka != kb || ka != kc {
		t.Fatalf("same payload in other key orders hashed differently: %s %s %s", ka, kb, kc)
	}
	for name, other := range map[string]Key{
		"another value":  {Scope: "s", Intent: "refund", Payload: map[string]any{"order": "A-1", "cents": 2501, "meta": map[string]any{"b": 1, "a": 2}}},
		"another intent": {Scope: "s", Intent: "charge", Payload: a.Payload},
		"another scope":  {Scope: "t", Intent: "refund", Payload: a.Payload},
	} {
		if k, _ := IdempotencyKey(other); k == ka {
			t.Errorf("%s hashed the same", name)
		}
	}
	if _, err := IdempotencyKey(Key{Scope: "s", Intent: "x", Payload: json.RawMessage(`{bad`)}); err == nil {
		t.Error("invalid JSON payload accepted")
	}
}

// The fast path for flat string maps and the general path agree, HTML
// characters included.
func TestCanonicalFastPathAgrees(t *testing.T) {
	for _, payload := range []any{
		map[string]string{"source": "stripe", "eventId": "evt_<1>&", "z": "", "a": "é"},
		map[string]string{"lone continuation byte": "a\x80b", "lead byte": "\xc3"},
		"plain <string>", true, 42, int64(-7),
	} {
		fast, err := legacyCanonicalJSON(payload)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(payload)
		slow, err := legacyCanonicalJSON(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if string(fast) != string(slow) {
			t.Errorf("%v: fast %s, general %s", payload, fast, slow)
		}
	}
}

// generalCanonical is legacyCanonicalJSON's general path, forced: marshal, decode
// into generic values with numbers kept as written, encode.
func generalCanonical(t testing.TB, v any) (string, bool) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	c, err := legacyCanonicalJSON(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("general path refused %s: %v", raw, err)
	}
	return string(c), true
}

// The direct path writes the bytes the general path writes, for every shape
// it accepts, and declines what the general path refuses. Ids of stored
// entries depend on these bytes.
func TestCanonicalDirectPathAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	strs := []string{"", "a", "evt_<1>&", "é", "\u2028x\u2029", "tab\tnl\n\"q\"\\", "\x00\x1f\x7f", "bad\xffutf8", "\xc3", "\ufffd", "日本"}
	floats := []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e-7, 1.5e-9, 1e20, 1e21, 123456789e15, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, 1.0 / 3}
	var gen func(depth int) any
	gen = func(depth int) any {
		switch n := rng.IntN(14); {
		case n == 0:
			return nil
		case n == 1:
			return rng.IntN(2) == 0
		case n == 2:
			return strs[rng.IntN(len(strs))]
		case n == 3:
			return floats[rng.IntN(len(floats))]
		case n == 4:
			return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(50)-25))
		case n == 5:
			return rng.Int64() - rng.Int64()
		case n == 6:
			return rng.Uint64()
		case n == 7:
			return int(rng.Int32())
		case n == 8:
			m := map[string]string{}
			for range rng.IntN(4) {
				m[strs[rng.IntN(len(strs))]] = strs[rng.IntN(len(strs))]
			}
			if rng.IntN(5) == 0 {
				m = nil
			}
			return m
		case n < 12 && depth < 4:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[strs[rng.IntN(len(strs))]+strconv.Itoa(rng.IntN(3))] = gen(depth + 1)
			}
			if rng.IntN(8) == 0 {
				m = nil
			}
			return m
		case depth < 4:
			s := make([]any, rng.IntN(4))
			for i := range s {
				s[i] = gen(depth + 1)
			}
			if rng.IntN(8) == 0 {
				s = nil
			}
			return s
		}
		return strs[rng.IntN(len(strs))]
	}
	direct := 0
	for i := range 5000 {
		v := gen(0)
		got, ok := appendCanonical(nil, v, 0)
		want, valid := generalCanonical(t, v)
		if !ok {
			if valid && !hasNonFinite(v) && !hasInvalidKey(v) {
				t.Fatalf("case %d: direct path declined %#v", i, v)
			}
			continue
		}
		direct++
		if !valid {
			t.Fatalf("case %d: direct path wrote %s for a value the general path refuses: %#v", i, got, v)
		}
		if string(got) != want {
			t.Fatalf("case %d: %#v\n direct  %s\n general %s", i, v, got, want)
		}
	}
	if direct < 4000 {
		t.Fatalf("only %d of 5000 values took the direct path", direct)
	}
	// Non-finite floats and values it does not know go the general way,
	// which refuses the former with an error.
	for _, v := range []any{math.NaN(), map[string]any{"x": math.Inf(1)}} {
		if _, ok := appendCanonical(nil, v, 0); ok {
			t.Errorf("direct path accepted %v", v)
		}
		if _, err := legacyCanonicalJSON(v); err == nil {
			t.Errorf("legacyCanonicalJSON accepted %v", v)
		}
	}
	deep := any("leaf")
	for range maxCanonicalDepth + 5 {
		deep = []any{deep}
	}
	if _, ok := appendCanonical(nil, deep, 0); ok {
		t.Error("direct path took a value deeper than its bound")
	}
	if c, err := legacyCanonicalJSON(deep); err != nil || !strings.Contains(string(c), `"leaf"`) {
		t.Errorf("deep value: %s, %v", c, err)
	}
}

func hasInvalidKey(v any) bool {
	switch t := v.(type) {
	case map[string]string:
		for k := range t {
			if !utf8.ValidString(k) {
				return true
			}
		}
	case map[string]any:
		for k, e := range t {
			if !utf8.ValidString(k) || hasInvalidKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasInvalidKey(e) {
				return true
			}
		}
	}
	return false
}

func hasNonFinite(v any) bool {
	switch t := v.(type) {
	case float64:
		return math.IsNaN(t) || math.IsInf(t, 0)
	case map[string]any:
		for _, e := range t {
			if hasNonFinite(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasNonFinite(e) {
				return true
			}
		}
	}
	return false
}

// Whatever JSON a caller decodes and passes back, the direct path agrees
// with the general one.
func FuzzCanonicalDirectPath(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x<"]}`, `1e-7`, `"\u2028"`, `[1.5e300,-0,{"":{}}]`, `{"k":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		got, ok := appendCanonical(nil, v, 0)
		if !ok {
			return // deeper than the bound
		}
		want, valid := generalCanonical(t, v)
		if !valid || string(got) != want {
			t.Fatalf("%s: direct %s, general %s", data, got, want)
		}
	})
}

// Stored entries are found again by these ids: a change to the hashing or
// to the canonical bytes would let a redelivery that straddles an upgrade
// run twice. The values were produced by the release before the direct
// path; the last one is the general path's answer, which the string-map
// shortcut of that release did not give for invalid UTF-8.
// Ids are pinned: they are the idempotency keys effects already sent to
// providers, and stored entries are found by them. Changing one is a
// format change with a compatibility path and a CHANGELOG entry. The
// format 2 ids below replaced format 1's deliberately (RFC 8785 payloads,
// framed fields); the format 1 ids stay pinned too, since claims still
// find entries stored under them.
func TestIdempotencyKeysAreStable(t *testing.T) {
	for _, c := range []struct {
		key       Key
		want, was string
	}{
		{Key{Scope: "stripe:evt_1", Intent: "deliver", Payload: map[string]any{"source": "stripe", "event_id": "evt_1"}}, "ro_92e4e00156f2e463b95c02629c23a10f", "ro_f615da233e3636a5a1e92766adee5745"},
		{Key{Scope: "stripe:evt_1", Intent: "deliver", Payload: map[string]string{"source": "stripe", "event_id": "evt_1"}}, "ro_92e4e00156f2e463b95c02629c23a10f", "ro_f615da233e3636a5a1e92766adee5745"},
		{Key{Scope: "conv:42", Intent: "reply", Payload: map[string]any{"message": "m<1>", "n": 2.5, "tags": []any{"a", nil, true}}}, "ro_0f316d258b695b9118fa0f0e48c35afb", "ro_8c8ab7567052b97ded7ae38a34f85a8f"},
		{Key{Scope: "conv:42", Intent: "reply", Payload: json.RawMessage(`{"tags":["a",null,true],"n":2.5,"message":"m\u003c1>"}`)}, "ro_0f316d258b695b9118fa0f0e48c35afb", "ro_8c8ab7567052b97ded7ae38a34f85a8f"},
		{Key{Scope: "s", Intent: "x", Payload: map[string]string{"k": "bad\xffv"}}, "ro_" + entryID("s", "x", []byte("{\"k\":\"bad\ufffdv\"}")), "ro_" + legacyEntryID("s", "x", []byte("{\"k\":\"bad\ufffdv\"}"))},
		{Key{Scope: "s", Intent: "x", Payload: map[string]any{"k": "bad\xffv"}}, "ro_" + entryID("s", "x", []byte("{\"k\":\"bad\ufffdv\"}")), "ro_" + legacyEntryID("s", "x", []byte("{\"k\":\"bad\ufffdv\"}"))},
	} {
		got, err := IdempotencyKey(c.key)
		if err != nil || got != c.want {
			t.Errorf("%+v: got %s (%v), want %s", c.key, got, err, c.want)
		}
		k, err := resolveKey(c.key)
		if err != nil {
			t.Fatal(err)
		}
		if was := idempotencyKeyFor(legacyEntryID(k.scope, k.intent, k.legacyPayload)); was != c.was {
			t.Errorf("%+v: format 1 key %s, want %s", c.key, was, c.was)
		}
	}
}

// Fields are framed, so moving a byte from the scope to the intent makes
// another effect. Format 1 joined them with NUL and gave both one id.
func TestEntryIDFramesItsFields(t *testing.T) {
	a := Key{Scope: "a\x00b", Intent: "c", Payload: "p"}
	b := Key{Scope: "a", Intent: "b\x00c", Payload: "p"}
	ka, _ := IdempotencyKey(a)
	kb, _ := IdempotencyKey(b)
	if ka == kb {
		t.Fatalf("scope %q intent %q and scope %q intent %q share idempotency key %s", a.Scope, a.Intent, b.Scope, b.Intent, ka)
	}
	if legacyEntryID(a.Scope, a.Intent, []byte(`"p"`)) != legacyEntryID(b.Scope, b.Intent, []byte(`"p"`)) {
		t.Error("format 1 ids should collide here; the test no longer shows the bug it guards against")
	}
	// Without any separator a byte moved across a boundary would collide too.
	for _, pair := range [][2]Key{
		{{Scope: "ab", Intent: "c", Payload: "p"}, {Scope: "a", Intent: "bc", Payload: "p"}},
		{{Scope: "s", Intent: "refund1", Payload: 2}, {Scope: "s", Intent: "refund", Payload: 12}},
	} {
		k0, _ := IdempotencyKey(pair[0])
		k1, _ := IdempotencyKey(pair[1])
		if k0 == k1 {
			t.Errorf("%+v and %+v share idempotency key %s", pair[0], pair[1], k0)
		}
	}
}

// One value is one effect whatever language spelled its numbers.
func TestPayloadNumbersAreOneValueHoweverWritten(t *testing.T) {
	want, err := IdempotencyKey(Key{Scope: "s", Intent: "refund", Payload: map[string]any{"cents": 2500}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []any{
		json.RawMessage(`{"cents":2500.0}`), json.RawMessage(`{"cents":2.5e3}`), json.RawMessage(`{ "cents" : 25E2 }`),
		map[string]any{"cents": 2500.0}, map[string]int64{"cents": 2500}, map[string]any{"cents": json.Number("2500.000")},
	} {
		if got, err := IdempotencyKey(Key{Scope: "s", Intent: "refund", Payload: p}); err != nil || got != want {
			t.Errorf("%v: key %s (%v), want %s as for 2500", p, got, err, want)
		}
	}
	if other, _ := IdempotencyKey(Key{Scope: "s", Intent: "refund", Payload: map[string]any{"cents": 2501}}); other == want {
		t.Error("2501 and 2500 share a key")
	}
	// The documented limit: past 2^53 a number is the double nearest it.
	big1, _ := IdempotencyKey(Key{Scope: "s", Intent: "x", Payload: json.RawMessage(`9007199254740993`)})
	big2, _ := IdempotencyKey(Key{Scope: "s", Intent: "x", Payload: json.RawMessage(`9007199254740992`)})
	if big1 != big2 {
		t.Error("integers beyond 2^53 are expected to round as RFC 8785 says; the doc's stated limit is wrong")
	}
}

// RFC 8785's own examples: section 3.2.2 (whitespace, literals, numbers,
// strings), section 3.2.3 (sorting by UTF-16 code units) and Appendix B
// (ECMAScript number serialisation, given as IEEE 754 bit patterns).
func TestCanonicalJSONMatchesRFC8785Vectors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
	} {
		got, _, err := canonicalJSON(json.RawMessage(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("canonical form of %s:\n got %s (%v)\nwant %s", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"}, {0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"}, {0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"}, {0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"}, {0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"}, {0x44b52d02c7e14af6, "1e+23"}, {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"}, {0x444b1ae4d6e2ef4f, "999999999999999900000"}, {0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"}, {0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"}, {0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"}, {0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"}, {0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		f := math.Float64frombits(c.bits)
		got, _, err := canonicalJSON(f)
		if err != nil || string(got) != c.want {
			t.Errorf("%#016x: got %s (%v), want %s", c.bits, got, err, c.want)
		}
		// The same double written another way (Go's shortest 'g' form) is
		// the same canonical number.
		raw := json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64))
		if got, _, err := canonicalJSON(raw); err != nil || string(got) != c.want {
			t.Errorf("%s: got %s (%v), want %s", raw, got, err, c.want)
		}
	}
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000} {
		if _, _, err := canonicalJSON(math.Float64frombits(bits)); err == nil {
			t.Errorf("%#016x (NaN or infinity) accepted", bits)
		}
	}
}

// A string map whose keys and values are ASCII skips the second parse
// (canonicalJSON's shortcut); every string map, inside the shortcut or
// not, is canonicalised as the same map sent as raw JSON, which always
// takes jcs.Transform. The ASCII alphabet holds every kind of escape; the
// other holds what the shortcut must leave to Transform: U+2028, keys
// that sort differently in UTF-16 (an emoji against U+FB33 and U+FFFD),
// and invalid UTF-8.
func TestCanonicalStringMapShortcutIsRFC8785(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 8785))
	ascii := []string{"a", "Z", "0", " ", "~", "\"", "\\", "/", "<", "evt_", "{}", "\t", "\n", "\x01", "\x1f", "\x7f"}
	other := []string{"\u2028", "é", "😀", "\ufb33", "\ufffd", "\xff"}
	str := func(alphabet []string) string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	shortcut := 0
	for i := range 3000 {
		alphabet := ascii
		if i%3 == 0 {
			alphabet = append(append([]string{}, ascii...), other...)
		}
		m := map[string]string{}
		for range rng.IntN(5) {
			m[str(alphabet)] = str(alphabet)
		}
		if allASCII(m) {
			shortcut++
		}
		got, legacy, err := canonicalJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(m)
		want, wantLegacy, err := canonicalJSON(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) || string(legacy) != string(wantLegacy) {
			t.Fatalf("%q: canonical %s, legacy %s; through jcs.Transform %s, %s", m, got, legacy, want, wantLegacy)
		}
	}
	if shortcut < 1000 || shortcut > 2900 {
		t.Fatalf("%d of 3000 maps took the shortcut: the test no longer tries both paths", shortcut)
	}
}

// A payload that contains itself is refused, not followed forever.
func TestCyclicPayloadIsRefused(t *testing.T) {
	m := map[string]any{"a": 1}
	m["self"] = m
	if _, err := IdempotencyKey(Key{Scope: "s", Intent: "x", Payload: m}); err == nil {
		t.Error("a payload containing itself was hashed")
	}
}
