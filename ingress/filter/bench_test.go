package filter_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/replyonce/gateway/ingress/filter"
)

// BenchmarkRules is the cost of ignore rules on a request that none of them
// matches (every rule is evaluated): a Slack event against three rules.
func BenchmarkRules(b *testing.B) {
	body := []byte(`{"type":"event_callback","api_app_id":"A1","event_id":"Ev1","authorizations":[{"user_id":"UBOT","is_bot":true}],` +
		`"event":{"type":"message","user":"U42","text":"where is my refund for order 1234?","ts":"1764748800.000100","channel":"C1",` +
		`"blocks":[{"type":"rich_text","elements":[{"type":"text","text":"where is my refund"}]}]}}`)
	var rules []*filter.Rule
	for _, spec := range []map[string]any{
		{"body": map[string]any{"event": map[string]any{"subtype": map[string]any{"$in": []any{"message_changed", "message_deleted"}}}}},
		{"body": map[string]any{"event": map[string]any{"text": map[string]any{"$regex": "^(ok|thanks)$"}}}},
		{"headers": map[string]any{"x-slack-retry-reason": "http_timeout"}, "body": map[string]any{"event": map[string]any{"bot_id": map[string]any{"$exist": true}}}},
	} {
		r, err := filter.CompileRule(spec, "b")
		if err != nil {
			b.Fatal(err)
		}
		rules = append(rules, r)
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "X-Slack-Request-Timestamp": {"1764748800"}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := &filter.Request{Header: hdr, Path: "/hooks/slack", Body: body, ContentType: "application/json"}
		for _, r := range rules {
			if r.Match(req) {
				b.Fatal("matched")
			}
		}
	}
}

// BenchmarkDecodeBaseline is what any JSON filter must pay at least: one
// decode of the same body. BenchmarkRules over this is the filters' own cost.
func BenchmarkDecodeBaseline(b *testing.B) {
	body := []byte(`{"type":"event_callback","api_app_id":"A1","event_id":"Ev1","authorizations":[{"user_id":"UBOT","is_bot":true}],` +
		`"event":{"type":"message","user":"U42","text":"where is my refund for order 1234?","ts":"1764748800.000100","channel":"C1",` +
		`"blocks":[{"type":"rich_text","elements":[{"type":"text","text":"where is my refund"}]}]}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
