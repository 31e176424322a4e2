package filter_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ingress/filter"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return v
}

const event = `{
  "type": "message",
  "count": 3,
  "price": 9.5,
  "bot": false,
  "gone": null,
  "user": {"id": "U1", "name": "Ada", "email": "ada@example.com"},
  "tags": ["gift", "vip", "new"],
  "items": [{"id": 1, "sku": "A"}, {"id": 2, "sku": "B"}],
  "at": "2026-12-03T08:00:00Z"
}`

func TestOperators(t *testing.T) {
	v := decode(t, event)
	cases := []struct {
		name, filter string
		want         bool
	}{
		{"implicit equality", `{"type": "message"}`, true},
		{"implicit equality, other value", `{"type": "reaction"}`, false},
		{"implicit equality is typed", `{"count": "3"}`, false},
		{"number equality", `{"count": 3}`, true},
		{"boolean equality", `{"bot": false}`, true},
		{"null equality", `{"gone": null}`, true},
		{"null is not missing", `{"nothere": null}`, false},
		{"nested object", `{"user": {"id": "U1", "name": "Ada"}}`, true},
		{"nested object, one key differs", `{"user": {"id": "U1", "name": "Bob"}}`, false},
		{"array contains", `{"tags": "vip"}`, true},
		{"array does not contain", `{"tags": "old"}`, false},
		{"array contains all", `{"tags": ["gift", "new"]}`, true},
		{"array contains all, one missing", `{"tags": ["gift", "old"]}`, false},
		{"array of objects, some element", `{"items": {"id": 2, "sku": "B"}}`, true},
		{"array of objects, no single element", `{"items": {"id": 2, "sku": "A"}}`, false},

		{"$eq", `{"type": {"$eq": "message"}}`, true},
		{"$eq false", `{"type": {"$eq": "reaction"}}`, false},
		{"$eq deep object", `{"user": {"$eq": {"id": "U1", "name": "Ada", "email": "ada@example.com"}}}`, true},
		{"$eq deep object is not a subset match", `{"user": {"$eq": {"id": "U1"}}}`, false},
		{"$neq", `{"type": {"$neq": "reaction"}}`, true},
		{"$neq false", `{"type": {"$neq": "message"}}`, false},
		{"$neq on array: no element equal", `{"tags": {"$neq": "vip"}}`, false},
		{"$neq on a missing field", `{"nothere": {"$neq": "x"}}`, false},
		{"$in list", `{"type": {"$in": ["message", "app_mention"]}}`, true},
		{"$in list false", `{"type": {"$in": ["reaction", "app_mention"]}}`, false},
		{"$in string is substring", `{"user": {"email": {"$in": "@example."}}}`, true},
		{"$in string not a substring", `{"user": {"email": {"$in": "@other."}}}`, false},
		{"$in string on array is element", `{"tags": {"$in": "vip"}}`, true},
		{"$in list on array, one element in", `{"tags": {"$in": ["x", "new"]}}`, true},
		{"$nin", `{"type": {"$nin": ["reaction"]}}`, true},
		{"$nin false", `{"type": {"$nin": ["message"]}}`, false},
		{"$nin on a missing field", `{"nothere": {"$nin": ["x"]}}`, false},
		{"$startsWith", `{"user": {"email": {"$startsWith": "ada@"}}}`, true},
		{"$startsWith false", `{"user": {"email": {"$startsWith": "bob@"}}}`, false},
		{"$endsWith", `{"user": {"email": {"$endsWith": "@example.com"}}}`, true},
		{"$endsWith false", `{"user": {"email": {"$endsWith": "@example.org"}}}`, false},
		{"$gt", `{"count": {"$gt": 2}}`, true},
		{"$gt false at equal", `{"count": {"$gt": 3}}`, false},
		{"$gte", `{"count": {"$gte": 3}}`, true},
		{"$gte false", `{"count": {"$gte": 4}}`, false},
		{"$lt", `{"price": {"$lt": 10}}`, true},
		{"$lt false", `{"price": {"$lt": 9.5}}`, false},
		{"$lte", `{"price": {"$lte": 9.5}}`, true},
		{"$lte false", `{"price": {"$lte": 9}}`, false},
		{"$gt on strings (RFC 3339 times)", `{"at": {"$gt": "2026-12-01T00:00:00Z"}}`, true},
		{"$lt on strings false", `{"at": {"$lt": "2026-12-01T00:00:00Z"}}`, false},
		{"$gt number against a string field", `{"type": {"$gt": 1}}`, false},
		{"range", `{"count": {"$gt": 1, "$lt": 5}}`, true},
		{"range false", `{"count": {"$gt": 1, "$lt": 3}}`, false},
		{"$exist true", `{"user": {"id": {"$exist": true}}}`, true},
		{"$exist true on a missing field", `{"user": {"bot_id": {"$exist": true}}}`, false},
		{"$exist true on null", `{"gone": {"$exist": true}}`, true},
		{"$exist false on a missing field", `{"user": {"bot_id": {"$exist": false}}}`, true},
		{"$exist false on a present field", `{"user": {"id": {"$exist": false}}}`, false},
		{"$regex", `{"user": {"email": {"$regex": "^[a-z]+@example\\.com$"}}}`, true},
		{"$regex false", `{"user": {"email": {"$regex": "^bob"}}}`, false},
		{"$regex on array elements", `{"tags": {"$regex": "^v"}}`, true},
		{"$regex on a number", `{"count": {"$regex": "3"}}`, false},
		{"$or", `{"$or": [{"type": "reaction"}, {"user": {"id": "U1"}}]}`, true},
		{"$or false", `{"$or": [{"type": "reaction"}, {"user": {"id": "U2"}}]}`, false},
		{"$or inside a field", `{"type": {"$or": [{"$eq": "x"}, {"$startsWith": "mess"}]}}`, true},
		{"$and", `{"$and": [{"type": "message"}, {"count": 3}]}`, true},
		{"$and false", `{"$and": [{"type": "message"}, {"count": 4}]}`, false},
		{"$not", `{"type": {"$not": {"$in": ["reaction"]}}}`, true},
		{"$not false", `{"type": {"$not": {"$startsWith": "mess"}}}`, false},
		{"missing field never matches", `{"nothere": {"$regex": ".*"}}`, false},
		{"missing parent never matches", `{"a": {"b": {"$exist": true}}}`, false},
		{"nested operators in arrays of objects", `{"items": {"id": {"$gte": 2}, "sku": {"$in": ["B"]}}}`, true},
		{"nested operators in arrays of objects false", `{"items": {"id": {"$gte": 3}}}`, false},
		{"empty filter object matches any object", `{}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := filter.Compile(decode(t, tc.filter), "body")
			if err != nil {
				t.Fatalf("compile %s: %v", tc.filter, err)
			}
			if got := f.Match(v); got != tc.want {
				t.Fatalf("filter %s on the event: got %v, want %v", tc.filter, got, tc.want)
			}
		})
	}
}

func TestRootScalar(t *testing.T) {
	f, err := filter.Compile("/hooks/slack", "path")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match("/hooks/slack") || f.Match("/hooks/other") {
		t.Fatal("a string filter at the root must equal the value")
	}
}

func TestBadFiltersNameTheField(t *testing.T) {
	cases := []struct{ filter, path, says string }{
		{`{"event": {"$regex": "("}}`, "x.body.event.$regex", "regular expression"},
		{`{"event": {"$regex": 5}}`, "x.body.event.$regex", "string"},
		{`{"event": {"$foo": 1}}`, "x.body.event.$foo", "unknown operator"},
		{`{"a": {"$exist": "yes"}}`, "x.body.a.$exist", "true or false"},
		{`{"a": {"$gt": true}}`, "x.body.a.$gt", "number or a string"},
		{`{"a": {"$in": 3}}`, "x.body.a.$in", "list"},
		{`{"a": {"$in": [{"b": 1}]}}`, "x.body.a.$in[0]", "object"},
		{`{"$or": []}`, "x.body.$or", "non-empty list"},
		{`{"$or": [{"a": {"$lt": null}}]}`, "x.body.$or[0].a.$lt", "null"},
		{`{"a": {"$eq": 1, "b": 2}}`, "x.body.a", "cannot share"},
		{`{"a": {"$startsWith": ["x"]}}`, "x.body.a.$startsWith", "a list"},
	}
	for _, tc := range cases {
		t.Run(tc.filter, func(t *testing.T) {
			_, err := filter.Compile(decode(t, tc.filter), "x.body")
			var fe *field.Error
			if !errors.As(err, &fe) {
				t.Fatalf("want a *field.Error, got %v", err)
			}
			if fe.Field != tc.path || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %q at %q, want path %q and %q", err, fe.Field, tc.path, tc.says)
			}
		})
	}
}

func TestRule(t *testing.T) {
	req := func() *filter.Request {
		return &filter.Request{
			Header: http.Header{"X-Github-Event": {"issue_comment"}, "X-Retry": {"2"}},
			Query:  url.Values{"team": {"T1"}},
			Path:   "/hooks/gh",
			Body:   []byte(`{"sender": {"type": "Bot", "login": "replyonce[bot]"}}`),
		}
	}
	cases := []struct {
		name string
		rule map[string]any
		want bool
	}{
		{"header names are case-insensitive", map[string]any{"headers": map[string]any{"X-GitHub-Event": "issue_comment"}}, true},
		{"header value differs", map[string]any{"headers": map[string]any{"x-github-event": "push"}}, false},
		{"numeric header compares as a number", map[string]any{"headers": map[string]any{"x-retry": map[string]any{"$gte": 1}}}, true},
		{"query", map[string]any{"query": map[string]any{"team": "T1"}}, true},
		{"query missing", map[string]any{"query": map[string]any{"channel": map[string]any{"$exist": true}}}, false},
		{"path", map[string]any{"path": map[string]any{"$endsWith": "/gh"}}, true},
		{"body and headers both", map[string]any{"headers": map[string]any{"x-github-event": "issue_comment"},
			"body": map[string]any{"sender": map[string]any{"type": "Bot"}}}, true},
		{"body matches but headers do not", map[string]any{"headers": map[string]any{"x-github-event": "push"},
			"body": map[string]any{"sender": map[string]any{"type": "Bot"}}}, false},
		{"YAML integers equal JSON numbers", map[string]any{"body": map[string]any{"n": map[string]any{"$exist": false}}, "headers": map[string]any{"x-retry": map[string]any{"$lt": 3}}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := filter.CompileRule(tc.rule, "ignore[0]")
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Match(req()); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := filter.CompileRule(map[string]any{"bodyy": map[string]any{}}, "ignore[3]"); err == nil || !strings.Contains(err.Error(), "ignore[3].bodyy") {
		t.Fatalf("an unknown section must be refused naming it, got %v", err)
	}
	if _, err := filter.CompileRule(map[string]any{}, "ignore[4]"); err == nil || !strings.Contains(err.Error(), "ignore[4]") {
		t.Fatalf("an empty rule must be refused, got %v", err)
	}
}

func TestFormAndTextBodies(t *testing.T) {
	r, err := filter.CompileRule(map[string]any{"body": map[string]any{"From": map[string]any{"$endsWith": "555"}}}, "r")
	if err != nil {
		t.Fatal(err)
	}
	form := &filter.Request{Body: []byte("From=%2B1555&Body=hi"), ContentType: "application/x-www-form-urlencoded"}
	if !r.Match(form) {
		t.Fatal("a form body is an object of its fields")
	}
	text, err := filter.CompileRule(map[string]any{"body": map[string]any{"$startsWith": "<xml"}}, "r")
	if err != nil {
		t.Fatal(err)
	}
	if !text.Match(&filter.Request{Body: []byte("<xml>1</xml>"), ContentType: "text/xml"}) {
		t.Fatal("another body is one string")
	}
	if text.Match(&filter.Request{Body: []byte(`{"a":1}`), ContentType: "application/json"}) {
		t.Fatal("a JSON object is not a string")
	}
}
