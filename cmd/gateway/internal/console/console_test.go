package console_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replyonce/gateway/cmd/gateway/internal/console"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	clock  *clock
	ledger *ledger.Ledger
	srv    *httptest.Server
	hc     *http.Client
}

// newEnv serves a console over an API served over HTTP, as another
// process could, on a memory ledger. tlsOn serves the console over TLS.
func newEnv(t *testing.T, token string, tlsOn bool) *env {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	l := ledger.New(memory.New(c.Now), ledger.Options{Clock: c.Now})
	api := httptest.NewServer(ledgerapi.NewHandler(l, token, nil))
	t.Cleanup(api.Close)
	client, err := ledgerapi.NewClient(api.URL, token, api.Client())
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Options{API: client, Token: token, Sources: []string{"gh"}, Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(con)
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	hc := srv.Client()
	hc.Jar = jar
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.Cleanup(hc.CloseIdleConnections)
	t.Cleanup(api.Client().CloseIdleConnections)
	return &env{clock: c, ledger: l, srv: srv, hc: hc}
}

func (e *env) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	resp, err := e.hc.Get(e.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *env) signIn(t *testing.T, token string) *http.Response {
	t.Helper()
	resp, err := e.hc.PostForm(e.srv.URL+"/login", url.Values{"token": {token}, "next": {"/events"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// Without a token, the console opens without sign in and says on every
// page that anyone on the host can use it.
func TestOpenConsoleSaysSo(t *testing.T) {
	e := newEnv(t, "", false)
	for _, p := range []string{"/", "/events", "/sources"} {
		resp, body := e.get(t, p)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="open-notice"`) || !strings.Contains(body, "open to anyone") {
			t.Fatalf("GET %s: %d, notice missing", p, resp.StatusCode)
		}
	}
	if resp, _ := e.get(t, "/login"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login page when open: %d", resp.StatusCode)
	}
}

// With a token, no page says the console is open, and a wrong token
// starts no session.
func TestTokenConsoleHasNoOpenNotice(t *testing.T) {
	e := newEnv(t, "tok", false)
	if resp := e.signIn(t, "nope"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d %v", resp.StatusCode, resp.Cookies())
	}
	if resp := e.signIn(t, "tok"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/events" {
		t.Fatalf("sign in: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body := e.get(t, "/events")
	if strings.Contains(body, "open-notice") || !strings.Contains(body, `id="events-table"`) {
		t.Fatal("signed-in events page is wrong")
	}
}

// The session cookie is Secure when the console is reached over TLS.
func TestSecureCookieOverTLS(t *testing.T) {
	e := newEnv(t, "tok", true)
	e.hc.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test server's own certificate
	resp := e.signIn(t, "tok")
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode ||
		ck[0].Name != console.HostCookieName || ck[0].Path != "/" || ck[0].Domain != "" {
		t.Fatalf("cookie over TLS: %+v", ck)
	}
	if resp, _ := e.get(t, "/events"); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the __Host- cookie: %d", resp.StatusCode)
	}
}

// Behind a TLS proxy the operator trusts, X-Forwarded-Proto: https makes
// the cookie Secure (and __Host-); without that trust the header is
// anyone's and changes nothing.
func TestSecureCookieBehindTrustedProxy(t *testing.T) {
	for _, trust := range []bool{true, false} {
		c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
		client, err := ledgerapi.NewClient("http://127.0.0.1:9", "tok", http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		con, err := console.New(console.Options{API: client, Token: "tok", Clock: c.Now, TrustForwardedProto: trust})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "http://console.example/login", strings.NewReader(url.Values{"token": {"tok"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", "https")
		rec := httptest.NewRecorder()
		con.ServeHTTP(rec, req)
		ck := rec.Result().Cookies()
		if len(ck) != 1 || ck[0].Secure != trust || (ck[0].Name == console.HostCookieName) != trust {
			t.Errorf("trust %v: cookie %+v", trust, ck)
		}
	}
}

// A session nobody used for 30 minutes ends; one in use goes on.
func TestSessionIdleTimeout(t *testing.T) {
	e := newEnv(t, "tok", false)
	e.signIn(t, "tok")
	for range 3 {
		e.clock.Add(20 * time.Minute)
		if resp, _ := e.get(t, "/events"); resp.StatusCode != http.StatusOK {
			t.Fatalf("a session used every 20 minutes ended: %d", resp.StatusCode)
		}
	}
	e.clock.Add(31 * time.Minute)
	if resp, _ := e.get(t, "/events"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session idle for 31 minutes still works: %d", resp.StatusCode)
	}
}

// Guessing the token is throttled: after ten failed sign-ins in a minute,
// /login answers 429, even to the right token, until the minute is over.
func TestLoginThrottled(t *testing.T) {
	e := newEnv(t, "tok", false)
	for i := range 10 {
		if resp := e.signIn(t, "guess"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	resp := e.signIn(t, "tok")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("eleventh attempt: %d (Retry-After %q), want 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	e.clock.Add(time.Minute)
	if resp := e.signIn(t, "tok"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a minute later: %d", resp.StatusCode)
	}
}

// A session ends 12 hours after sign in, and at sign out.
func TestSessionExpiresAndSignsOut(t *testing.T) {
	e := newEnv(t, "tok", false)
	e.signIn(t, "tok")
	if resp, _ := e.get(t, "/events"); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh session: %d", resp.StatusCode)
	}
	e.clock.Add(12*time.Hour + time.Second)
	if resp, _ := e.get(t, "/events"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a 12-hour-old session still works: %d", resp.StatusCode)
	}
	e.signIn(t, "tok")
	_, page := e.get(t, "/events")
	csrf := page[strings.Index(page, `name="csrf" content="`)+len(`name="csrf" content="`):]
	csrf = csrf[:strings.Index(csrf, `"`)]
	resp, err := e.hc.PostForm(e.srv.URL+"/logout", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp, _ := e.get(t, "/events"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after sign out: %d", resp.StatusCode)
	}
}

// Every answer, refusals and static files included, carries the strict
// policy and the headers that keep the console out of frames.
func TestSecurityHeadersEverywhere(t *testing.T) {
	e := newEnv(t, "tok", false)
	for _, p := range []string{"/", "/login", "/static/console.css", "/nope", "/events"} {
		resp, _ := e.get(t, p)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") ||
			resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: headers %v", p, resp.Header)
		}
	}
	// A next target outside the console is not followed.
	resp, err := e.hc.PostForm(e.srv.URL+"/login", url.Values{"token": {"tok"}, "next": {"//evil.example/x"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Location") != "/" {
		t.Fatalf("open redirect to %q", resp.Header.Get("Location"))
	}
}

// A large body is shown truncated with its download, which returns the
// raw bytes as an attachment.
func TestLargeBodyTruncatedWithDownload(t *testing.T) {
	e := newEnv(t, "tok", false)
	big := `{"text":"` + strings.Repeat("a", 100<<10) + `"}`
	_, err := e.ledger.Queue().Enqueue(context.Background(), ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: "gh", EventID: "big", Scope: "gh:big", ContentType: "application/json", Body: []byte(big)},
		Run:   ledger.RunOptions{RunID: "gh:big", Mode: ledger.ModeIndependent},
		Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: "gh:big", Intent: "deliver", Payload: map[string]string{"source": "gh", "eventId": "big"}}, PendingTTL: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.signIn(t, "tok")
	resp, page := e.get(t, "/event?source=gh&event_id=big")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Only the start is shown") || len(page) > 60<<10 || !strings.Contains(page, "/event/body?") {
		t.Fatalf("event page: %d, %d bytes", resp.StatusCode, len(page))
	}
	resp, body := e.get(t, "/event/body?source=gh&event_id=big")
	if resp.StatusCode != http.StatusOK || body != big || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
		resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("download: %d %d bytes %v", resp.StatusCode, len(body), resp.Header)
	}
}

// A store that does not answer shows as unreachable on the overview, and
// a page that needs it is a 503 that names no host, never a 2xx.
func TestStoreDownIsSaidNotHidden(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"store_unavailable","message":"dial tcp 10.9.8.7:5432: refused"}}`))
	}))
	defer down.Close()
	client, err := ledgerapi.NewClient(down.URL, "", down.Client())
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Options{API: client, Sources: []string{"gh"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	defer hc.CloseIdleConnections()
	defer down.Client().CloseIdleConnections()
	get := func(p string) (int, string) {
		resp, err := hc.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/"); code != http.StatusOK || !strings.Contains(body, `id="store-health">unreachable`) {
		t.Fatalf("overview with the store down: %d", code)
	}
	code, body := get("/events?status=queued")
	if code != http.StatusServiceUnavailable || strings.Contains(body, "10.9.8.7") || !strings.Contains(body, "unavailable") {
		t.Fatalf("events with the store down: %d %s", code, body)
	}
}
