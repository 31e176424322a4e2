package extract

import (
	"fmt"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// kind is where a placeholder reads its value from.
type kind uint8

const (
	kindLiteral kind = iota
	kindHeader
	kindQuery
	kindJSON
	kindForm
)

func (k kind) String() string {
	switch k {
	case kindHeader:
		return "header"
	case kindQuery:
		return "query"
	case kindJSON:
		return "json"
	case kindForm:
		return "form"
	}
	return "literal"
}

// part is one literal run or one placeholder of a template.
type part struct {
	kind kind
	// text is the literal for kindLiteral, the canonical header name for kindHeader, the parameter
	// or field name for kindQuery and kindForm, and the gjson path for kindJSON.
	text string
	// rawName is the header name as written, kept so String round-trips.
	rawName string
	// jsonPath, when set on a header, query or form part, is applied to that value as JSON.
	jsonPath string
}

// Template is one parsed extraction template. The zero Template never resolves.
type Template struct {
	src   string
	parts []part
	size  int // total literal bytes, to size the output of composites
}

// ParseError says what is wrong with a template and where.
type ParseError struct {
	Template string
	Offset   int // byte offset in Template where the problem starts
	Problem  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("template %q: %s at column %d", e.Template, e.Problem, e.Offset+1)
}

// Parse parses one template.
func Parse(s string) (Template, error) {
	t := Template{src: s}
	if strings.TrimSpace(s) == "" {
		return Template{}, &ParseError{Template: s, Offset: 0, Problem: "template is empty"}
	}
	lit := 0 // start of the pending literal run
	for i := 0; i < len(s); {
		switch s[i] {
		case '}':
			return Template{}, &ParseError{Template: s, Offset: i, Problem: "'}' without a matching '{' (literal text cannot contain braces)"}
		case '{':
			end, err := closing(s, i)
			if err != nil {
				return Template{}, err
			}
			if lit < i {
				t.parts = append(t.parts, part{kind: kindLiteral, text: s[lit:i]})
				t.size += i - lit
			}
			p, err := parsePlaceholder(s, i+1, end)
			if err != nil {
				return Template{}, err
			}
			t.parts = append(t.parts, p)
			i = end + 1
			lit = i
		default:
			i++
		}
	}
	if lit < len(s) {
		t.parts = append(t.parts, part{kind: kindLiteral, text: s[lit:]})
		t.size += len(s) - lit
	}
	return t, nil
}

// closing finds the brace that closes the one at open, letting gjson's own braces nest inside.
func closing(s string, open int) (int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, &ParseError{Template: s, Offset: open, Problem: "unclosed '{'"}
}

// parsePlaceholder parses s[start:end], the text between a placeholder's braces.
func parsePlaceholder(s string, start, end int) (part, error) {
	body := s[start:end]
	colon := strings.IndexByte(body, ':')
	if colon < 0 {
		return part{}, &ParseError{Template: s, Offset: start, Problem: fmt.Sprintf("placeholder %q has no kind: want {header:...}, {query:...}, {json:...} or {form:...}", body)}
	}
	kindName, rest := body[:colon], body[colon+1:]
	nameAt := start + colon + 1
	var p part
	switch kindName {
	case "json":
		if err := checkName(s, nameAt, rest, "JSON path", true); err != nil {
			return part{}, err
		}
		return part{kind: kindJSON, text: rest}, nil
	case "header":
		p.kind = kindHeader
	case "query":
		p.kind = kindQuery
	case "form":
		p.kind = kindForm
	default:
		return part{}, &ParseError{Template: s, Offset: start, Problem: fmt.Sprintf("unknown kind %q: want header, query, json or form", kindName)}
	}

	name := rest
	if bar := strings.IndexByte(rest, '|'); bar >= 0 {
		name = rest[:bar]
		after := rest[bar+1:]
		afterAt := nameAt + bar + 1
		path, ok := strings.CutPrefix(after, "json:")
		if !ok {
			return part{}, &ParseError{Template: s, Offset: afterAt, Problem: fmt.Sprintf("after '|' only json:path is supported, got %q", after)}
		}
		if err := checkName(s, afterAt+len("json:"), path, "JSON path", true); err != nil {
			return part{}, err
		}
		p.jsonPath = path
	}
	what := p.kind.String() + " name"
	if err := checkName(s, nameAt, name, what, false); err != nil {
		return part{}, err
	}
	p.text = name
	if p.kind == kindHeader {
		for i := 0; i < len(name); i++ {
			if !isTokenChar(name[i]) {
				return part{}, &ParseError{Template: s, Offset: nameAt + i, Problem: fmt.Sprintf("header name %q contains %q, which no header name can", name, name[i])}
			}
		}
		p.rawName = name
		p.text = textproto.CanonicalMIMEHeaderKey(name)
	}
	return p, nil
}

func checkName(s string, at int, name, what string, bracesOK bool) error {
	if name == "" {
		return &ParseError{Template: s, Offset: at, Problem: "empty " + what}
	}
	if strings.TrimSpace(name) != name {
		return &ParseError{Template: s, Offset: at, Problem: fmt.Sprintf("%s %q has leading or trailing spaces", what, name)}
	}
	if !bracesOK {
		if i := strings.IndexAny(name, "{}"); i >= 0 {
			return &ParseError{Template: s, Offset: at + i, Problem: fmt.Sprintf("%s %q contains a brace", what, name)}
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP header name (RFC 9110 tchar).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// String renders the template in the syntax Parse reads; Parse(t.String()) gives t back.
func (t Template) String() string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.kind == kindLiteral {
			b.WriteString(p.text)
			continue
		}
		b.WriteByte('{')
		b.WriteString(p.kind.String())
		b.WriteByte(':')
		if p.kind == kindHeader {
			b.WriteString(p.rawName)
		} else {
			b.WriteString(p.text)
		}
		if p.jsonPath != "" {
			b.WriteString("|json:")
			b.WriteString(p.jsonPath)
		}
		b.WriteByte('}')
	}
	return b.String()
}

// Resolve renders the template against in; ok is false unless every placeholder resolved.
func (t Template) Resolve(in *Input) (string, bool) {
	if in == nil || len(t.parts) == 0 {
		return "", false
	}
	if len(t.parts) == 1 {
		return t.parts[0].value(in)
	}
	// Resolve every placeholder before building, so a miss costs no allocation; a template has a
	// handful of parts, so a small stack array holds them.
	var stack [8]string
	vals := stack[:0]
	n := t.size
	for _, p := range t.parts {
		if p.kind == kindLiteral {
			continue
		}
		v, ok := p.value(in)
		if !ok {
			return "", false
		}
		vals = append(vals, v)
		n += len(v)
	}
	var b strings.Builder
	b.Grow(n)
	i := 0
	for _, p := range t.parts {
		if p.kind == kindLiteral {
			b.WriteString(p.text)
			continue
		}
		b.WriteString(vals[i])
		i++
	}
	return b.String(), true
}

func (p part) value(in *Input) (string, bool) {
	var raw string
	switch p.kind {
	case kindLiteral:
		return p.text, true
	case kindJSON:
		return jsonValue(gjson.GetBytes(in.Body, p.text))
	case kindHeader:
		if vs := in.Header[p.text]; len(vs) > 0 {
			raw = vs[0]
		} else {
			// A caller-built Header may hold a non-canonical key; http.Header.Get would miss it too,
			// but case-insensitive matching is the promise.
			for k, vs := range in.Header {
				if len(vs) > 0 && strings.EqualFold(k, p.text) {
					raw = vs[0]
					break
				}
			}
		}
	case kindQuery:
		raw = in.Query.Get(p.text)
	case kindForm:
		raw = in.Form().Get(p.text)
	}
	if p.jsonPath != "" {
		return jsonValue(gjson.Get(raw, p.jsonPath))
	}
	return present(raw)
}

// jsonValue turns a gjson result into an id-shaped string, refusing anything that is not a scalar.
func jsonValue(r gjson.Result) (string, bool) {
	switch r.Type {
	case gjson.String:
		return present(r.Str)
	case gjson.Number, gjson.True, gjson.False:
		// Raw keeps the provider's digits: Int() or Float() would round ids past 2^53.
		return present(r.Raw)
	}
	return "", false // missing, null, object or array
}

func present(s string) (string, bool) {
	if strings.TrimSpace(s) == "" {
		return "", false
	}
	return s, true
}

// Rule is an ordered list of templates; the first that fully resolves wins. The zero Rule never
// resolves.
type Rule struct {
	templates []Template
}

// ParseRule parses each template in order. An empty list is an error: a rule that can never resolve
// is a configuration mistake, and a field with no rule should use its default instead.
func ParseRule(templates []string) (Rule, error) {
	if len(templates) == 0 {
		return Rule{}, fmt.Errorf("extract: rule has no templates")
	}
	r := Rule{templates: make([]Template, 0, len(templates))}
	for i, s := range templates {
		t, err := Parse(s)
		if err != nil {
			return Rule{}, fmt.Errorf("extract: rule entry %d: %w", i, err)
		}
		r.templates = append(r.templates, t)
	}
	return r, nil
}

// Resolve returns the value of the first template that fully resolves against in.
func (r Rule) Resolve(in *Input) (string, bool) {
	for _, t := range r.templates {
		if v, ok := t.Resolve(in); ok {
			return v, true
		}
	}
	return "", false
}

// Templates returns the rule's templates in order.
func (r Rule) Templates() []Template {
	return append([]Template(nil), r.templates...)
}

// Reads lists what the rule's templates read from outside the body: the
// canonical names of the headers, and whether any reads the query string.
// The gateway asks it which parts of an event id a signature may not
// cover.
func (r Rule) Reads() (headers []string, query bool) {
	for _, t := range r.templates {
		for _, p := range t.parts {
			switch p.kind {
			case kindHeader:
				headers = append(headers, p.text)
			case kindQuery:
				query = true
			}
		}
	}
	return headers, query
}

// String renders the rule for logs and error messages, e.g. `"{json:id}" or "{header:X-Id}"`.
func (r Rule) String() string {
	var b strings.Builder
	for i, t := range r.templates {
		if i > 0 {
			b.WriteString(" or ")
		}
		fmt.Fprintf(&b, "%q", t.String())
	}
	return b.String()
}

// Input is what templates read from one request. Fill the exported fields; the form body is parsed
// on first use and cached, so keep using the same *Input for every rule of the request.
type Input struct {
	Header      http.Header
	Query       url.Values
	Body        []byte
	ContentType string

	form       url.Values
	formParsed bool
}

// Form returns the body's form fields, parsed once; it is empty unless ContentType is
// application/x-www-form-urlencoded.
func (in *Input) Form() url.Values {
	if in.formParsed {
		return in.form
	}
	in.formParsed = true
	mt, _, err := mime.ParseMediaType(in.ContentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil
	}
	// ParseQuery keeps the well-formed pairs when some are not, which is what we want: one bad
	// pair elsewhere in a signed body should not hide the field the rule asks for.
	in.form, _ = url.ParseQuery(string(in.Body))
	return in.form
}

// Templates is a rule as configuration writes it: one template, or a list
// of them (the first that fully resolves wins). ParseRule reads it.
type Templates []string

// UnmarshalText takes a single template written as a scalar; a list
// decodes as the slice it is.
func (t *Templates) UnmarshalText(text []byte) error {
	*t = Templates{string(text)}
	return nil
}
