// Package filter matches webhook requests against JSON filters written in
// the syntax Hookdeck and Convoy users already know. The gateway uses it for
// a source's ignore rules.
//
// A filter is compiled once, when the configuration is loaded (regular
// expressions included), and evaluated per request without I/O. A bad
// filter is refused with an error that names its field path, such as
// sources.slack.ignore[0].body.event.$regex.
//
// # Semantics
//
// What we follow, and where the two products differ, what we chose:
//
//   - A scalar (string, number, boolean, null) matches an equal value of
//     the same JSON type: "1" does not equal 1. Against an array it matches
//     when some element is equal ("array contains").
//   - An object matches an object when every key matches (AND), nesting as
//     deep as the filter does. Against an array it matches when some element
//     matches the whole object.
//   - An array matches an array that contains every one of its elements
//     (Hookdeck's "array contains all"); it never matches a scalar.
//   - A field the filter names that the value lacks does not match, whatever
//     the operator, except {$exist: false}. So $neq and $nin also need the
//     field to be there.
//   - An object whose keys start with "$" is a set of operators that must
//     all hold: $eq, $neq (deep equality as above, the negation for $neq),
//     $gt $gte $lt $lte (numbers with numbers, strings with strings in byte
//     order, so RFC 3339 times compare as times; other types never match),
//     $startsWith $endsWith (strings), $regex (Go RE2 syntax, unanchored:
//     write ^ and $ yourself), $exist (true: present, null included; false:
//     absent), $in and $nin, $or and $and (a list of filters for the same
//     value) and $not (a filter). Operators and plain keys cannot share one
//     object: write {$and: [...]} instead.
//   - $in takes a list (Convoy, MongoDB: the value equals one of its items;
//     an array value matches when one of its elements does) or a string
//     (Hookdeck: a string value contains it as a substring; an array value
//     contains it as an element). $nin is its negation, on a present field.
//   - Against an array value, $eq, $gt..$lte, $startsWith, $endsWith and
//     $regex hold when some element satisfies them; $neq and $nin hold when
//     no element is equal / included.
//
// The request is seen as four values: headers (an object of lower-case
// header names to their first value), query (parameter name to first
// value), path (the request path, a string) and body (the parsed JSON; a
// form-encoded body as an object of field to first value; anything else as
// one string).
package filter
