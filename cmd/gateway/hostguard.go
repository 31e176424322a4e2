package main

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// hostGuard serves the admin listener only to requests whose Host names it:
// its own listen address, "localhost" or a loopback address when it
// listens on loopback, any IP address when it listens on every interface,
// and the names in admin.allowed_hosts. A web page that rebinds its own
// DNS name to the listener's address (DNS rebinding) sends that name as
// Host, so it is refused before the console or the ledger API sees the
// request, with a token or without; the console's Origin check, which
// compares with Host, is sound only once Host is known to be ours. An IP
// literal cannot be rebound, so it is refused only where the listener
// could not be reached at it.
type hostGuard struct {
	next     http.Handler
	log      *zap.Logger
	name     string // the listen host when it is a name, lowercased
	ip       net.IP // the listen host when it is an address
	wildcard bool   // listening on every interface
	allowed  map[string]bool

	mu          sync.Mutex
	window      time.Time // start of the current minute of refusal lines
	logged      int
	suppressedN int
}

// refusalLines bounds the refusals logged per minute.
const refusalLines = 10

func newHostGuard(listen string, allowed []string, log *zap.Logger, next http.Handler) http.Handler {
	g := &hostGuard{next: next, log: log, allowed: map[string]bool{}}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	host = normalHost(host)
	switch ip := net.ParseIP(host); {
	case host == "":
		g.wildcard = true
	case ip != nil && ip.IsUnspecified():
		g.wildcard = true
	case ip != nil:
		g.ip = ip
	default:
		g.name = host
	}
	for _, h := range allowed {
		g.allowed[normalHost(h)] = true
	}
	return g
}

// normalHost lowercases a host and drops IPv6 brackets and a final dot.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// allows reports whether the Host header names this listener.
func (g *hostGuard) allows(hostHeader string) bool {
	host := hostHeader
	if h, _, err := net.SplitHostPort(hostHeader); err == nil {
		host = h
	}
	host = normalHost(host)
	if host == "" {
		return false
	}
	if g.allowed[host] || host == g.name {
		return true
	}
	loopback := g.name == "localhost" || g.ip != nil && g.ip.IsLoopback()
	if host == "localhost" {
		return loopback || g.wildcard
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return false
	case g.wildcard:
		return true
	case loopback && ip.IsLoopback():
		return true
	}
	return g.ip != nil && g.ip.Equal(ip)
}

func (g *hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.allows(r.Host) {
		g.next.ServeHTTP(w, r)
		return
	}
	g.logRefusal(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(`{"error":{"code":"host_not_allowed","message":"this Host is not one of the admin listener's names; add it to admin.allowed_hosts"}}` + "\n"))
}

// logRefusal logs at most refusalLines refusals a minute: the Host is the
// caller's, and a page rebinding in a loop must not fill the log.
func (g *hostGuard) logRefusal(r *http.Request) {
	g.mu.Lock()
	now := time.Now()
	if now.Sub(g.window) >= time.Minute {
		g.window, g.logged = now, 0
	}
	ok := g.logged < refusalLines
	suppressed := 0
	if ok {
		g.logged++
		suppressed, g.suppressedN = g.suppressedN, 0
	} else {
		g.suppressedN++
	}
	g.mu.Unlock()
	if !ok {
		return
	}
	host := r.Host
	if len(host) > 64 {
		host = host[:64] + "..."
	}
	g.log.Warn("admin: request for a Host that is not this listener's refused (DNS rebinding?); see admin.allowed_hosts",
		zap.String("host", host), zap.String("path", clipPath(r.URL.Path)), zap.Int("suppressed", suppressed))
}

func clipPath(p string) string {
	if len(p) > 64 {
		return p[:64] + "..."
	}
	return p
}
