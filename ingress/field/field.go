package field

import (
	"errors"
	"fmt"
)

// Error is one problem in a configuration: the field it is in and, when
// known, the line of the file. Several are joined with errors.Join; List
// takes them apart again.
type Error struct {
	Field string
	Line  int // 0: not known
	Err   error
}

func (e *Error) Error() string {
	msg := e.Field + ": " + e.Err.Error()
	if e.Line > 0 {
		msg += fmt.Sprintf(" (line %d)", e.Line)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf is a problem with field, its message formatted as fmt.Errorf
// does (so %w wraps).
func Errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Err: fmt.Errorf(format, args...)}
}

// Wrap names the field of err, a problem found by code that does not know
// where its value came from.
func Wrap(field string, err error) *Error {
	return &Error{Field: field, Err: err}
}

// List returns the field errors inside err, in order: err itself, or the
// ones it joins (nested joins included). Nil when err holds none.
func List(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		var fe *Error
		if errors.As(e, &fe) {
			out = append(out, fe)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}
