// Package extract reads the event id, the scope and contextAt out of a webhook request with
// templates that are parsed once, at configuration time, and resolved per request without decoding
// the whole body.
//
// # Syntax
//
// A template is literal text with placeholders in braces:
//
//	{header:Name}          a request header, matched case-insensitively (first value)
//	{query:name}           a URL query parameter (first value)
//	{json:path}            a gjson path into the raw body, e.g. {json:data.object.id}, {json:data.0.id}
//	{form:field}           a field of an application/x-www-form-urlencoded body (first value)
//	{form:field|json:path} a gjson path into JSON carried in a form field (Slack's payload=...)
//
// The "|json:path" suffix also works after header and query, for providers that put JSON there.
// Inside {json:...} a "|" belongs to the gjson path (gjson uses it for pipes), and braces may nest
// so gjson's multipath and modifier syntax survives; names of the other kinds cannot contain
// "{", "}" or "|".
//
// Literal text between placeholders builds composite keys: "{json:RecordType}:{json:MessageID}".
// Literal text cannot contain braces. A template with no placeholder at all is allowed and always
// resolves to its text (a fixed scope, say); whether that makes sense is the configuration's call.
//
// A Rule is an ordered list of templates; it resolves to the first template whose every
// placeholder resolves.
//
// # What it promises
//
// A placeholder never resolves to nothing: a missing header, parameter, field or path, a value that
// is empty or only whitespace, a JSON null, object or array all make the placeholder, and so the whole
// template, unresolved. So an event id can never collapse to "" or to a bare separator like ":".
//
// JSON strings come out unquoted and unescaped; JSON numbers come out as their raw text, so 123 stays
// "123" and 12345678901234567890 is not rounded through a float; true and false come out as such.
//
// Form placeholders only resolve when the request's media type is application/x-www-form-urlencoded
// (parameters such as charset are ignored). The body is parsed at most once per Input, and only if
// a form placeholder is reached; a malformed pair does not hide the well-formed ones. An Input is
// meant for one request on one goroutine.
//
// Templates and Rules are immutable after parsing and safe for concurrent use. Resolve uses no
// regular expressions and allocates only for the value it returns (and for the form parse when a
// form placeholder is used).
package extract
