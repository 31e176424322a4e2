package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// CommittedValue finds a committed entry of scope whose stored value holds
// value as a JSON string anywhere in it: the value itself, any field of an
// object at any depth, or any element of an array. Keys do not count, nor
// do numbers, however they print. Entries of the intents listed in except
// are skipped (the gateway skips its own deliver records). It reads the
// scope's document and changes nothing.
//
// This is how the gateway recognises the agent's own echo: the agent
// committed its reply with the provider's id of the sent message in the
// value, and the provider's webhook about that message carries the same id.
// Only committed entries count: a pending or ambiguous one has no value yet.
func (l *Ledger) CommittedValue(ctx context.Context, scope, value string, except ...string) (Entry, bool, error) {
	if value == "" {
		return Entry{}, false, fmt.Errorf("%w: the value to look for is empty", ErrInvalid)
	}
	d, err := l.readWhole(ctx, scope)
	if err != nil {
		return Entry{}, false, err
	}
	if e := d.committedValue(value, except); e != nil {
		return *e, true, nil
	}
	return Entry{}, false, nil
}

// committedValue is CommittedValue's decision, on the document alone. When
// several entries hold the value, the one that landed first is returned, so
// the answer does not depend on map order.
func (d *document) committedValue(value string, except []string) *Entry {
	var found *Entry
	for _, e := range d.Entries {
		if e.State != StateCommitted || len(e.Value) == 0 || slices.Contains(except, e.Intent) {
			continue
		}
		if found != nil && (found.LandedSeq < e.LandedSeq || found.LandedSeq == e.LandedSeq && found.ID < e.ID) {
			continue
		}
		var v any
		if json.Unmarshal(e.Value, &v) != nil {
			continue
		}
		if holdsString(v, value) {
			found = e
		}
	}
	return found
}

func holdsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case map[string]any:
		for _, e := range x {
			if holdsString(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsString(e, s) {
				return true
			}
		}
	}
	return false
}
