package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replyonce/gateway/signatures"
)

// consolePages is every page of the console, and consoleActions every
// state-changing request, with arguments that would work for a session.
var consolePages = []string{"/", "/overview/live", "/events", "/events?status=queued", "/event?source=stripe&event_id=evt_1",
	"/event/body?source=stripe&event_id=evt_1", "/events/replay?status=dead", "/scope?scope=cus_1", "/ambiguous",
	"/ambiguous/resolve?scope=s&entry_id=e&outcome=committed", "/sources", "/conversations", "/conversations?prefix=cus_&source=stripe", "/rejected", "/rejected?source=stripe"}

var consoleActions = map[string]url.Values{
	"/sources/pause":      {"source": {"github"}},
	"/sources/resume":     {"source": {"github"}},
	"/event/replay":       {"source": {"stripe"}, "event_id": {"evt_1"}},
	"/events/replay":      {"source": {"billing"}, "status": {"dead"}},
	"/ambiguous/resolve":  {"scope": {"s"}, "entry_id": {"e"}, "outcome": {"committed"}, "who": {"x"}},
	"/logout":             {},
	"/overview/live":      {},
	"/events?status=dead": {},
}

func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Without the session cookie every page sends the browser to sign in and
// shows nothing, and every action is refused and changes nothing.
func TestConsoleRefusesWithoutSession(t *testing.T) {
	e := startConsoleEnv(t, "{kind: memory}")
	hc := noRedirects(nil)
	for _, p := range consolePages {
		resp, err := hc.Get(e.admin + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s without a session: %d %s, want 303 to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
		if len(body) > 0 {
			t.Errorf("GET %s without a session answered a body: %q", p, body)
		}
	}
	// A forged cookie is no session either.
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(e.admin)
	jar.SetCookies(u, []*http.Cookie{{Name: "replyonce_console", Value: "forged-session-id"}})
	for _, client := range []*http.Client{hc, noRedirects(jar)} {
		for p, form := range consoleActions {
			resp, err := client.PostForm(e.admin+p, form)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// 401 for an action; a path that takes no POST is a 404.
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound {
				t.Errorf("POST %s without a session: %d, want 401 (or 404 where the path takes no POST)", p, resp.StatusCode)
			}
		}
	}
	if paused, err := e.api.PausedSources(context.Background()); err != nil || len(paused) != 0 {
		t.Fatalf("a refused pause paused: %v %v", paused, err)
	}
}

// signedIn returns a client holding a console session and the session's
// CSRF token, signed in the way a browser does.
func signedIn(t *testing.T, e *consoleEnv) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := noRedirects(jar)
	resp, err := hc.PostForm(e.admin+"/login", url.Values{"token": {consoleToken}, "next": {"/sources"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Secure {
		t.Fatalf("sign in: %d %+v, want 303 and one HttpOnly SameSite=Strict cookie (not Secure over plain HTTP)", resp.StatusCode, ck)
	}
	resp, err = hc.Get(e.admin + "/sources")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<meta name="csrf" content="([^"]+)">`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page: %s", page)
	}
	return hc, string(m[1])
}

// A state-changing request needs the session's CSRF token, and one the
// browser marks cross-site is refused even with it.
func TestConsoleCSRF(t *testing.T) {
	e := startConsoleEnv(t, "{kind: memory}")
	hc, csrf := signedIn(t, e)
	try := func(form url.Values, header map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, e.admin+"/sources/pause", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, c := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"no token":               {url.Values{"source": {"github"}}, nil},
		"wrong token":            {url.Values{"source": {"github"}, "csrf": {csrf + "x"}}, nil},
		"cross-site with token":  {url.Values{"source": {"github"}, "csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"other origin":           {url.Values{"source": {"github"}, "csrf": {csrf}}, map[string]string{"Origin": "http://evil.example"}},
		"opaque origin":          {url.Values{"source": {"github"}, "csrf": {csrf}}, map[string]string{"Origin": "null"}},
		"token of a header only": {url.Values{"source": {"github"}}, map[string]string{"X-CSRF-Token": "nope"}},
	} {
		if got := try(c.form, c.header); got != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, got)
		}
	}
	if paused, _ := e.api.PausedSources(context.Background()); len(paused) != 0 {
		t.Fatalf("a refused request paused %v", paused)
	}
	if got := try(url.Values{"source": {"github"}, "csrf": {csrf}}, map[string]string{"Origin": e.admin, "Sec-Fetch-Site": "same-origin"}); got != http.StatusSeeOther {
		t.Fatalf("the console's own form: %d, want 303", got)
	}
	if paused, _ := e.api.PausedSources(context.Background()); len(paused) != 1 {
		t.Fatalf("the console's own form did not pause: %v", paused)
	}
}

// The console is served on the admin listener only.
func TestConsoleNotOnPublicListener(t *testing.T) {
	e := startConsoleEnv(t, "{kind: memory}")
	hc := noRedirects(nil)
	for _, p := range append([]string{"/login", "/static/console.css", "/static/console.js"}, consolePages...) {
		resp, err := hc.Get("http://" + e.g.public + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "console") || strings.Contains(string(body), "<html") {
			t.Errorf("public GET %s: %d %q, want a plain 404", p, resp.StatusCode, body)
		}
	}
	resp, err := hc.PostForm("http://"+e.g.public+"/login", url.Values{"token": {consoleToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || len(resp.Cookies()) != 0 {
		t.Fatalf("public POST /login: %d %v", resp.StatusCode, resp.Cookies())
	}
}

// A cross-site page whose form posts to the console (the browser carries
// the session cookie for a same-site origin such as another port) changes
// nothing: the form cannot know the CSRF token.
func TestConsoleCrossSiteFormInBrowser(t *testing.T) {
	e := startConsoleEnv(t, "{kind: memory}")
	ctx, _ := newBrowser(t)
	signIn(t, ctx, e.admin)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/sources/pause"><input name="source" value="github"><input name="csrf" value="guess"></form><script>document.getElementById("f").submit()</script>`, e.admin)
	}))
	defer evil.Close()
	var text string
	run(t, ctx, "evil page", chromedp.Navigate(evil.URL), chromedp.WaitVisible("#error-message", chromedp.ByID), chromedp.Text("#error-message", &text, chromedp.ByID))
	if !strings.Contains(text, "refused") && !strings.Contains(text, "CSRF") {
		t.Fatalf("the console answered the cross-site form with %q", text)
	}
	if paused, _ := e.api.PausedSources(context.Background()); len(paused) != 0 {
		t.Fatalf("a cross-site form paused %v", paused)
	}
}

// An event whose body, headers and id carry script runs nothing in the
// browser on any page that shows it.
func TestConsoleEscapesWebhookValuesInBrowser(t *testing.T) {
	e := startConsoleEnv(t, "{kind: memory}")
	ctx, dialogs := newBrowser(t)
	signIn(t, ctx, e.admin)
	id := `d-` + e.prefix + `"><img src=x onerror="window.__pwned=4;alert(4)">`
	body := []byte(`{"action":"<script>window.__pwned=5;alert(5)</script>","html":"<img src=x onerror=\"window.__pwned=6\">",` +
		`"url":"javascript:window.__pwned=7","attr":"\"onerror=window.__pwned=8 x=\"","svg":"<svg onload=window.__pwned=9>"}`)
	req := &signatures.Request{Method: http.MethodPost, Header: http.Header{
		"Content-Type":      {"application/json"},
		"X-Github-Event":    {`<script>window.__pwned=1;alert(1)</script>`},
		"X-Github-Hook-Id":  {`"onerror=window.__pwned=2 javascript:alert(2)`},
		"X-Github-Delivery": {id},
	}, Body: body}
	signer, err := signatures.NewSigner("github", signatures.Config{Secrets: []string{"gh-console-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := signer.Sign(req, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := post(t, e.hc, e.g.hook("github"), body, req.Header); r.status != http.StatusAccepted {
		t.Fatalf("post: %d %v", r.status, r.body)
	}
	waitFor(t, "the event forwarded", func() bool { return len(e.agent.forwards(id)) > 0 })
	eventURL := e.admin + "/event?" + url.Values{"source": {"github"}, "event_id": {id}}.Encode()
	for _, page := range []string{e.admin + "/events?source=github", e.admin + "/events?" + url.Values{"source": {"github"}, "event_id": {id}}.Encode(),
		eventURL, e.admin + "/scope?" + url.Values{"scope": {"github:" + id}}.Encode()} {
		run(t, ctx, "load "+page, chromedp.Navigate(page), chromedp.WaitReady("main", chromedp.ByQuery), chromedp.Sleep(300*time.Millisecond))
		var pwned bool
		var scripts, handlers, jsLinks int
		run(t, ctx, "inspect "+page,
			chromedp.Evaluate(`window.__pwned !== undefined`, &pwned),
			chromedp.Evaluate(`document.querySelectorAll("script").length`, &scripts),
			chromedp.Evaluate(`document.querySelectorAll("[onerror],[onload],[onclick]").length`, &handlers),
			chromedp.Evaluate(`document.querySelectorAll('a[href^="javascript:" i]').length`, &jsLinks))
		if pwned || scripts != 1 || handlers != 0 || jsLinks != 0 {
			t.Fatalf("%s: pwned=%v, %d script elements (want only the console's), %d event handler attributes, %d javascript: links", page, pwned, scripts, handlers, jsLinks)
		}
	}
	// The values are shown, as text.
	var shown string
	run(t, ctx, "event page", chromedp.Navigate(eventURL), chromedp.WaitVisible("#body", chromedp.ByID), chromedp.Text("main", &shown, chromedp.ByQuery))
	for _, want := range []string{`<script>window.__pwned=5;alert(5)</script>`, `<script>window.__pwned=1;alert(1)</script>`, `"onerror=window.__pwned=2 javascript:alert(2)`, `onerror="window.__pwned=4;alert(4)">`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the event page does not show %q as text", want)
		}
	}
	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d dialog(s) opened", n)
	}
}
