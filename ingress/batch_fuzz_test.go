package ingress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/signatures"
)

// FuzzBatchSplit: any body under any split setting either splits into elements that each carry
// a resolved id and valid JSON, or is refused with a 400; never a panic.
func FuzzBatchSplit(f *testing.F) {
	for _, s := range [][2]string{{`{"events":[{"id":"a"},{"id":"b"}]}`, "{json:events}"}, {`[{"id":1},{"id":2}]`, "{json:@this}"},
		{`{"events":[1,2,"x",null,{"id":{"n":1}}]}`, "{json:events}"}, {`{"a":{"b":[[],[{"id":"z"}]]}}`, "{json:a.b.1}"},
		{`{"events":`, "{json:events}"}, {`[`, "{json:#}"}, {`{}`, "{json:}"}} {
		f.Add([]byte(s[0]), s[1])
	}
	g := &Gateway{log: zap.NewNop()}
	f.Fuzz(func(t *testing.T, body []byte, split string) {
		src, err := NewSource(SourceConfig{Name: "f", Provider: "gocardless", Split: split, EventID: []string{"{json:id}"},
			Signature: signatures.Config{Secrets: []string{"k"}}, Forward: ForwardConfig{Target: forward.Target{URL: "http://127.0.0.1:1/"}}})
		if err != nil {
			var fe *field.Error
			if !errors.As(err, &fe) {
				t.Fatalf("config error without a field: %v", err)
			}
			return
		}
		req := httptest.NewRequest(http.MethodPost, "/hooks/f", nil)
		items, err := g.batchItems(src, req, body, time.Unix(1773500966, 0))
		if err != nil {
			var ie *Error
			if !errors.As(err, &ie) || ie.Status != http.StatusBadRequest {
				t.Fatalf("refusal is not a 400: %v", err)
			}
			return
		}
		if len(items) > maxBatch {
			t.Fatalf("%d items", len(items))
		}
		for _, it := range items {
			if it.eventID == "" {
				t.Fatal("element with an empty id")
			}
		}
	})
}
