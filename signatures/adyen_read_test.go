package signatures

import (
	"testing"

	"github.com/tidwall/gjson"
)

// adyenReadByPath is the reference for adyenRead: each field looked up by its path.
func adyenReadByPath(nri gjson.Result) adyenItem {
	var it adyenItem
	for i, f := range adyenFields {
		it.vals[i] = adyenValue(nri.Get(f))
	}
	it.sig = nri.Get("additionalData.hmacSignature")
	return it
}

func sameAdyenItem(a, b adyenItem) bool {
	return a.vals == b.vals && a.sig.Type == b.sig.Type && a.sig.Raw == b.sig.Raw
}

// adyenRead's one pass reads exactly what a lookup per field path reads, duplicates and odd
// shapes included.
func TestAdyenReadMatchesPathLookups(t *testing.T) {
	for _, item := range []string{
		`{"pspReference":"p","originalReference":"o","merchantAccountCode":"m","merchantReference":"r","amount":{"value":1130,"currency":"EUR"},"eventCode":"AUTHORISATION","success":"true","additionalData":{"hmacSignature":"c2ln"}}`,
		`{"pspReference":"first","pspReference":"second","amount":{"value":1,"value":2,"currency":"EUR"},"amount":{"value":3}}`,
		`{"additionalData":{"hmacSignature":"a"},"additionalData":{"hmacSignature":"b"}}`,
		`{"amount":"12 EUR","success":true,"eventCode":null,"merchantReference":1e3,"originalReference":["x"]}`,
		`{"psp\u0052eference":"escaped key","amount.value":"literal dotted key","additionalData":{"hmacSignature":7}}`,
		`{"amount":{"currency":{"nested":"object"}},"additionalData":"not an object"}`,
		`{}`, `[]`, `"str"`, `null`, ``,
	} {
		nri := gjson.Parse(item)
		if got, want := adyenRead(nri), adyenReadByPath(nri); !sameAdyenItem(got, want) {
			t.Errorf("%s:\none pass %q sig %q\nby path  %q sig %q", item, got.vals, got.sig.Raw, want.vals, want.sig.Raw)
		}
	}
}
