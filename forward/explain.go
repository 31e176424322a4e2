package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// AgentError is the Err of every failed Outcome: a sentence in plain words
// saying what went wrong and what to check (Error), with the underlying
// error kept for errors.Is and errors.As (Unwrap). The same sentence is
// what the log, `gateway events show`, the console and alerts show, so an
// operator reads "the agent did not answer within forward.timeout (2s)"
// rather than "context deadline exceeded".
type AgentError struct {
	// Plain is the sentence: lower case, no trailing period, naming the
	// configuration key or the URL to check.
	Plain string
	// Cause is what the HTTP client or the agent's status said.
	Cause error
}

func (e *AgentError) Error() string { return e.Plain }

func (e *AgentError) Unwrap() error { return e.Cause }

// errForwardTimeout is the cause of a forward's context when its own
// forward.timeout ran out, as opposed to a caller's deadline or shutdown.
var errForwardTimeout = errors.New("forward: forward.timeout ran out")

// explainTransport words a failure to get any answer from the agent.
func explainTransport(ctx context.Context, err error, rawURL string, timeout time.Duration) *AgentError {
	where := redactURL(rawURL)
	var dns *net.DNSError
	switch {
	case errors.Is(context.Cause(ctx), errForwardTimeout):
		return &AgentError{Plain: fmt.Sprintf("the agent did not answer within forward.timeout (%s)", timeout),
			Cause: errors.Join(err, context.DeadlineExceeded)}
	case errors.Is(err, context.Canceled):
		return &AgentError{Plain: "the forward was cut short before the agent answered (the gateway is stopping or the request was abandoned)", Cause: err}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &AgentError{Plain: fmt.Sprintf("nothing is listening at %s (connection refused): check that the agent is running and forward.url", where), Cause: err}
	case errors.As(err, &dns):
		return &AgentError{Plain: fmt.Sprintf("the agent's host in %s could not be resolved: check forward.url", where), Cause: err}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &AgentError{Plain: fmt.Sprintf("the agent at %s closed the connection without answering", where), Cause: err}
	case isTimeout(err):
		return &AgentError{Plain: fmt.Sprintf("the connection to the agent at %s timed out", where), Cause: err}
	}
	return &AgentError{Plain: fmt.Sprintf("the agent at %s could not be reached: %s", where, innermost(err)), Cause: err}
}

// explainStatus words an agent's non-2xx answer. cause wraps ErrAgentStatus
// or ErrRedirect.
func explainStatus(status int, location, rawURL string, cause error) *AgentError {
	where := redactURL(rawURL)
	text := fmt.Sprintf("%d %s", status, http.StatusText(status))
	var plain string
	switch {
	case status >= 300 && status < 400:
		plain = fmt.Sprintf("the agent answered %d, a redirect to %q, which is never followed: set forward.url to the final address", status, location)
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		plain = fmt.Sprintf("the agent refused the gateway's credentials (%s): check forward.signing_secret and forward.headers", text)
	case status == http.StatusNotFound, status == http.StatusGone:
		plain = fmt.Sprintf("the agent has nothing at %s (%s): check forward.url", where, text)
	case status == http.StatusMethodNotAllowed:
		plain = fmt.Sprintf("the agent does not take POST at %s (%s): check forward.url", where, text)
	case status == http.StatusTooManyRequests:
		plain = fmt.Sprintf("the agent asked the gateway to slow down (%s): check forward.concurrency", text)
	case status >= 500:
		plain = fmt.Sprintf("the agent failed (%s): see the agent's own log", text)
	default:
		plain = fmt.Sprintf("the agent answered %s", text)
	}
	return &AgentError{Plain: plain, Cause: cause}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// innermost is the text of the deepest error of a single chain: the
// *url.Error around a transport error repeats the method and URL, which
// the sentence already names.
func innermost(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// redactURL is rawURL with its password, if any, replaced (user:xxxxx@),
// so that it can go into logs and alerts.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "forward.url"
	}
	return u.Redacted()
}
