package forward

import (
	"errors"
	"net/url"
)

// ErrAnswerTooLarge is wrapped by BodyErr.
var ErrAnswerTooLarge = errors.New("too large")

// Request is what is sent.
type Request struct {
	// KeepBody keeps up to that many bytes of a 2xx answer. A longer body
	// is not kept: BodyTooLarge says so.
	KeepBody int64
	// Query is read with url.ParseQuery, never url.ParseQueryFast.
	Query url.Values
}

// Outcome is what came back.
type Outcome struct {
	BodyErr error
}
