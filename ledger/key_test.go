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
		"plain <string>", true, 42, int64(-7),
	} {
		fast, err := canonicalJSON(payload)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(payload)
		slow, err := canonicalJSON(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if string(fast) != string(slow) {
			t.Errorf("%v: fast %s, general %s", payload, fast, slow)
		}
	}
}

// generalCanonical is canonicalJSON's general path, forced: marshal, decode
// into generic values with numbers kept as written, encode.
func generalCanonical(t testing.TB, v any) (string, bool) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	c, err := canonicalJSON(json.RawMessage(raw))
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
		if _, err := canonicalJSON(v); err == nil {
			t.Errorf("canonicalJSON accepted %v", v)
		}
	}
	deep := any("leaf")
	for range maxCanonicalDepth + 5 {
		deep = []any{deep}
	}
	if _, ok := appendCanonical(nil, deep, 0); ok {
		t.Error("direct path took a value deeper than its bound")
	}
	if c, err := canonicalJSON(deep); err != nil || !strings.Contains(string(c), `"leaf"`) {
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
func TestIdempotencyKeysAreStable(t *testing.T) {
	for _, c := range []struct {
		key  Key
		want string
	}{
		{Key{Scope: "stripe:evt_1", Intent: "deliver", Payload: map[string]any{"source": "stripe", "event_id": "evt_1"}}, "ro_f615da233e3636a5a1e92766adee5745"},
		{Key{Scope: "stripe:evt_1", Intent: "deliver", Payload: map[string]string{"source": "stripe", "event_id": "evt_1"}}, "ro_f615da233e3636a5a1e92766adee5745"},
		{Key{Scope: "conv:42", Intent: "reply", Payload: map[string]any{"message": "m<1>", "n": 2.5, "tags": []any{"a", nil, true}}}, "ro_8c8ab7567052b97ded7ae38a34f85a8f"},
		{Key{Scope: "conv:42", Intent: "reply", Payload: json.RawMessage(`{"tags":["a",null,true],"n":2.5,"message":"m\u003c1>"}`)}, "ro_8c8ab7567052b97ded7ae38a34f85a8f"},
		{Key{Scope: "s", Intent: "x", Payload: map[string]string{"k": "bad\xffv"}}, "ro_" + entryID("s", "x", []byte("{\"k\":\"bad\ufffdv\"}"))},
		{Key{Scope: "s", Intent: "x", Payload: map[string]any{"k": "bad\xffv"}}, "ro_" + entryID("s", "x", []byte("{\"k\":\"bad\ufffdv\"}"))},
	} {
		got, err := IdempotencyKey(c.key)
		if err != nil || got != c.want {
			t.Errorf("%+v: got %s (%v), want %s", c.key, got, err, c.want)
		}
	}
}
