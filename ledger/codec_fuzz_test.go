package ledger

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDocumentCodec: whatever document encoding/json reads, the codec
// (codec.go) reads too, to the same value. Seeds: a document with every
// field set, duplicate and differently cased keys, escapes in a key and a
// lone surrogate.
func FuzzDocumentCodec(f *testing.F) {
	var d document
	fillNonZero(f, reflect.ValueOf(&d).Elem(), "document")
	good, _ := marshalDocument(&d)
	f.Add(good)
	f.Add([]byte(`{"format":1,"scope":"a","SCOPE":"b","entries":{"x":{"id":"x"}},"seq":1,"seq":2}`))
	f.Add([]byte(`{"format":1,"sco\u0070e":"a\ud800"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var a, b document
		werr := json.Unmarshal(raw, &a)
		if werr != nil {
			return
		}
		if gerr := unmarshalDocument(raw, &b); gerr != nil {
			t.Fatalf("encoding/json reads %q, the codec fails: %v", raw, gerr)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("read differently from %q:\nencoding/json: %+v\ncodec:         %+v", raw, a, b)
		}
	})
}
