package filter_test

import (
	"encoding/json"
	"testing"

	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ingress/filter"
)

// FuzzFilter: any JSON filter either compiles or is refused with a
// *field.Error, and a compiled one matches any JSON value without panicking.
func FuzzFilter(f *testing.F) {
	f.Add(`{"type":{"$in":["a","b"]},"user":{"id":{"$exist":true}}}`, `{"type":"a","user":{"id":1}}`)
	f.Add(`{"$or":[{"a":{"$regex":"^x"}},{"b":{"$not":{"$gt":3}}}]}`, `{"a":["xy"],"b":2}`)
	f.Add(`{"tags":["a","b"],"n":{"$lte":"2026"}}`, `[{"tags":["a","b","c"],"n":"2025"}]`)
	f.Add(`{"a":{"$regex":"("}}`, `{}`)
	f.Fuzz(func(t *testing.T, spec, value string) {
		var s, v any
		if json.Unmarshal([]byte(spec), &s) != nil || json.Unmarshal([]byte(value), &v) != nil {
			return
		}
		flt, err := filter.Compile(s, "body")
		if err != nil {
			if _, ok := err.(*field.Error); !ok {
				t.Fatalf("compile error %T %v is not a *field.Error", err, err)
			}
			return
		}
		first := flt.Match(v)
		if flt.Match(v) != first {
			t.Fatal("matching is not deterministic")
		}
	})
}
