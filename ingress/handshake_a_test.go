package ingress_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
)

// The handshakes of the registry's batch 2 through the gateway: exact answers, 401 where the provider
// probes with bad signatures, and never a ledger write or a forward.
func TestHandshakesBatchA(t *testing.T) {
	const secret = "batch-a-secret"
	cfg := signatures.Config{Secrets: []string{secret}}
	withURL := signatures.Config{Secrets: []string{secret}, URL: "https://hooks.example.com/hooks/trello"}
	h := newHarness(t,
		ingress.SourceConfig{Name: "xero", Provider: "xero", Signature: cfg},
		ingress.SourceConfig{Name: "okta", Provider: "okta", Signature: cfg},
		ingress.SourceConfig{Name: "trello", Provider: "trello", Signature: withURL},
		ingress.SourceConfig{Name: "linkedin", Provider: "linkedin", Signature: cfg, EventID: []string{"{json:id}"}},
		ingress.SourceConfig{Name: "worldline", Provider: "worldline", Signature: cfg},
		ingress.SourceConfig{Name: "github", Provider: "github", Signature: cfg},
		ingress.SourceConfig{Name: "notion", Provider: "notion", Signature: cfg},
		ingress.SourceConfig{Name: "onfleet", Provider: "onfleet", Signature: signatures.Config{Secrets: []string{hex.EncodeToString([]byte(secret))}},
			EventID: []string{"{json:taskId}"}},
		ingress.SourceConfig{Name: "woo", Provider: "woocommerce", Signature: cfg},
		ingress.SourceConfig{Name: "bk", Provider: "buildkite", Signature: cfg},
		ingress.SourceConfig{Name: "mandrill", Provider: "mandrill", Signature: signatures.Config{Secrets: []string{secret}, URL: "https://hooks.example.com/hooks/mandrill"},
			EventID: []string{"{form:id}"}},
	)
	b64mac := func(key, msg string) string {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(msg))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}

	t.Run("xero intent to receive", func(t *testing.T) {
		body := `{"events":[],"lastEventSequence":0,"firstEventSequence":0,"entropy":"YSXCMKAQBJOEPFJPUGHE"}`
		good := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/xero", http.Header{"X-Xero-Signature": {b64mac(secret, body)}}, []byte(body)))
		wantStatus(t, good, http.StatusOK)
		if len(good.Body) != 0 || good.Header.Get("Set-Cookie") != "" {
			t.Errorf("good ITR answered with body %q / cookie; Xero wants none", good.Body)
		}
		bad := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/xero", http.Header{"X-Xero-Signature": {b64mac("wrong", body)}}, []byte(body)))
		wantStatus(t, bad, http.StatusUnauthorized)
	})

	t.Run("okta verification GET", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodGet, "/hooks/okta", http.Header{"X-Okta-Verification-Challenge": {"dCbWuSnBJBr7N1pMGjCj"}, "Authorization": {secret}}, nil))
		wantStatus(t, r, http.StatusOK)
		if string(r.Body) != `{"verification":"dCbWuSnBJBr7N1pMGjCj"}` || r.mediaType(t) != "application/json" {
			t.Errorf("answer %q", r.Body)
		}
		r = h.do(t, h.newRequest(t, http.MethodGet, "/hooks/okta", http.Header{"X-Okta-Verification-Challenge": {"x"}, "Authorization": {"guess"}}, nil))
		wantStatus(t, r, http.StatusUnauthorized)
	})

	t.Run("trello HEAD", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodHead, "/hooks/trello", nil, nil))
		wantStatus(t, r, http.StatusOK)
	})

	t.Run("HEAD elsewhere is still 405", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodHead, "/hooks/github", nil, nil))
		wantStatus(t, r, http.StatusMethodNotAllowed)
	})

	t.Run("linkedin challengeCode", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodGet, "/hooks/linkedin?challengeCode=890e4a4c-1d9b-4f0e-8c2a-5d1e7b3a9f60", nil, nil))
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte("890e4a4c-1d9b-4f0e-8c2a-5d1e7b3a9f60"))
		wantStatus(t, r, http.StatusOK)
		if want := `{"challengeCode":"890e4a4c-1d9b-4f0e-8c2a-5d1e7b3a9f60","challengeResponse":"` + hex.EncodeToString(m.Sum(nil)) + `"}`; string(r.Body) != want {
			t.Errorf("answer %q, want %q", r.Body, want)
		}
	})

	t.Run("worldline verification GET", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodGet, "/hooks/worldline", http.Header{"X-GCS-Webhooks-Endpoint-Verification": {"9f2c"}}, nil))
		wantStatus(t, r, http.StatusOK)
		if string(r.Body) != "9f2c" || r.mediaType(t) != "text/plain" {
			t.Errorf("answer %q", r.Body)
		}
	})

	t.Run("notion verification_token", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/notion", http.Header{"Content-Type": {"application/json"}}, []byte(`{"verification_token":"secret_tok_1"}`)))
		wantStatus(t, r, http.StatusOK)
		if r.Header.Get("X-Notion-Verification-Token") != "secret_tok_1" {
			t.Errorf("token not returned: %v", r.Header)
		}
	})

	t.Run("onfleet check", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodGet, "/hooks/onfleet?check=c0ffee", nil, nil))
		wantStatus(t, r, http.StatusOK)
		if string(r.Body) != "c0ffee" {
			t.Errorf("answer %q", r.Body)
		}
	})

	t.Run("woocommerce ping", func(t *testing.T) {
		r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/woo", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, []byte("webhook_id=31")))
		wantStatus(t, r, http.StatusOK)
	})

	t.Run("buildkite ping", func(t *testing.T) {
		body := []byte(`{"event":"ping","service":{"id":"s1"}}`)
		hdr := http.Header{"Content-Type": {"application/json"}, "X-Buildkite-Event": {"ping"}}
		sign(t, "buildkite", cfg, h.clock.Now(), http.MethodPost, "", hdr, body)
		wantStatus(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/bk", hdr, body)), http.StatusOK)
		unsigned := http.Header{"Content-Type": {"application/json"}, "X-Buildkite-Event": {"ping"}}
		wantStatus(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/bk", unsigned, body)), http.StatusUnauthorized)
	})

	t.Run("mandrill HEAD", func(t *testing.T) {
		wantStatus(t, h.do(t, h.newRequest(t, http.MethodHead, "/hooks/mandrill", nil, nil)), http.StatusOK)
	})

	if n := h.store.writes.Load(); n != 0 {
		t.Errorf("handshakes wrote %d ledger documents, want none", n)
	}
	if n := h.sink.totalCount(); n != 0 {
		t.Errorf("handshakes reached the agent %d times, want never", n)
	}
}

// Notion's verification token reaches the operator through the log, since Notion wants it pasted
// back and it must not become a secret on its own.
func TestNotionTokenLogged(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	src, err := ingress.NewSource(ingress.SourceConfig{Name: "notion", Provider: "notion",
		Signature: signatures.Config{Secrets: []string{"configured"}}, Forward: ingress.ForwardConfig{Target: forward.Target{URL: "http://127.0.0.1:1/"}}})
	if err != nil {
		t.Fatal(err)
	}
	client := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(client.CloseIdleConnections)
	gw, err := ingress.New(ingress.Options{Sources: []*ingress.Source{src}, Ledger: ledger.New(memory.New(time.Now), ledger.Options{}),
		Forwarder: forward.New(client, time.Now), Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hooks/notion", strings.NewReader(`{"verification_token":"secret_tok_9"}`)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	found := 0
	for _, e := range logs.All() {
		if note, ok := e.ContextMap()["note"].(string); ok && strings.Contains(note, "secret_tok_9") {
			found++
		}
	}
	if found != 1 {
		t.Fatalf("token logged %d times: %v", found, logs.All())
	}
	// Anyone can send it: a flood of them is throttled like 401s.
	for i := range 200 {
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hooks/notion", strings.NewReader(`{"verification_token":"secret_flood_`+strconv.Itoa(i)+`"}`)))
	}
	if n := logs.Len(); n > 10 {
		t.Fatalf("201 Notion handshakes logged %d lines, want at most 10 a minute", n)
	}
}
