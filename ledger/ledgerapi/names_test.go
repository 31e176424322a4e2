package ledgerapi_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/storetest/backends"
)

// randomText is n random bytes, as a chaos trial sends: mostly invalid
// UTF-8 and with NULs.
func randomText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return string(b)
}

// quoted is s as a JSON string. json.Marshal would replace invalid UTF-8
// with U+FFFD; the bytes go out raw, as a careless client sends them.
func quoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			m, _ := json.Marshal(string(rune(c)))
			b.Write(m[1 : len(m)-1])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// A scope, source or id no store can hold is a 400 naming the field on
// every store, never a 503 "retry later": the same rule at the API's edge
// whatever the store behind it. PostgreSQL alone used to answer a NUL or a
// 10 KB scope with 503.
func TestBadNamesAre400OnEveryStore(t *testing.T) {
	nul := "conv\x00one"
	long := strings.Repeat("s", 10*1024)
	junk := randomText(10 * 1024)
	cases := []struct {
		name, method, path, body, field string
	}{
		{"begin with a NUL scope", "POST", "/v1/runs", `{"scope":` + quoted(nul) + `}`, "scope"},
		{"begin with a 10 KB scope", "POST", "/v1/runs", `{"scope":"` + long + `"}`, "scope"},
		{"begin with a 10 KB random scope", "POST", "/v1/runs", `{"scope":` + quoted(junk) + `}`, "body"},
		{"begin with a 10 KB random scope as valid text", "POST", "/v1/runs", `{"scope":` + quoted(strings.ToValidUTF8(junk, "?")) + `}`, "scope"},
		{"claim with a NUL scope", "POST", "/v1/claims", `{"scope":` + quoted(nul) + `,"intent":"tag","payload":1}`, "scope"},
		{"claim with a 10 KB scope", "POST", "/v1/claims", `{"scope":"` + long + `","intent":"tag","payload":1}`, "scope"},
		{"begin with invalid UTF-8 in run_id", "POST", "/v1/runs", `{"scope":"conv-1","run_id":"job` + "\xff" + `"}`, "body"},
		{"history of a scope with invalid UTF-8", "GET", "/v1/scopes/" + url.PathEscape("conv\xff") + "/history", "", "scope"},
		{"check with a 10 KB scope", "POST", "/v1/check", `{"scope":"` + long + `","intent":"tag","payload":1}`, "scope"},
		{"history of a NUL scope", "GET", "/v1/scopes/" + url.PathEscape(nul) + "/history", "", "scope"},
		{"timeline of a 10 KB scope", "GET", "/v1/scopes/" + long + "/timeline", "", "scope"},
		{"deliveries of a NUL source", "GET", "/v1/deliveries?source=" + url.QueryEscape(nul), "", "source"},
		{"pause of a 10 KB source", "POST", "/v1/sources/pause", `{"source":"` + long + `"}`, "source"},
		{"replay filtered by a NUL scope", "POST", "/v1/deliveries/replay", `{"filter":{"status":"dead","scope":` + quoted(nul) + `}}`, "filter.scope"},
	}
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			s, _ := b.Open(t)
			e := newEnv(t, s)
			for _, c := range cases {
				status, body := e.call(t, c.method, c.path, bearer, c.body)
				if status != 400 || errorCode(body) != ledgerapi.CodeInvalidRequest {
					t.Errorf("%s: %d %v, want 400 %s", c.name, status, body, ledgerapi.CodeInvalidRequest)
					continue
				}
				if msg, _ := body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, c.field+":") {
					t.Errorf("%s: message %q does not name the field %s", c.name, msg, c.field)
				}
			}
			// The longest name allowed is held by the store.
			ok := strings.Repeat("k", ledgerapi.MaxNameBytes)
			if status, body := e.call(t, "POST", "/v1/runs", bearer, `{"scope":"`+ok+`"}`); status != 200 {
				t.Errorf("begin with a %d-byte scope: %d %v, want 200", len(ok), status, body)
			}
		})
	}
}

// With the gateway's sources named (WithSources), every endpoint that
// takes a source refuses one that is not configured, naming it, instead
// of listing nothing or pausing a source that does not exist. A source
// paused and then taken out of the configuration can still be resumed.
func TestUnknownSourcesAreRefused(t *testing.T) {
	e := newEnv(t, nil, ledgerapi.WithSources([]string{"github", "stripe"}))
	if err := e.ledger.Sources().SetSourcePaused(context.Background(), "retired", true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, method, path, body, field string }{
		{"list", "GET", "/v1/deliveries?source=gitlab", "", "source"},
		{"page", "GET", "/v1/deliveries?page=10&source=gitlab", "", "source"},
		{"show", "GET", "/v1/deliveries/show?source=gitlab&event_id=e1", "", "source"},
		{"replay one", "POST", "/v1/deliveries/replay", `{"source":"gitlab","event_id":"e1"}`, "source"},
		{"replay by filter", "POST", "/v1/deliveries/replay", `{"filter":{"status":"dead","source":"gitlab"}}`, "filter.source"},
		{"pause", "POST", "/v1/sources/pause", `{"source":"gitlab"}`, "source"},
		{"resume", "POST", "/v1/sources/resume", `{"source":"gitlab"}`, "source"},
		{"pause of a retired source", "POST", "/v1/sources/pause", `{"source":"retired"}`, "source"},
	} {
		status, body := e.call(t, c.method, c.path, bearer, c.body)
		msg, _ := body["error"].(map[string]any)["message"].(string)
		if status != 400 || errorCode(body) != ledgerapi.CodeInvalidRequest || !strings.Contains(msg, c.field+": unknown source") ||
			!strings.Contains(msg, "configured: github, stripe") {
			t.Errorf("%s: %d %v, want 400 naming %s and the configured sources", c.name, status, body, c.field)
		}
	}
	if status, body := e.call(t, "POST", "/v1/sources/pause", bearer, `{"source":"github"}`); status != 200 {
		t.Errorf("pause of a configured source: %d %v", status, body)
	}
	if status, body := e.call(t, "GET", "/v1/deliveries?source=stripe", bearer, ""); status != 200 {
		t.Errorf("list of a configured source: %d %v", status, body)
	}
	status, body := e.call(t, "POST", "/v1/sources/resume", bearer, `{"source":"retired"}`)
	if status != 200 {
		t.Fatalf("resume of a paused source no longer configured: %d %v", status, body)
	}
	if paused, _ := body["paused"].([]any); len(paused) != 1 || paused[0] != "github" {
		t.Errorf("paused after resuming retired: %v, want [github]", body["paused"])
	}
}
