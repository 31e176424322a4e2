package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CookieName is the session cookie's name over plain HTTP (loopback);
// HostCookieName its name over HTTPS, where the __Host- prefix makes the
// browser refuse it unless it is Secure, host-only and for the whole path,
// so no sibling subdomain can plant or shadow it.
const (
	CookieName     = "replyonce_console"
	HostCookieName = "__Host-replyonce_console"
)

// sessionTTL bounds a session's life; a person signs in again after it.
// idleTTL ends a session nobody used for that long.
const (
	sessionTTL = 12 * time.Hour
	idleTTL    = 30 * time.Minute
)

// Failed sign-ins are throttled: at most loginFailures a minute, for the
// whole console (a per-address budget would mean nothing behind a proxy);
// past it, /login answers 429 until the minute is over.
const loginFailures = 10

// maxSessions bounds the memory sessions take; the oldest goes first.
const maxSessions = 1000

type session struct {
	id      string
	csrf    string
	expires time.Time
	seen    time.Time // the last request it signed; idleTTL after it, it ends
}

// sessions lives in memory: a restart signs everyone out, which is the
// safe direction.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
	// trustProto: the console sits behind a TLS proxy that sets
	// X-Forwarded-Proto, and says so (admin.trust_forwarded_proto).
	trustProto bool
	// failures counts failed sign-ins in the minute from failWindow.
	failures   int
	failWindow time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, now: now}
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// key is what the map holds: a digest, so a timing difference in the map
// lookup tells nothing about a live id.
func key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(sum[:])
}

// secure reports whether the browser reached the console over HTTPS: its
// own TLS, or a proxy's that the operator said to trust.
func (ss *sessions) secure(r *http.Request) bool {
	return r.TLS != nil || ss.trustProto && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (ss *sessions) cookieName(r *http.Request) string {
	if ss.secure(r) {
		return HostCookieName
	}
	return CookieName
}

func (ss *sessions) get(r *http.Request) *session {
	ck, err := r.Cookie(ss.cookieName(r))
	if err != nil || ck.Value == "" {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[key(ck.Value)]
	if s == nil {
		return nil
	}
	now := ss.now()
	if !now.Before(s.expires) || now.Sub(s.seen) >= idleTTL {
		delete(ss.m, key(ck.Value))
		return nil
	}
	s.seen = now
	return s
}

// failed counts a failed sign-in; allowed reports whether another may be
// tried now, and if not, for how long it may not.
func (ss *sessions) failed() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.rollWindow()
	ss.failures++
}

func (ss *sessions) allowed() (bool, time.Duration) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.rollWindow()
	if ss.failures < loginFailures {
		return true, 0
	}
	return false, ss.failWindow.Add(time.Minute).Sub(ss.now())
}

// rollWindow starts a new minute of failures when the last one is over;
// the caller holds mu.
func (ss *sessions) rollWindow() {
	if now := ss.now(); now.Sub(ss.failWindow) >= time.Minute {
		ss.failWindow, ss.failures = now, 0
	}
}

func (ss *sessions) start(w http.ResponseWriter, r *http.Request) *session {
	s := &session{id: randomID(), csrf: randomID(), expires: ss.now().Add(sessionTTL), seen: ss.now()}
	ss.mu.Lock()
	now := ss.now()
	for k, old := range ss.m {
		if !now.Before(old.expires) {
			delete(ss.m, k)
		}
	}
	if len(ss.m) >= maxSessions {
		var oldest string
		for k, old := range ss.m {
			if oldest == "" || old.expires.Before(ss.m[oldest].expires) {
				oldest = k
			}
		}
		delete(ss.m, oldest)
	}
	ss.m[key(s.id)] = s
	ss.mu.Unlock()
	// Max-Age, not Expires: the browser counts the life from its own clock,
	// so a gateway whose clock is off (or injected, in tests) cannot hand out
	// a cookie that is already expired on arrival. The server still ends the
	// session at s.expires by its own clock.
	http.SetCookie(w, &http.Cookie{Name: ss.cookieName(r), Value: s.id, Path: "/", HttpOnly: true, Secure: ss.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL / time.Second)})
	return s
}

func (ss *sessions) end(w http.ResponseWriter, r *http.Request, s *session) {
	ss.mu.Lock()
	delete(ss.m, key(s.id))
	ss.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: ss.cookieName(r), Value: "", Path: "/", HttpOnly: true, Secure: ss.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.open {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, http.StatusOK, "login", "Sign in", map[string]any{"Next": localPath(r.URL.Query().Get("next"))})
}

// login checks the typed token and starts a session. The comparison is
// over digests, in constant time, like the API's bearer check.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.open {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if err := checkSameOrigin(r); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if ok, wait := c.sessions.allowed(); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		http.Error(w, "too many failed sign-ins: wait a minute", http.StatusTooManyRequests)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	sum := sha256.Sum256([]byte(r.PostFormValue("token")))
	next := localPath(r.PostFormValue("next"))
	if subtle.ConstantTimeCompare(sum[:], c.token[:]) != 1 {
		c.sessions.failed()
		c.render(w, r, nil, http.StatusUnauthorized, "login", "Sign in", map[string]any{"Next": next, "Wrong": true})
		return
	}
	if old := c.sessions.get(r); old != nil {
		c.sessions.end(w, r, old) // a new session id at each sign in
	}
	c.sessions.start(w, r)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) error {
	c.sessions.end(w, r, s)
	if c.open {
		redirect(w, r, "/")
		return nil
	}
	redirect(w, r, "/login")
	return nil
}
