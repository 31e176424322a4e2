package extract_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/replyonce/gateway/ingress/extract"
)

func mustRule(t *testing.T, templates ...string) extract.Rule {
	t.Helper()
	r, err := extract.ParseRule(templates)
	if err != nil {
		t.Fatalf("ParseRule(%q): %v", templates, err)
	}
	return r
}

func jsonInput(body string) *extract.Input {
	return &extract.Input{Body: []byte(body), ContentType: "application/json"}
}

func TestResolve(t *testing.T) {
	slackPayload := `{"type":"block_actions","trigger_id":"13345224609.738474920.8088930838d88f008e0","team":{"id":"T9TK3CUKW"},"actions":[{"action_id":"approve"}]}`
	slackForm := &extract.Input{
		ContentType: "application/x-www-form-urlencoded",
		Body:        []byte("token=x&payload=" + url.QueryEscape(slackPayload) + "&team_id=T9TK3CUKW"),
	}
	stripe := jsonInput(`{"id":"evt_1NG8Du","created":1686089970,"data":{"object":{"id":"in_1","customer":"cus_9","amount":0}},"pending_webhooks":1}`)
	github := &extract.Input{
		Header: http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Event": {"issues"}},
		Body:   []byte(`{"action":"opened","issue":{"number":1347},"repository":{"full_name":"octo/hello"}}`),
	}
	query := &extract.Input{Query: url.Values{"event": {"e-7"}, "empty": {""}}}

	cases := []struct {
		name      string
		templates []string
		in        *extract.Input
		want      string // "" means: must not resolve
	}{
		{"json string unquoted", []string{"{json:id}"}, stripe, "evt_1NG8Du"},
		{"json nested", []string{"{json:data.object.customer}"}, stripe, "cus_9"},
		{"json number raw", []string{"{json:created}"}, stripe, "1686089970"},
		{"json zero is a value", []string{"{json:data.object.amount}"}, stripe, "0"},
		{"json big int not rounded", []string{"{json:n}"}, jsonInput(`{"n":12345678901234567890123}`), "12345678901234567890123"},
		{"json float raw", []string{"{json:n}"}, jsonInput(`{"n":1.50}`), "1.50"},
		{"json bool", []string{"{json:ok}"}, jsonInput(`{"ok":false}`), "false"},
		{"json escaped string decoded", []string{"{json:s}"}, jsonInput(`{"s":"a\"b\u00e9"}`), `a"bé`},
		{"json array index", []string{"{json:data.0.id}"}, jsonInput(`{"data":[{"id":"first"},{"id":"second"}]}`), "first"},
		{"json second element", []string{"{json:data.1.id}"}, jsonInput(`{"data":[{"id":"first"},{"id":"second"}]}`), "second"},
		{"json gjson pipe", []string{"{json:data|0|id}"}, jsonInput(`{"data":[{"id":"p"}]}`), "p"},
		{"json missing", []string{"{json:nope}"}, stripe, ""},
		{"json empty string", []string{"{json:id}"}, jsonInput(`{"id":""}`), ""},
		{"json blank string", []string{"{json:id}"}, jsonInput(`{"id":"  "}`), ""},
		{"json null", []string{"{json:id}"}, jsonInput(`{"id":null}`), ""},
		{"json object", []string{"{json:data}"}, stripe, ""},
		{"json array", []string{"{json:ids}"}, jsonInput(`{"ids":[1,2]}`), ""},
		{"json on empty body", []string{"{json:id}"}, jsonInput(``), ""},
		{"json on a form body", []string{"{json:id}"}, slackForm, ""},

		{"header canonical", []string{"{header:X-GitHub-Delivery}"}, github, "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"header lower case", []string{"{header:x-github-delivery}"}, github, "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"header non-canonical map key", []string{"{header:X-Request-Id}"}, &extract.Input{Header: http.Header{"x-request-id": {"r1"}}}, "r1"},
		{"header missing", []string{"{header:X-Nope}"}, github, ""},
		{"header empty value", []string{"{header:X-Id}"}, &extract.Input{Header: http.Header{"X-Id": {""}}}, ""},
		{"header carrying json", []string{"{header:X-Meta|json:id}"}, &extract.Input{Header: http.Header{"X-Meta": {`{"id":"h1"}`}}}, "h1"},

		{"query", []string{"{query:event}"}, query, "e-7"},
		{"query missing", []string{"{query:other}"}, query, ""},
		{"query empty", []string{"{query:empty}"}, query, ""},
		{"query without values", []string{"{query:event}"}, &extract.Input{}, ""},

		{"form field", []string{"{form:team_id}"}, slackForm, "T9TK3CUKW"},
		{"form json", []string{"{form:payload|json:trigger_id}"}, slackForm, "13345224609.738474920.8088930838d88f008e0"},
		{"form json nested", []string{"{form:payload|json:team.id}"}, slackForm, "T9TK3CUKW"},
		{"form json array", []string{"{form:payload|json:actions.0.action_id}"}, slackForm, "approve"},
		{"form json missing", []string{"{form:payload|json:nope}"}, slackForm, ""},
		{"form missing field", []string{"{form:nope}"}, slackForm, ""},
		{"form with charset", []string{"{form:a}"}, &extract.Input{ContentType: "Application/X-WWW-Form-Urlencoded; charset=utf-8", Body: []byte("a=1")}, "1"},
		{"form needs the form media type", []string{"{form:a}"}, &extract.Input{ContentType: "application/json", Body: []byte("a=1")}, ""},
		{"form needs a media type at all", []string{"{form:a}"}, &extract.Input{Body: []byte("a=1")}, ""},
		{"form keeps good pairs past a bad one", []string{"{form:a}"}, &extract.Input{ContentType: "application/x-www-form-urlencoded", Body: []byte("bad=%zz&a=ok")}, "ok"},

		{"composite", []string{"{json:RecordType}:{json:MessageID}"}, jsonInput(`{"RecordType":"Bounce","MessageID":"m-1"}`), "Bounce:m-1"},
		{"composite literal edges", []string{"pm-{json:RecordType}/{header:X-Id}!"}, &extract.Input{Header: http.Header{"X-Id": {"7"}}, Body: []byte(`{"RecordType":"Open"}`)}, "pm-Open/7!"},
		{"composite half missing", []string{"{json:RecordType}:{json:MessageID}"}, jsonInput(`{"RecordType":"Bounce"}`), ""},
		{"composite half empty", []string{"{json:a}:{json:b}"}, jsonInput(`{"a":"x","b":""}`), ""},
		{"composite mixed kinds", []string{"{header:X-GitHub-Event}:{json:issue.number}"}, github, "issues:1347"},
		{"many parts", []string{"{json:a}-{json:a}-{json:a}-{json:a}-{json:a}-{json:a}-{json:a}-{json:a}-{json:a}-{json:a}"}, jsonInput(`{"a":"z"}`), "z-z-z-z-z-z-z-z-z-z"},
		{"literal only", []string{"global"}, &extract.Input{}, "global"},

		{"fallback to second", []string{"{json:event_id}", "{header:X-GitHub-Delivery}"}, github, "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"first wins", []string{"{json:action}", "{header:X-GitHub-Delivery}"}, github, "opened"},
		{"fallback skips partial composite", []string{"{json:action}:{json:nope}", "{json:issue.number}"}, github, "1347"},
		{"nothing resolves", []string{"{json:a}", "{header:X-A}", "{query:a}"}, github, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := mustRule(t, tc.templates...).Resolve(tc.in)
			if tc.want == "" {
				if ok || got != "" {
					t.Fatalf("resolved to %q, want unresolved", got)
				}
				return
			}
			if !ok || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// The form body is parsed once per Input, however many rules read it.
func TestFormParsedOnce(t *testing.T) {
	in := &extract.Input{ContentType: "application/x-www-form-urlencoded", Body: []byte("a=1&b=2")}
	a := mustRule(t, "{form:a}")
	if v, ok := a.Resolve(in); !ok || v != "1" {
		t.Fatalf("got %q %v", v, ok)
	}
	// Change the body: a re-parse would see it, the cached form must not.
	copy(in.Body, "a=9")
	if v, _ := mustRule(t, "{form:a}:{form:b}").Resolve(in); v != "1:2" {
		t.Fatalf("second rule saw %q, want the form parsed on first use (1:2)", v)
	}
}

func TestZeroValuesNeverResolve(t *testing.T) {
	in := jsonInput(`{"id":"x"}`)
	if v, ok := (extract.Rule{}).Resolve(in); ok || v != "" {
		t.Fatalf("zero Rule resolved to %q", v)
	}
	if v, ok := (extract.Template{}).Resolve(in); ok || v != "" {
		t.Fatalf("zero Template resolved to %q", v)
	}
	if _, ok := mustRule(t, "{json:id}").Resolve(nil); ok {
		t.Fatal("nil Input resolved")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		tmpl   string
		column int
		says   string
	}{
		{"", 1, "empty"},
		{"   ", 1, "empty"},
		{"{json:id", 1, "unclosed '{'"},
		{"id-{json:a}-{header:X", 13, "unclosed '{'"},
		{"{json:id}}", 10, "'}' without a matching '{'"},
		{"a}b", 2, "'}' without a matching '{'"},
		{"{jsn:id}", 2, `unknown kind "jsn"`},
		{"{JSON:id}", 2, `unknown kind "JSON"`},
		{"{id}", 2, "has no kind"},
		{"{}", 2, "has no kind"},
		{"{json:}", 7, "empty JSON path"},
		{"{header:}", 9, "empty header name"},
		{"{query:}", 8, "empty query name"},
		{"{form:}", 7, "empty form name"},
		{"{form:|json:a}", 7, "empty form name"},
		{"{form:payload|json:}", 20, "empty JSON path"},
		{"{form:payload|xml:a}", 15, "only json:path"},
		{"{json: id}", 7, "leading or trailing spaces"},
		{"{header:X Id}", 10, "no header name can"},
		{"{header:X:Id}", 10, "no header name can"},
		{"{query:a{b}}", 9, "contains a brace"},
	}
	for _, tc := range cases {
		_, err := extract.Parse(tc.tmpl)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error saying %q", tc.tmpl, tc.says)
			continue
		}
		var pe *extract.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error %T is not a *ParseError", tc.tmpl, err)
			continue
		}
		if pe.Offset+1 != tc.column || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), tc.tmpl) {
			t.Errorf("Parse(%q) = %q (column %d), want column %d and mention of %q and the template", tc.tmpl, err, pe.Offset+1, tc.column, tc.says)
		}
	}
}

func TestParseRuleErrorsNameTheEntry(t *testing.T) {
	_, err := extract.ParseRule([]string{"{json:id}", "{header:X-Id", "{query:id}"})
	var pe *extract.ParseError
	if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "entry 1") {
		t.Fatalf("err = %v, want a wrapped *ParseError naming entry 1", err)
	}
	if _, err := extract.ParseRule(nil); err == nil {
		t.Fatal("empty rule accepted")
	}
}

func TestAcceptedGJSONSyntax(t *testing.T) {
	// Braces nest inside a json path, so gjson's multipath and modifiers stay usable.
	for _, s := range []string{"{json:{id,type}}", "{json:items.#(kind==\"a\").id}", "{json:@this.id}", "{json:data|@reverse|0}"} {
		if _, err := extract.Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
	// A multipath yields an object, which never resolves.
	if v, ok := mustRule(t, "{json:{id,type}}").Resolve(jsonInput(`{"id":"a","type":"b"}`)); ok {
		t.Fatalf("object from multipath resolved to %q", v)
	}
	if v, ok := mustRule(t, `{json:items.#(kind=="b").id}`).Resolve(jsonInput(`{"items":[{"kind":"a","id":1},{"kind":"b","id":2}]}`)); !ok || v != "2" {
		t.Fatalf("query path got %q %v", v, ok)
	}
}

func TestString(t *testing.T) {
	for _, s := range []string{"{json:id}", "{header:x-github-delivery}", "pm:{json:RecordType}:{json:MessageID}", "{form:payload|json:team.id}", "{query:a}-x", "global"} {
		tm, err := extract.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if tm.String() != s {
			t.Errorf("String() = %q, want %q", tm.String(), s)
		}
	}
	r := mustRule(t, "{json:id}", "{header:X-Id}")
	if got := r.String(); got != `"{json:id}" or "{header:X-Id}"` {
		t.Errorf("Rule.String() = %q", got)
	}
	if n := len(r.Templates()); n != 2 {
		t.Errorf("Templates() has %d entries, want 2", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"{json:id}", "{header:X-Id}:{query:a}", "{form:payload|json:a.b}", "{json:{a,b}}", "a}{", "{", "{json:a|b}", "x{header:|json:}"} {
		f.Add(s)
	}
	in := &extract.Input{
		Header:      http.Header{"X-Id": {"h"}},
		Query:       url.Values{"a": {"q"}},
		Body:        []byte(`{"id":"j","a":{"b":1}}`),
		ContentType: "application/json",
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := extract.Parse(s)
		if err != nil {
			var pe *extract.ParseError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(s) {
				t.Fatalf("Parse(%q) error %v has no usable position", s, err)
			}
			return
		}
		if tm.String() != s {
			t.Fatalf("String() = %q, want the source %q back", tm.String(), s)
		}
		if v, ok := tm.Resolve(in); ok && strings.TrimSpace(v) == "" {
			t.Fatalf("%q resolved to the blank %q", s, v)
		} else if !ok && v != "" {
			t.Fatalf("%q unresolved but returned %q", s, v)
		}
	})
}

func BenchmarkResolveJSON(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"id":"evt_1NG8DuKZ3sBiWvqG","type":"invoice.paid","data":{"object":{"customer":"cus_9s6XKzkNRiz8i3","lines":[`)
	for body.Len() < 4000 {
		body.WriteString(`{"id":"il_1NG8DuKZ3sBiWvqG","amount":1000,"currency":"usd","description":"padding line item"},`)
	}
	body.WriteString(`{"id":"last"}]}}}`)
	in := &extract.Input{Body: []byte(body.String()), ContentType: "application/json"}
	r, err := extract.ParseRule([]string{"{json:data.object.customer}"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if v, ok := r.Resolve(in); !ok || v != "cus_9s6XKzkNRiz8i3" {
			b.Fatalf("got %q %v", v, ok)
		}
	}
}

func BenchmarkResolveComposite(b *testing.B) {
	in := &extract.Input{
		Header: http.Header{"X-Github-Event": {"issues"}},
		Body:   []byte(`{"action":"opened","issue":{"number":1347}}`),
	}
	r, _ := extract.ParseRule([]string{"{json:missing}", "{header:X-GitHub-Event}:{json:issue.number}"})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Resolve(in); !ok {
			b.Fatal("unresolved")
		}
	}
}
