package ingress_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/signatures"
)

// A webhook whose scope template resolves to a scope the gateway keeps
// for itself (the old paused-sources record among them) is refused with
// a 400 naming the rule, inline and queued, and writes nothing: before,
// one such event took over every source's dispatch.
func TestReservedScopeIsRefusedAtTheEdge(t *testing.T) {
	for _, mode := range []dispatch.Mode{dispatch.ModeInline, dispatch.ModeQueued} {
		t.Run(string(mode), func(t *testing.T) {
			for _, scope := range []string{"replyonce:control:paused-sources", "Replyonce:anything"} {
				h := newHarness(t, stripeSource("stripe", func(c *ingress.SourceConfig) {
					c.Scope = []string{"{json:data.object.customer}"}
					c.Forward.Queue.Mode = mode
				}))
				r := h.postStripe(t, "stripe", []byte(`{"id":"evt_r","data":{"object":{"customer":"`+scope+`"}}}`), h.clock.Now())
				wantRefused(t, h, r, "invalid_scope", "{json:data.object.customer}", "reserved")
				if set, err := h.ledger.Sources().PausedSources(context.Background()); err != nil || len(set) != 0 {
					t.Fatalf("paused sources after the refused event: %v, %v", set, err)
				}
			}
		})
	}
	t.Run("batch element", func(t *testing.T) {
		h := newHarness(t, ingress.SourceConfig{Name: "sg", Provider: "hmac", Split: "{json:@this}",
			EventID: []string{"{json:id}"}, Scope: []string{"{json:conv}"},
			Signature: signatures.Config{Secrets: []string{"batch-secret"}, HMAC: &signatures.HMACConfig{Header: "X-Sig"}}})
		hdr := http.Header{"Content-Type": {"application/json"}}
		body := sign(t, "hmac", signatures.Config{Secrets: []string{"batch-secret"}, HMAC: &signatures.HMACConfig{Header: "X-Sig"}}, h.clock.Now(),
			http.MethodPost, "", hdr, []byte(`[{"id":"a","conv":"c1"},{"id":"b","conv":"replyonce:control:paused-sources"}]`))
		r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/sg", hdr, body))
		wantRefused(t, h, r, "invalid_scope", "reserved")
	})
}

// A source named so that its events' default scope ({source}:{eventId})
// would be reserved is a configuration error.
func TestReservedSourceName(t *testing.T) {
	_, err := ingress.NewSource(githubSource("replyonce"))
	if err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("source named replyonce: %v", err)
	}
}

// A forward URL's password never reaches an error or `gateway check`'s
// route line.
func TestForwardURLPasswordNotShown(t *testing.T) {
	for _, u := range []string{"ftp://agent:hunter2@agent.internal/events", "agent:hunter2@agent.internal/events", "http://agent:hunter2@[::1/x"} {
		_, err := ingress.NewSource(githubSource("gh", func(c *ingress.SourceConfig) { c.Forward.URL = u }))
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("forward.url %q: error %v shows the password", u, err)
		}
	}
	src, err := ingress.NewSource(githubSource("gh", func(c *ingress.SourceConfig) { c.Forward.URL = "https://agent:hunter2@agent.internal/events" }))
	if err != nil {
		t.Fatal(err)
	}
	if d := src.Describe(); strings.Contains(d, "hunter2") || !strings.Contains(d, "agent.internal") {
		t.Errorf("route line %q", d)
	}
}
