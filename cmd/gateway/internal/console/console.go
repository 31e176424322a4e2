package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CSP allows nothing but the console's own script, style and requests.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options configure a Console.
type Options struct {
	// API is the ledger API client the console reads and acts through.
	API *ledgerapi.Client
	// Token is the admin token a person signs in with; empty means the
	// console is open to whoever reaches the (loopback) admin listener.
	Token string
	// Sources are the configured source names, listed on the overview even
	// before they saw traffic.
	Sources []string
	// Metrics is where the overview reads request, queue and dead letter
	// figures; nil shows none.
	Metrics prometheus.Gatherer
	Clock   func() time.Time
	Logger  *zap.Logger
	// TrustForwardedProto: the console is reached through a TLS proxy that
	// sets X-Forwarded-Proto; "https" there makes the session cookie
	// Secure (and __Host-). Leave it off unless such a proxy is the only
	// way in: anyone else could send the header.
	TrustForwardedProto bool
	// History is this instance's last hour per source and minute, drawn
	// on the overview; nil draws none. Its owner runs it (History.Run).
	History *History
	// Rejected reads the requests this instance refused for a source
	// before the ledger (GET /v1/rejected); nil hides the Rejected page.
	Rejected func(ctx context.Context, source string) ([]ingress.Rejected, error)
}

// Console serves the admin console. Mount it at "/" beside the API.
type Console struct {
	api      *ledgerapi.Client
	token    [32]byte
	open     bool
	sources  []string
	now      func() time.Time
	log      *zap.Logger
	tmpl     map[string]*template.Template
	sessions *sessions
	history  *History
	metrics  prometheus.Gatherer
	mux      *http.ServeMux
	// rejectedOf: Options.Rejected.
	rejectedOf func(ctx context.Context, source string) ([]ingress.Rejected, error)
}

// New builds a Console.
func New(o Options) (*Console, error) {
	if o.API == nil {
		return nil, errors.New("console: an API client is required")
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	c := &Console{api: o.API, token: sha256.Sum256([]byte(o.Token)), open: o.Token == "", now: o.Clock, log: o.Logger,
		sessions: newSessions(o.Clock), history: o.History, metrics: o.Metrics, rejectedOf: o.Rejected}
	c.sessions.trustProto = o.TrustForwardedProto
	c.sources = append([]string{}, o.Sources...)
	sort.Strings(c.sources)
	var err error
	if c.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: static files: %w", err)
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.Handle("POST /logout", c.action(c.logout))
	m.Handle("GET /{$}", c.page(c.overview))
	m.Handle("GET /overview/live", c.page(c.overviewLive))
	m.Handle("GET /events", c.page(c.events))
	m.Handle("GET /event", c.page(c.event))
	m.Handle("GET /event/body", c.page(c.eventBody))
	m.Handle("GET /event/replay", c.page(c.replayConfirm))
	m.Handle("POST /event/replay", c.action(c.replay))
	m.Handle("POST /event/trial", c.action(c.trial))
	m.Handle("GET /events/replay", c.page(c.bulkConfirm))
	m.Handle("POST /events/replay", c.action(c.bulkReplay))
	m.Handle("GET /scope", c.page(c.conversation))
	m.Handle("GET /conversations", c.page(c.conversations))
	m.Handle("GET /ambiguous", c.page(c.ambiguous))
	m.Handle("GET /ambiguous/resolve", c.page(c.resolveConfirm))
	m.Handle("POST /ambiguous/resolve", c.action(c.resolve))
	m.Handle("GET /sources", c.page(c.sourcesPage))
	m.Handle("GET /rejected", c.page(c.rejected))
	m.Handle("POST /sources/pause", c.action(func(w http.ResponseWriter, r *http.Request, s *session) error { return c.pause(w, r, true) }))
	m.Handle("POST /sources/resume", c.action(func(w http.ResponseWriter, r *http.Request, s *session) error { return c.pause(w, r, false) }))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, &httpError{status: http.StatusNotFound, msg: "There is no such page."})
	})
	c.mux = m
	return c, nil
}

// ServeHTTP sets the headers every answer carries and routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make the browser send Origin: null on our own forms
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// httpError is a refusal with the status and the sentence a person sees.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// statusOf is the one place an error becomes the status of a page.
func statusOf(err error) (int, string) {
	var he *httpError
	var ae *ledgerapi.Error
	switch {
	case errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500:
		return ae.Status, ae.Message
	case errors.As(err, &he):
		return he.status, he.msg
	case errors.Is(err, ledger.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, ledger.ErrUnknownRun), errors.Is(err, ledger.ErrUnknownEntry):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, ledger.ErrNotAmbiguous), errors.Is(err, ledger.ErrDeliveryInFlight), errors.Is(err, ledger.ErrAlreadySettled):
		return http.StatusConflict, err.Error()
	}
	return http.StatusServiceUnavailable, "The ledger store is unavailable; nothing was changed. Try again shortly."
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status, msg := statusOf(err)
	if status >= 500 {
		c.log.Error("console: store failure", zap.String("path", r.URL.Path), zap.Error(err))
	}
	c.render(w, r, s, status, "error", "Error", map[string]any{"Status": status, "Message": msg})
}

// page wraps a GET handler: a session is required (signing in first when a
// token is configured).
func (c *Console) page(h func(http.ResponseWriter, *http.Request, *session) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.sessions.get(r)
		if s == nil && c.open {
			s = c.sessions.start(w, r)
		}
		if s == nil {
			if r.Header.Get("X-Console-Fetch") != "" {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Location", "/login?next="+url.QueryEscape(r.URL.RequestURI()))
			w.WriteHeader(http.StatusSeeOther)
			return
		}
		if err := h(w, r, s); err != nil {
			c.fail(w, r, s, err)
		}
	})
}

// action wraps a POST handler: a session and its CSRF token are required,
// and a request the browser marks cross-site is refused outright.
func (c *Console) action(h func(http.ResponseWriter, *http.Request, *session) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.sessions.get(r)
		if s == nil {
			c.fail(w, r, nil, &httpError{status: http.StatusUnauthorized, msg: "Sign in first; nothing was changed."})
			return
		}
		if err := checkSameOrigin(r); err != nil {
			c.fail(w, r, s, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostFormValue("csrf")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			c.fail(w, r, s, &httpError{status: http.StatusForbidden, msg: "The form's CSRF token is missing or stale; reload the page and try again. Nothing was changed."})
			return
		}
		if err := h(w, r, s); err != nil {
			c.fail(w, r, s, err)
		}
	})
}

// checkSameOrigin refuses what a browser says comes from another site.
func checkSameOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return &httpError{status: http.StatusForbidden, msg: "Cross-site requests are refused; nothing was changed."}
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return &httpError{status: http.StatusForbidden, msg: "Requests from another origin are refused; nothing was changed."}
		}
	} else if o == "null" {
		return &httpError{status: http.StatusForbidden, msg: "Requests from an opaque origin are refused; nothing was changed."}
	}
	return nil
}

// redirect answers a form with 303 to a page of the console. A fetch call
// (X-Console-Fetch) gets 204 instead.
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	if r.Header.Get("X-Console-Fetch") != "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusSeeOther)
}

// localPath keeps a "next" target inside the console.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.IsAbs() || u.Host != "" || len(p) == 0 || p[0] != '/' || len(p) > 1 && (p[1] == '/' || p[1] == '\\') {
		return "/"
	}
	return p
}
