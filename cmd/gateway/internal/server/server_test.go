package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http keeps idle client connections' readers alive until the
		// transport closes them; the reader goroutine may still be on its
		// way out.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	)
}

const (
	secret = "whsec_c2VydmVyIHBhY2thZ2UgdGVzdCBzZWNyZXQ="
	token  = "server-test-admin-token"
)

// get answers path on h, with the admin token.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

// A queued event goes in through the gateway's handler and out through
// the dispatcher New built, and the one registry shows the handler's, the
// dispatcher's and the sources' health metrics on the admin handler.
func TestBuiltGatewayDeliversAQueuedEvent(t *testing.T) {
	var got atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer agent.Close()
	src, err := ingress.NewSource(ingress.SourceConfig{Name: "s", Provider: "standard-webhooks",
		Signature: signatures.Config{Secrets: []string{secret}},
		Forward:   ingress.ForwardConfig{Target: forward.Target{URL: agent.URL}, Queue: dispatch.Policy{Mode: dispatch.ModeQueued}}})
	if err != nil {
		t.Fatal(err)
	}
	client := forward.NewClient(forward.ClientOptions{})
	defer client.CloseIdleConnections()
	s, err := New(Options{Store: memory.New(nil), Sources: []*ingress.Source{src}, HTTPClient: client,
		Admin: config.Admin{Listen: "127.0.0.1:0", Token: token}, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() {
		stop()
		<-done
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	}()

	signer, err := signatures.NewSigner("standard-webhooks", signatures.Config{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	req := &signatures.Request{Method: http.MethodPost, Header: http.Header{}, Body: []byte(`{"type":"ping"}`)}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Id", "msg_1")
	if err := signer.Sign(req, time.Now()); err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewRequest(http.MethodPost, "/hooks/s", bytes.NewReader(req.Body))
	hook.Header = req.Header
	rec := httptest.NewRecorder()
	s.Gateway.ServeHTTP(rec, hook)
	if rec.Code != http.StatusAccepted && rec.Code != http.StatusOK {
		t.Fatalf("webhook answered %d %s", rec.Code, rec.Body)
	}
	// The attempt is counted once it is settled, just after the agent's
	// answer.
	var body string
	testkit.Eventually(t, "the queued event delivered and counted", func() bool {
		var code int
		code, body = get(t, s.Admin, "/metrics")
		return got.Load() == 1 && code == http.StatusOK &&
			strings.Contains(body, `replyonce_delivery_attempts_total{outcome="delivered",source="s"} 1`)
	})
	for _, want := range []string{
		`replyonce_source_health{health="healthy",source="s"} 1`, // read from the store
		`replyonce_requests_total{source="s",status="202"} 1`,    // the handler's
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

// /readyz is ready on a reachable store, and 503 from Stopping on.
func TestReadyzDownFromStopping(t *testing.T) {
	s, err := New(Options{Store: memory.New(nil), Admin: config.Admin{Listen: "127.0.0.1:0", Token: token}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if code, body := get(t, s.Admin, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %s, want 200", code, body)
	}
	s.Stopping()
	if code, body := get(t, s.Admin, "/readyz"); code != http.StatusServiceUnavailable || body != "shutting down\n" {
		t.Fatalf("/readyz after Stopping = %d %q, want 503 shutting down", code, body)
	}
}

// Without admin.listen there is no admin handler.
func TestNoAdminWithoutListen(t *testing.T) {
	s, err := New(Options{Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Admin != nil {
		t.Fatal("an admin handler without admin.listen")
	}
}
