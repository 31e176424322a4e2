package ingress_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/field"
)

// wantRefused checks a 400 whose body names the rule and the problem, and
// that nothing reached the ledger or the agent.
func wantRefused(t *testing.T, h *harness, r reply, reason string, mentions ...string) {
	t.Helper()
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(string(r.Body), `"reason":"`+reason+`"`) {
		t.Errorf("body %s, want reason %q", r.Body, reason)
	}
	for _, m := range mentions {
		if !strings.Contains(string(r.Body), m) {
			t.Errorf("body %s does not mention %q", r.Body, m)
		}
	}
	if n := h.store.writes.Load(); n != 0 {
		t.Errorf("the ledger wrote %d documents for a refused event", n)
	}
	if n := h.sink.totalCount(); n != 0 {
		t.Errorf("the agent got %d requests for a refused event", n)
	}
}

// Event ids a store cannot hold faithfully are refused once, at the edge,
// with a 400 naming the rule: ids differing only in invalid UTF-8 would
// collapse into one event, and NUL, control characters or ids past the
// bound would fail in the store (503 forever) or in the forward.
func TestEventIDsAreCheckedAtTheEdge(t *testing.T) {
	for _, tc := range []struct {
		name, id, mention string
	}{
		{"invalid UTF-8", "evt_\xff", "not valid UTF-8"},
		{"other invalid UTF-8", "evt_\xfe", "not valid UTF-8"},
		{"NUL", "evt_\x00x", "control character"},
		{"tab", "evt\tx", "control character"},
		{"C1 control", "evt\u0085x", "control character"},
		{"too long", "evt_" + strings.Repeat("a", ingress.MaxIDBytes), "over the limit of " + strconv.Itoa(ingress.MaxIDBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, stripeSource("stripe"))
			// Written raw into the JSON: gjson hands the bytes back as they are.
			body := []byte(`{"id":"` + tc.id + `","type":"invoice.paid"}`)
			if tc.name == "NUL" {
				body = []byte(`{"id":"evt_\u0000x","type":"invoice.paid"}`)
			}
			r := h.postStripe(t, "stripe", body, h.clock.Now())
			wantRefused(t, h, r, "invalid_event_id", "event id", "{json:id}", tc.mention)
		})
	}
	t.Run("at the bound and beyond ASCII", func(t *testing.T) {
		h := newHarness(t, stripeSource("stripe"))
		for _, id := range []string{"evt_日本語_ü", strings.Repeat("b", ingress.MaxIDBytes)} {
			r := h.postStripe(t, "stripe", []byte(`{"id":"`+id+`"}`), h.clock.Now())
			wantAnswer(t, r, "delivered", id, "stripe:"+id)
		}
	})
}

func TestScopeIsCheckedAtTheEdge(t *testing.T) {
	h := newHarness(t, stripeSource("stripe", func(c *ingress.SourceConfig) { c.Scope = []string{"{json:data.object.customer}"} }))
	r := h.postStripe(t, "stripe", []byte(`{"id":"evt_1","data":{"object":{"customer":"cus_\u0001"}}}`), h.clock.Now())
	wantRefused(t, h, r, "invalid_scope", "scope", "{json:data.object.customer}", "control character")
	r = h.postStripe(t, "stripe", []byte(`{"id":"evt_1","data":{"object":{"customer":"cus_ok"}}}`), h.clock.Now())
	wantAnswer(t, r, "delivered", "evt_1", "stripe:evt_1")
	if e := h.deliverEntry(t, "cus_ok"); e.State != "committed" {
		t.Errorf("deliver entry on scope cus_ok is %s", e.State)
	}
}

// A context_at that no real event can have (a microsecond timestamp read
// as milliseconds lands past the year 9999) is refused with a 400 naming
// the rule and the bound, and nothing is written.
func TestContextAtOutOfRange(t *testing.T) {
	newH := func(t *testing.T) *harness {
		return newHarness(t, stripeSource("stripe", func(c *ingress.SourceConfig) { c.ContextAt = []string{"{json:created}"} }))
	}
	now := time.Now()
	for _, tc := range []struct{ name, created, mention string }{
		{"microseconds", strconv.FormatInt(now.UnixMicro(), 10), "more than 1h0m0s after"},
		{"nanoseconds", strconv.FormatInt(now.UnixNano(), 10), "more than 1h0m0s after"},
		{"huge float", "1e300", "more than 1h0m0s after"},
		{"two hours ahead", strconv.FormatInt(now.Add(2*time.Hour).Unix(), 10), "more than 1h0m0s after"},
		{"far date", `"9999-12-31T23:59:59Z"`, "more than 1h0m0s after"},
		{"before 1970", `"1969-07-20T20:17:40Z"`, "before 1970"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newH(t)
			r := h.postStripe(t, "stripe", []byte(`{"id":"evt_c","created":`+tc.created+`}`), h.clock.Now())
			wantRefused(t, h, r, "invalid_context_at", "context_at", "{json:created}", tc.mention)
		})
	}
	t.Run("in range", func(t *testing.T) {
		h := newH(t)
		for i, at := range []time.Time{now.Add(-72 * time.Hour), now.Add(30 * time.Minute)} {
			id := fmt.Sprintf("evt_ok%d", i)
			r := h.postStripe(t, "stripe", []byte(fmt.Sprintf(`{"id":%q,"created":%d}`, id, at.Unix())), h.clock.Now())
			wantAnswer(t, r, "delivered", id, "stripe:"+id)
		}
	})
}

// A source name is the start of every run id: a ':' (or anything but
// letters, digits, '_', '-') would make run ids ambiguous, and is a
// configuration error naming the field.
func TestSourceNamesThatMakeRunIDsAmbiguous(t *testing.T) {
	for _, name := range []string{"a:b", "a.b", "a b", "a/b", "", "a\x00", "é", strings.Repeat("x", ingress.MaxSourceName+1)} {
		_, err := ingress.NewSource(githubSource(name, func(c *ingress.SourceConfig) { c.Forward.URL = "http://127.0.0.1:1/x" }))
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Field != "sources" || !strings.Contains(err.Error(), "source name") {
			t.Errorf("source name %q: error %v, want a field error on sources naming the source name", name, err)
		}
	}
	for _, name := range []string{"github", "gh-2_prod"} {
		if _, err := ingress.NewSource(githubSource(name, func(c *ingress.SourceConfig) { c.Forward.URL = "http://127.0.0.1:1/x" })); err != nil {
			t.Errorf("source name %q: %v", name, err)
		}
	}
}

// The agent's Retry-After reaches the provider only up to the source's
// retry_after, however large it is (a day, a date in 2099, a number past
// int64's seconds).
func TestAgentRetryAfterIsClamped(t *testing.T) {
	for _, agentSays := range []string{"86400", "Tue, 01 Jan 2099 00:00:00 GMT", "9223372036854775807", "99999999999999999999999", "3"} {
		t.Run(agentSays, func(t *testing.T) {
			h := newHarness(t, githubSource("github", func(c *ingress.SourceConfig) { c.RetryAfter = 7 * time.Second }))
			h.sink.setAnswer(func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Retry-After", agentSays)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			r := h.postGitHub(t, "github", "d-ra")
			wantStatus(t, r, http.StatusServiceUnavailable)
			want := 7
			if agentSays == "3" {
				want = 3
			}
			if got := r.retryAfter(t); got != want {
				t.Errorf("Retry-After = %d, want %d", got, want)
			}
		})
	}
}

// Every JSON answer carries its length, so it leaves in one write and the
// provider needs no chunked decoding: a delivery, its duplicate, and a
// refusal.
func TestAnswersCarryTheirLength(t *testing.T) {
	h := newHarness(t, githubSource("github"))
	forged := h.newRequest(t, http.MethodPost, "/hooks/github", githubHeader("d-forged"), []byte(`{}`))
	forged.Header.Set("X-Hub-Signature-256", "sha256=00")
	for name, r := range map[string]reply{
		"delivered": h.postGitHub(t, "github", "d-len"),
		"duplicate": h.postGitHub(t, "github", "d-len"),
		"refused":   h.do(t, forged),
	} {
		if got, want := r.Header.Get("Content-Length"), strconv.Itoa(len(r.Body)); got != want || len(r.Body) == 0 {
			t.Errorf("%s answer: Content-Length %q, want %s (%s)", name, got, want, r)
		}
	}
}
