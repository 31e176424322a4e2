package ledger

import (
	"encoding/json"
	"testing"
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
