package forward

import (
	"net"
	"net/http"
	"time"
)

// ClientOptions tune NewClient. Zero fields take the defaults noted on each.
type ClientOptions struct {
	// MaxIdleConnsPerHost is how many idle connections are kept per agent host (default 64).
	// net/http's own default of 2 would make a burst of concurrent forwards open and discard
	// connections to the one or two agent hosts a gateway talks to.
	MaxIdleConnsPerHost int
	// MaxConnsPerHost caps connections per agent host, idle or not (default 0: no cap), so an
	// operator can protect a small agent from a burst; excess forwards wait for a connection.
	MaxConnsPerHost int
	// IdleConnTimeout closes connections idle this long (default 90s).
	IdleConnTimeout time.Duration
	// DialTimeout bounds connecting to the agent (default 5s), independently of the forward
	// timeout, so an unroutable agent fails fast.
	DialTimeout time.Duration
}

// NewClient returns an HTTP client for forwarding: a pooled transport sized for many concurrent
// requests to few hosts, and no redirect following (a 3xx comes back as the response, which
// Forward classifies as Retry). It has no overall Timeout because each Forward sets its own
// deadline. Proxies are taken from the environment as net/http does by default.
func NewClient(o ClientOptions) *http.Client {
	if o.MaxIdleConnsPerHost <= 0 {
		o.MaxIdleConnsPerHost = 64
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = 90 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	maxIdle := 4 * o.MaxIdleConnsPerHost
	dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          maxIdle,
			MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
			MaxConnsPerHost:       o.MaxConnsPerHost,
			IdleConnTimeout:       o.IdleConnTimeout,
			TLSHandshakeTimeout:   o.DialTimeout,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: noRedirect,
	}
}

// noRedirect hands the 3xx back as the response: following it would resend the body to a host
// nobody configured.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
