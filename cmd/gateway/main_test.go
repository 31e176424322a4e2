package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/signatures"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http keeps idle client connections' readers alive until the
		// transport closes them; the tests close their transports, but the
		// reader goroutine may still be on its way out.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	)
}

const stripeSecret = "whsec_test_secret_for_e2e"

// sink is an agent that counts what it receives.
type sink struct {
	mu       sync.Mutex
	received []*http.Request
	bodies   [][]byte
	// answer decides each response; nil answers 200.
	answer func(n int, r *http.Request) (status int, delay time.Duration)
	srv    *httptest.Server
}

func newSink(t *testing.T) *sink {
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.received = append(s.received, r)
		s.bodies = append(s.bodies, body)
		n := len(s.received)
		answer := s.answer
		s.mu.Unlock()
		status, delay := http.StatusOK, time.Duration(0)
		if answer != nil {
			status, delay = answer(n, r)
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.received)
}

func (s *sink) request(i int) *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received[i]
}

func (s *sink) setAnswer(f func(n int, r *http.Request) (int, time.Duration)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = f
}

// gateway is a running `gateway serve`.
type gateway struct {
	public, admin string
	cancel        context.CancelFunc
	done          chan error
	stderr        *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeConfig writes a config file with a stripe source forwarding to sinkURL.
func writeConfig(t *testing.T, store, extra string, sinkURL string) string {
	t.Helper()
	if !strings.Contains(extra, "      mode:") {
		// These tests are about inline delivery unless they say otherwise;
		// queued is the configuration's default.
		extra = "      mode: inline\n" + extra
	}
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
store: %s
log: {level: info, format: json}
server: {read_header_timeout: 500ms, shutdown_grace: 10s}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    retry_after: 7s
    forward:
      url: %s/events
      timeout: 2s
      signing_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
%s`, store, sinkURL, extra)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func env(extra map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := extra[k]; ok {
			return v, true
		}
		if k == "STRIPE_SECRET" {
			return stripeSecret, true
		}
		return "", false
	}
}

func startGateway(t *testing.T, configPath string) *gateway {
	t.Helper()
	return startGatewayClock(t, configPath, time.Now)
}

// startGatewayClock is startGateway on the given clock (simulated time).
func startGatewayClock(t *testing.T, configPath string, clock func() time.Time) *gateway {
	t.Helper()
	return startGatewayWith(t, configPath, func(a *App) { a.Clock = clock })
}

// startGatewayWith is startGateway with the App changed by mod.
func startGatewayWith(t *testing.T, configPath string, mod func(*App)) *gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &gateway{cancel: cancel, done: make(chan error, 1), stderr: &syncBuffer{}}
	ready := make(chan struct{})
	app := &App{Stdout: io.Discard, Stderr: g.stderr, LookupEnv: env(nil), Clock: time.Now,
		Ready: func(public, admin string) { g.public, g.admin = public, admin; close(ready) }}
	mod(app)
	go func() { g.done <- app.Run(ctx, []string{"serve", "--config", configPath}) }()
	select {
	case <-ready:
	case err := <-g.done:
		t.Fatalf("serve stopped before listening: %v\n%s", err, g.stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() { g.stop(t) })
	return g
}

func (g *gateway) stop(t *testing.T) {
	if g.cancel == nil {
		return
	}
	g.cancel()
	g.cancel = nil
	select {
	case err := <-g.done:
		if err != nil {
			t.Errorf("serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop")
	}
}

// stripeEvent returns a signed Stripe delivery.
func stripeEvent(t *testing.T, id string, extra map[string]any) (body []byte, header http.Header) {
	t.Helper()
	return stripeEventAt(t, id, extra, time.Now())
}

// stripeEventAt is stripeEvent signed at the given time (a gateway on
// simulated time judges the signature's age on its own clock).
func stripeEventAt(t *testing.T, id string, extra map[string]any, at time.Time) (body []byte, header http.Header) {
	t.Helper()
	doc := map[string]any{"id": id, "object": "event", "type": "charge.refunded", "created": time.Now().Unix()}
	for k, v := range extra {
		doc[k] = v
	}
	body, _ = json.Marshal(doc)
	req := &signatures.Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	signer, err := signatures.NewSigner("stripe", signatures.Config{Secrets: []string{stripeSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := signer.Sign(req, at); err != nil {
		t.Fatal(err)
	}
	return body, req.Header
}

type reply struct {
	status     int
	retryAfter string
	body       map[string]any
}

func post(t *testing.T, client *http.Client, url string, body []byte, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("post: %v", err)
		return reply{}
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	_ = json.NewDecoder(resp.Body).Decode(&r.body)
	return r
}

func (g *gateway) hook(source string) string { return "http://" + g.public + "/hooks/" + source }

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func TestVersionAndUsage(t *testing.T) {
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: io.Discard}
	if err := app.Run(context.Background(), []string{"version"}); err != nil || !strings.Contains(out.String(), "replyonce gateway") {
		t.Fatalf("version: %v %q", err, out.String())
	}
	if err := app.Run(context.Background(), []string{"frobnicate"}); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: %v", err)
	}
}

// go-redis's own messages come out as the gateway's JSON log lines.
func TestRedisLogsThroughZap(t *testing.T) {
	var buf syncBuffer
	app := &App{Stderr: &buf}
	log, err := app.logger(config.Log{Level: "info", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	newRedisLogger(log.Named("go-redis"), time.Now).Printf(context.Background(), "redis: %s failed", "dial")
	_ = log.Sync()
	var line map[string]any
	if err := json.Unmarshal([]byte(buf.String()), &line); err != nil || line["logger"] != "go-redis" || line["msg"] != "redis: dial failed" || line["level"] != "warn" {
		t.Fatalf("line %q: %v", buf.String(), err)
	}
}

// A Redis that is down: go-redis logs each failed dial of its pool, and
// 42 of the same message within a few seconds make one line; after
// libraryLogEvery the next makes one more, saying how many were left out.
// A different message is not held back by the first.
func TestRedisLogsOneLinePerMessageAndPeriod(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	clock := testkit.NewClock(time.Now())
	l := newRedisLogger(zap.New(core), clock.Now)
	for range 42 {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %s", 5, "connection refused")
		clock.Advance(100 * time.Millisecond)
	}
	l.Printf(context.Background(), "redis: discarding bad PubSub connection")
	if n := logs.Len(); n != 2 {
		t.Fatalf("%d lines for 42 identical messages and one other, want 2", n)
	}
	clock.Advance(libraryLogEvery)
	l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %s", 5, "connection refused")
	all := logs.All()
	if len(all) != 3 || all[2].ContextMap()["repeats_left_out"] != int64(41) {
		t.Fatalf("after the period: %d lines, last %v; want a third saying 41 were left out", len(all), all[len(all)-1].ContextMap())
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
