package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Key names one effect: what (Intent) is done to which business object
// (Payload) within which scope. Two keys with the same scope, intent and
// payload (in any map key order) are the same effect.
type Key struct {
	Scope   string
	Intent  string
	Payload any
}

// canonicalJSON renders v so that equal values give equal bytes: it goes
// through generic values, whose maps encoding/json writes in sorted key
// order, and keeps numbers exactly as first written.
func canonicalJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage("null"), nil
	}
	var raw []byte
	switch t := v.(type) {
	case string, bool, int, int64, map[string]string:
		// Already canonical as encoded: encoding/json writes map keys in
		// sorted order. The gateway's deliver payload takes this path on
		// every request, so it skips the decode-and-re-encode below.
		return encodeCanonical(t)
	case json.RawMessage:
		raw = t
	case []byte:
		raw = t
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("ledger: payload is not JSON-encodable: %w", err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("ledger: payload is not valid JSON: %w", err)
	}
	return encodeCanonical(generic)
}

// encodeCanonical writes v without HTML escaping, so that "<" hashes the
// same whether it arrived as a Go string or inside raw JSON.
func encodeCanonical(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("ledger: payload: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// entryID is the stable identity of an effect. It doubles as the effect's
// idempotency key, so it must not depend on the attempt or the worker.
func entryID(scope, intent string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(intent))
	h.Write([]byte{0})
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// resolvedKey is a Key with its payload rendered and hashed once.
type resolvedKey struct {
	scope, intent string
	payload       json.RawMessage
	id            string
}

func resolveKey(k Key) (resolvedKey, error) {
	if k.Scope == "" {
		return resolvedKey{}, fmt.Errorf("%w: scope is empty", ErrInvalid)
	}
	if k.Intent == "" {
		return resolvedKey{}, fmt.Errorf("%w: intent is empty", ErrInvalid)
	}
	c, err := canonicalJSON(k.Payload)
	if err != nil {
		return resolvedKey{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return resolvedKey{scope: k.Scope, intent: k.Intent, payload: c, id: entryID(k.Scope, k.Intent, c)}, nil
}

// IdempotencyKey returns the key an effect should pass to providers that
// accept one. It is the same for every attempt, worker and process.
func IdempotencyKey(k Key) (string, error) {
	r, err := resolveKey(k)
	if err != nil {
		return "", err
	}
	return idempotencyKeyFor(r.id), nil
}

func idempotencyKeyFor(id string) string { return "ro_" + id }
