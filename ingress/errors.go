package ingress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
)

// Error is a failure whose HTTP meaning is known where it happens. The
// message is for the provider; Cause stays in the log.
type Error struct {
	Status     int
	Message    string        // safe to show the caller
	Reason     string        // short machine word for logs and metrics
	RetryAfter time.Duration // for 503 and 429
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// errorBody is what every non-2xx answer carries.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
}

// errorHandler is the one place where errors become HTTP answers.
func (g *Gateway) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ie *Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ie):
	case errors.As(err, &he) && he.Code == http.StatusNotFound:
		ie = &Error{Status: http.StatusNotFound, Message: "no such route", Reason: "no_route"}
	case errors.As(err, &he) && he.Code == http.StatusMethodNotAllowed:
		ie = &Error{Status: http.StatusMethodNotAllowed, Message: "method not allowed", Reason: "method"}
	default:
		// Unknown failures must leave the provider retrying.
		ie = &Error{Status: http.StatusServiceUnavailable, Message: "temporarily unavailable", Reason: "internal", Cause: err}
		g.log.Error("unexpected error", zap.Error(err), zap.String("path", c.Request().URL.Path))
	}
	if ie.Status == http.StatusServiceUnavailable || ie.Status == http.StatusTooManyRequests {
		c.Response().Header().Set("Retry-After", retryAfterSeconds(ie.RetryAfter))
	}
	body := errorBody{Error: ie.Message, Reason: ie.Reason}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ie.Status)
		return
	}
	_ = writeJSON(c, ie.Status, body)
}

// writeJSON writes every JSON answer, with its length. An answer without
// one goes out chunked once handle flushes it (answerSent), and then its end
// is a second write to the provider's connection; with it, the answer is
// one write.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("ingress: answer: %w", err)
	}
	b = append(b, '\n') // as echo's c.JSON wrote it
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	return c.JSONBlob(status, b)
}

// retryAfterSeconds renders a Retry-After of at least one second, rounding
// up, without overflowing on durations near the largest one.
func retryAfterSeconds(d time.Duration) string {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
