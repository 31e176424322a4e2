package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// layout is what every page's frame needs.
type layout struct {
	Title string
	Nav   string
	Open  bool   // no token configured
	CSRF  string // empty when signed out
	Now   time.Time
	Data  any
}

func parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"ts":     stamp,
		"ago":    ago,
		"ms":     func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + " ms" },
		"link":   link,
		"status": statusClass,
		"inc":    func(i int) int { return i + 1 },
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	pages, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, p)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes a page; a fragment (name starting "frag_") is rendered
// without the frame.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, name, title string, data any) {
	t := c.tmpl[name]
	if t == nil {
		c.log.Error("console: no template", zap.String("name", name))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	l := layout{Title: title, Nav: name, Open: c.open, Now: c.now(), Data: data}
	if s != nil {
		l.CSRF = s.csrf
	}
	var buf bytes.Buffer
	root := "layout.html"
	if strings.HasPrefix(name, "frag_") {
		root = "body"
	}
	if err := t.ExecuteTemplate(&buf, root, l); err != nil {
		c.log.Error("console: render", zap.String("name", name), zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// ago says how long before now t was (or, negative, how far ahead).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, " from now"
	}
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s" + suffix
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min" + suffix
	case d < 48*time.Hour:
		return strconv.FormatFloat(d.Hours(), 'f', 1, 64) + " h" + suffix
	}
	return strconv.Itoa(int(d.Hours()/24)) + " d" + suffix
}

// link builds a console path with a query from key, value pairs, leaving
// out empty values.
func link(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// statusClass maps any status string to a CSS class; unknown statuses
// (a newer gateway's) get the neutral one and still show their name.
func statusClass(s string) string {
	switch s {
	case "delivered", "committed", "executed", "replayed", "claimed", "reachable":
		return "st-ok"
	case "queued", "delivering", "pending", "in_flight", "paused":
		return "st-wait"
	case "dead", "rejected", "failed", "ambiguous", "refused", "unreachable", "retry", "fault":
		return "st-bad"
	case "superseded", "coalesced", "run_ended", "run_cancelled", "conversation_changed", "busy":
		return "st-fenced"
	}
	return "st-other"
}
