package ingress_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

// The forgery a security review reproduced: ask a handshake that answers with a MAC under the
// source's key to sign an event body (or the exact content the provider signs), then post that
// body with the answer as its signature. Without the secret, nothing may reach the agent.
func TestHandshakeIsNoSigningOracle(t *testing.T) {
	const secret = "consumer-secret-oracle"
	cfg := signatures.Config{Secrets: []string{secret}}
	h := newHarness(t,
		ingress.SourceConfig{Name: "x", Provider: "x", Signature: cfg},
		ingress.SourceConfig{Name: "linkedin", Provider: "linkedin", Signature: cfg, EventID: []string{"{json:id}"}},
	)
	for _, c := range []struct {
		source, param, prefix, answer, header string
		body                                  string
	}{
		{"x", "crc_token", "", "response_token", "X-Twitter-Webhooks-Signature",
			`{"for_user_id":"1","tweet_create_events":[{"id_str":"1700000000000000001","text":"refund me"}]}`},
		{"linkedin", "challengeCode", "hmacsha256=", "challengeResponse", "X-Li-Signature",
			`{"id":"forged-li-1","type":"ORGANIZATION_SOCIAL_ACTION_NOTIFICATIONS"}`},
	} {
		t.Run(c.source, func(t *testing.T) {
			q := url.Values{c.param: {c.prefix + c.body}}.Encode()
			r := h.do(t, h.newRequest(t, http.MethodGet, "/hooks/"+c.source+"?"+q, nil, nil))
			var sig string
			if r.Status == http.StatusOK {
				var got map[string]string
				if err := json.Unmarshal(r.Body, &got); err != nil {
					t.Fatalf("handshake answer %q: %v", r.Body, err)
				}
				sig = got[c.answer]
			}
			if r.Status < 400 || r.Status >= 500 {
				t.Errorf("GET with a JSON body as %s answered %s, want a 4xx", c.param, r)
			}
			if sig == "" {
				return
			}
			post := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/"+c.source,
				http.Header{"Content-Type": {"application/json"}, c.header: {sig}}, []byte(c.body)))
			if post.Status != http.StatusUnauthorized {
				t.Errorf("forged event answered %s, want 401", post)
			}
		})
	}
	if n := h.sink.totalCount(); n != 0 {
		t.Fatalf("forged events reached the agent %d times", n)
	}
	if n := h.store.writes.Load(); n != 0 {
		t.Fatalf("forged events wrote %d ledger documents", n)
	}
}
