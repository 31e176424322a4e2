package ledger

import (
	"encoding/json"
	"os"
	"testing"
)

// keyVector is one case of testdata/keys.json, the vectors the TypeScript
// and Python clients (clients/) check as well, so that a worker in any of
// the three languages names an effect by the same entry id.
type keyVector struct {
	Name           string `json:"name"`
	Scope          string `json:"scope"`
	Intent         string `json:"intent"`
	Payload        string `json:"payload"`
	Canonical      string `json:"canonical"`
	EntryID        string `json:"entry_id"`
	IdempotencyKey string `json:"idempotency_key"`
}

func TestSharedKeyVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/keys.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []keyVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 10 {
		t.Fatalf("only %d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		k, err := resolveKey(Key{Scope: v.Scope, Intent: v.Intent, Payload: json.RawMessage(v.Payload)})
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		if string(k.payload) != v.Canonical {
			t.Errorf("%s: canonical\n got %s\nwant %s", v.Name, k.payload, v.Canonical)
		}
		if k.id != v.EntryID {
			t.Errorf("%s: entry id %s, want %s", v.Name, k.id, v.EntryID)
		}
		// The public path from a decoded Go value, as a Go agent passes it.
		var decoded any
		if err := json.Unmarshal([]byte(v.Payload), &decoded); err != nil {
			t.Fatal(err)
		}
		if got, err := IdempotencyKey(Key{Scope: v.Scope, Intent: v.Intent, Payload: decoded}); err != nil || got != v.IdempotencyKey {
			t.Errorf("%s: idempotency key %s (%v), want %s", v.Name, got, err, v.IdempotencyKey)
		}
	}
}
