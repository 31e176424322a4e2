package filter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/replyonce/gateway/ingress/field"
)

// Filter is one compiled filter over one value.
type Filter struct{ n node }

// node is a compiled piece of a filter. ok says whether the value is
// present at all: a missing field is not the same as null.
type node interface {
	match(v any, ok bool) bool
}

// Compile compiles spec, a value decoded from JSON (or YAML carried over
// as JSON), into a Filter. path names spec in errors.
func Compile(spec any, path string) (Filter, error) {
	n, err := compile(normalize(spec), path)
	if err != nil {
		return Filter{}, err
	}
	return Filter{n: n}, nil
}

// Match reports whether v (decoded JSON) matches.
func (f Filter) Match(v any) bool { return f.n != nil && f.n.match(v, true) }

// bad is a bad filter: a *field.Error naming where in it (the path given
// to Compile, then the keys below) and why.
func bad(path, format string, args ...any) error {
	return field.Errorf(path, format, args...)
}

// Operators lists the operators a filter may use.
var Operators = []string{"$eq", "$neq", "$in", "$nin", "$startsWith", "$endsWith", "$gt", "$gte", "$lt", "$lte",
	"$exist", "$regex", "$or", "$and", "$not"}

func compile(spec any, path string) (node, error) {
	switch s := spec.(type) {
	case map[string]any:
		return compileObject(s, path)
	case []any:
		arr := arrayNode{}
		for i, e := range s {
			n, err := compile(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			arr = append(arr, n)
		}
		return arr, nil
	case string, float64, bool, nil:
		return scalarNode{v: s}, nil
	}
	return nil, bad(path, "%T is not a JSON value", spec)
}

func compileObject(s map[string]any, path string) (node, error) {
	keys := make([]string, 0, len(s))
	ops := 0
	for k := range s {
		keys = append(keys, k)
		if strings.HasPrefix(k, "$") {
			ops++
		}
	}
	slices.Sort(keys)
	if ops > 0 && ops < len(keys) {
		return nil, bad(path, "operators (%s) and field names cannot share one object: use $and", strings.Join(keys, ", "))
	}
	if ops == 0 {
		obj := objectNode{}
		for _, k := range keys {
			n, err := compile(s[k], join(path, k))
			if err != nil {
				return nil, err
			}
			obj = append(obj, member{name: k, n: n})
		}
		return obj, nil
	}
	all := opsNode{}
	for _, k := range keys {
		n, err := compileOp(k, s[k], join(path, k))
		if err != nil {
			return nil, err
		}
		all = append(all, n)
	}
	return all, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func compileOp(op string, arg any, path string) (node, error) {
	switch op {
	case "$eq", "$neq":
		if _, err := compile(arg, path); err != nil {
			return nil, err
		}
		return eqOp{want: arg, neq: op == "$neq"}, nil
	case "$gt", "$gte", "$lt", "$lte":
		switch arg.(type) {
		case float64, string:
		default:
			return nil, bad(path, "want a number or a string to compare with, not %s", describe(arg))
		}
		return cmpOp{op: op, want: arg}, nil
	case "$startsWith", "$endsWith":
		s, ok := arg.(string)
		if !ok {
			return nil, bad(path, "want a string, not %s", describe(arg))
		}
		return affixOp{s: s, prefix: op == "$startsWith"}, nil
	case "$regex":
		s, ok := arg.(string)
		if !ok {
			return nil, bad(path, "want a regular expression as a string, not %s", describe(arg))
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, bad(path, "%q is not a valid regular expression (Go RE2 syntax): %v", s, err)
		}
		return regexOp{re: re}, nil
	case "$exist":
		b, ok := arg.(bool)
		if !ok {
			return nil, bad(path, "want true or false, not %s", describe(arg))
		}
		return existOp(b), nil
	case "$in", "$nin":
		switch a := arg.(type) {
		case []any:
			for i, e := range a {
				if _, isObj := e.(map[string]any); isObj {
					return nil, bad(fmt.Sprintf("%s[%d]", path, i), "want a scalar or an array, not an object")
				}
			}
		case string:
		default:
			return nil, bad(path, "want a list of values or a string, not %s", describe(arg))
		}
		return inOp{list: arg, not: op == "$nin"}, nil
	case "$or", "$and":
		list, ok := arg.([]any)
		if !ok || len(list) == 0 {
			return nil, bad(path, "want a non-empty list of filters")
		}
		l := logicOp{or: op == "$or"}
		for i, e := range list {
			n, err := compile(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			l.subs = append(l.subs, n)
		}
		return l, nil
	case "$not":
		n, err := compile(arg, path)
		if err != nil {
			return nil, err
		}
		return notOp{n: n}, nil
	}
	return nil, bad(path, "unknown operator %s (known: %s)", op, strings.Join(Operators, " "))
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	}
	return fmt.Sprintf("%T", v)
}

// normalize turns what a YAML decoder produced (ints, map[string]any,
// []any) into what encoding/json produces, so both compare alike.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float32:
		return float64(x)
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return v
}

type scalarNode struct{ v any }

func (s scalarNode) match(v any, ok bool) bool {
	if !ok {
		return false
	}
	if arr, isArr := v.([]any); isArr {
		return slices.ContainsFunc(arr, func(e any) bool { return e == s.v })
	}
	return v == s.v
}

type member struct {
	name string
	n    node
}

type objectNode []member

func (o objectNode) match(v any, ok bool) bool {
	if !ok {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		for _, f := range o {
			e, present := x[f.name]
			if !f.n.match(e, present) {
				return false
			}
		}
		return true
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return o.match(e, true) })
	}
	return false
}

type arrayNode []node

func (a arrayNode) match(v any, ok bool) bool {
	arr, isArr := v.([]any)
	if !ok || !isArr {
		return false
	}
	for _, n := range a {
		if !slices.ContainsFunc(arr, func(e any) bool { return n.match(e, true) }) {
			return false
		}
	}
	return true
}

type opsNode []node

func (o opsNode) match(v any, ok bool) bool {
	for _, n := range o {
		if !n.match(v, ok) {
			return false
		}
	}
	return true
}

// anyOf applies pred to v, or to each element when v is an array.
func anyOf(v any, pred func(any) bool) bool {
	if arr, isArr := v.([]any); isArr {
		return slices.ContainsFunc(arr, pred)
	}
	return pred(v)
}

type eqOp struct {
	want any
	neq  bool
}

func (e eqOp) match(v any, ok bool) bool {
	if !ok {
		return false
	}
	eq := reflect.DeepEqual(e.want, v)
	if _, wantArr := e.want.([]any); !eq && !wantArr {
		// Against an array value: some element is deeply equal.
		if arr, isArr := v.([]any); isArr {
			eq = slices.ContainsFunc(arr, func(x any) bool { return reflect.DeepEqual(e.want, x) })
		}
	}
	return eq != e.neq
}

type cmpOp struct {
	op   string
	want any
}

func (c cmpOp) match(v any, ok bool) bool {
	return ok && anyOf(v, func(x any) bool {
		var r int
		switch w := c.want.(type) {
		case float64:
			f, isNum := x.(float64)
			if s, isStr := x.(string); isStr {
				// Header and query values are strings: compare numeric ones as numbers.
				var err error
				if f, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
					isNum = true
				}
			}
			if !isNum {
				return false
			}
			switch {
			case f < w:
				r = -1
			case f > w:
				r = 1
			}
		case string:
			s, isStr := x.(string)
			if !isStr {
				return false
			}
			r = strings.Compare(s, w)
		}
		switch c.op {
		case "$gt":
			return r > 0
		case "$gte":
			return r >= 0
		case "$lt":
			return r < 0
		}
		return r <= 0
	})
}

type affixOp struct {
	s      string
	prefix bool
}

func (a affixOp) match(v any, ok bool) bool {
	return ok && anyOf(v, func(x any) bool {
		s, isStr := x.(string)
		if !isStr {
			return false
		}
		if a.prefix {
			return strings.HasPrefix(s, a.s)
		}
		return strings.HasSuffix(s, a.s)
	})
}

type regexOp struct{ re *regexp.Regexp }

func (r regexOp) match(v any, ok bool) bool {
	return ok && anyOf(v, func(x any) bool {
		s, isStr := x.(string)
		return isStr && r.re.MatchString(s)
	})
}

type existOp bool

func (e existOp) match(_ any, ok bool) bool { return ok == bool(e) }

type inOp struct {
	list any // []any or string
	not  bool
}

func (in inOp) match(v any, ok bool) bool {
	if !ok {
		return false
	}
	var hit bool
	switch l := in.list.(type) {
	case string:
		switch x := v.(type) {
		case string:
			hit = strings.Contains(x, l)
		case []any:
			hit = slices.Contains(x, any(l))
		}
	case []any:
		hit = anyOf(v, func(x any) bool {
			return slices.ContainsFunc(l, func(w any) bool { return reflect.DeepEqual(w, x) })
		})
	}
	return hit != in.not
}

type logicOp struct {
	or   bool
	subs []node
}

func (l logicOp) match(v any, ok bool) bool {
	for _, n := range l.subs {
		if n.match(v, ok) == l.or {
			return l.or
		}
	}
	return !l.or
}

type notOp struct{ n node }

func (n notOp) match(v any, ok bool) bool { return ok && !n.n.match(v, ok) }

// Request is what a rule looks at. Its views are built on first use and
// shared by every rule evaluated against it.
type Request struct {
	Header      http.Header
	Query       url.Values
	Path        string
	Body        []byte
	ContentType string

	body, headers, query any
	parsed               bool
}

func (r *Request) views() {
	if r.parsed {
		return
	}
	r.parsed = true
	h := make(map[string]any, len(r.Header))
	for k, vs := range r.Header {
		if len(vs) > 0 {
			h[strings.ToLower(k)] = vs[0]
		}
	}
	r.headers = h
	q := make(map[string]any, len(r.Query))
	for k, vs := range r.Query {
		if len(vs) > 0 {
			q[k] = vs[0]
		}
	}
	r.query = q
	r.body = parseBody(r.Body, r.ContentType)
}

func parseBody(b []byte, ctype string) any {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && json.Valid(trimmed) {
		var v any
		if err := json.Unmarshal(trimmed, &v); err == nil {
			return v
		}
	}
	if mt, _, _ := mime.ParseMediaType(ctype); mt == "application/x-www-form-urlencoded" {
		if vals, err := url.ParseQuery(string(b)); err == nil {
			m := make(map[string]any, len(vals))
			for k, vs := range vals {
				if len(vs) > 0 {
					m[k] = vs[0]
				}
			}
			return m
		}
	}
	return string(b)
}

// Rule is one entry of a source's ignore list: filters over some of the
// request's headers, query, path and body, all of which must match.
type Rule struct {
	headers, query, path, body *Filter
}

// Sections are the keys a rule may have.
var Sections = []string{"headers", "query", "path", "body"}

// CompileRule compiles one rule: an object with any of the keys headers,
// query, path and body (at least one), each a filter. Header names are
// matched case-insensitively.
func CompileRule(spec map[string]any, path string) (*Rule, error) {
	r := &Rule{}
	if len(spec) == 0 {
		return nil, bad(path, "a rule needs at least one of %s", strings.Join(Sections, ", "))
	}
	for k, v := range spec {
		p := join(path, k)
		v = normalize(v)
		if k == "headers" {
			if m, ok := v.(map[string]any); ok {
				lower := make(map[string]any, len(m))
				for name, f := range m {
					if !strings.HasPrefix(name, "$") {
						name = strings.ToLower(name)
					}
					lower[name] = f
				}
				v = lower
			}
		}
		f, err := Compile(v, p)
		if err != nil {
			return nil, err
		}
		switch k {
		case "headers":
			r.headers = &f
		case "query":
			r.query = &f
		case "path":
			r.path = &f
		case "body":
			r.body = &f
		default:
			return nil, bad(p, "unknown section (a rule has %s)", strings.Join(Sections, ", "))
		}
	}
	return r, nil
}

// Match reports whether the request matches every section of the rule.
func (r *Rule) Match(req *Request) bool {
	req.views()
	for _, s := range []struct {
		f *Filter
		v any
	}{{r.headers, req.headers}, {r.query, req.query}, {r.path, req.Path}, {r.body, req.body}} {
		if s.f != nil && !s.f.Match(s.v) {
			return false
		}
	}
	return true
}
