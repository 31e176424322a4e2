package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/forward"
)

// keptSpans is an in-memory exporter that keeps its spans when the
// provider shuts down (tracetest's own forgets them then).
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// startGatewayApp is startGateway with the App changed by mod.
func startGatewayApp(t *testing.T, configPath string, mod func(*App)) *gateway {
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

func appendConfig(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// The trace, through serve: OTEL_* variables (injected, not the
// process's) turn tracing on; a webhook whose provider sent a traceparent
// is a new root linked to it; the agent receives the forward span's
// traceparent and sends it with its own ledger API call, which continues
// the same trace.
func TestServeTraceReachesTheAgentAndItsLedgerCalls(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	var admin string
	var mu sync.Mutex
	var agentTP string
	var claim []byte
	agent := newSink(t)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) {
		tp := r.Header.Get("Traceparent")
		body := fmt.Sprintf(`{"scope":%q,"intent":"reply","payload":{"text":"hi"},"run_id":%q,"token":%s}`,
			r.Header.Get(forward.HeaderScope), r.Header.Get(forward.HeaderRunID), r.Header.Get(forward.HeaderFencingToken))
		req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/v1/claims", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", tp)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 500, 0
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		agentTP, claim = tp, b
		mu.Unlock()
		return resp.StatusCode, 0
	})
	defer http.DefaultClient.CloseIdleConnections()
	g := startGatewayApp(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL), func(a *App) {
		a.LookupEnv = env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SERVICE_NAME": "edge-test"})
		a.SpanExporter = keptSpans{exp}
	})
	admin = g.admin
	body, header := stripeEvent(t, "evt_traced", nil)
	header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if r := post(t, newClient(t), g.hook("stripe"), body, header); r.status != 200 {
		t.Fatalf("webhook: %d %v", r.status, r.body)
	}
	g.stop(t) // flushes the batched spans
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(claim, []byte(`"status":"claimed"`)) {
		t.Fatalf("the agent's claim: %s", claim)
	}
	spans := exp.GetSpans()
	find := func(name string) tracetest.SpanStub {
		t.Helper()
		for _, s := range spans {
			if s.Name == name {
				return s
			}
		}
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("no span %q in %v", name, names)
		return tracetest.SpanStub{}
	}
	root, fwd, api := find("POST /hooks/{source}"), find(forward.SpanForward), find("POST /v1/claims")
	tid := root.SpanContext.TraceID()
	if root.Parent.IsValid() || len(root.Links) != 1 || root.Links[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("server span: parent %v, links %v; want a root linked to the provider's trace", root.Parent, root.Links)
	}
	if fwd.Parent.SpanID() != root.SpanContext.SpanID() {
		t.Error("the forward span is not a child of the server span")
	}
	if want := "00-" + tid.String() + "-" + fwd.SpanContext.SpanID().String() + "-01"; agentTP != want {
		t.Errorf("agent received traceparent %q, want %q", agentTP, want)
	}
	if api.SpanContext.TraceID() != tid || api.Parent.SpanID() != fwd.SpanContext.SpanID() || api.SpanKind != trace.SpanKindServer {
		t.Errorf("ledger API span: trace %s parent %s kind %v; want a server span under the agent's (forward) span in trace %s",
			api.SpanContext.TraceID(), api.Parent.SpanID(), api.SpanKind, tid)
	}
	var service string
	for _, kv := range root.Resource.Attributes() {
		if kv.Key == "service.name" {
			service = kv.Value.AsString()
		}
	}
	if service != "edge-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's edge-test", service)
	}
	if !strings.Contains(g.stderr.String(), `"msg":"tracing on"`) {
		t.Error("no 'tracing on' log line")
	}
}

// With a tracing section and the real OTLP/HTTP exporter, the spans reach
// the collector by the time serve has returned, and the exporter's
// goroutines are gone (goleak, in TestMain).
func TestServeExportsOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	agent := newSink(t)
	path := writeConfig(t, "{kind: memory}", "", agent.srv.URL)
	appendConfig(t, path, "tracing: {exporter: otlp, endpoint: \""+collector.URL+"\", protocol: http/protobuf, service_name: otlp-test}\n")
	g := startGatewayApp(t, path, func(*App) {})
	body, header := stripeEvent(t, "evt_otlp", nil)
	if r := post(t, newClient(t), g.hook("stripe"), body, header); r.status != 200 {
		t.Fatalf("webhook: %d", r.status)
	}
	g.stop(t)
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(posts, "\n")
	for _, want := range []string{"POST /v1/traces application/x-protobuf", "POST /hooks/{source}", "evt_otlp", "otlp-test"} {
		if !strings.Contains(all, want) {
			t.Errorf("collector did not get %q; got %d posts", want, len(posts))
		}
	}
	if strings.Contains(all, stripeSecret) || strings.Contains(all, header.Get("Stripe-Signature")) {
		t.Error("a secret or signature reached the collector")
	}
}

// Tracing off (no section, no OTEL_* variable): no provider, and the agent
// receives no traceparent.
func TestServeWithoutTracing(t *testing.T) {
	agent := newSink(t)
	g := startGatewayApp(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL), func(a *App) {
		a.LookupEnv = env(map[string]string{"OTEL_SERVICE_NAME": "named-but-off"})
	})
	body, header := stripeEvent(t, "evt_untraced", nil)
	if r := post(t, newClient(t), g.hook("stripe"), body, header); r.status != 200 {
		t.Fatalf("webhook: %d", r.status)
	}
	if tp := agent.request(0).Header.Get("Traceparent"); tp != "" {
		t.Errorf("agent received traceparent %q with tracing off", tp)
	}
	if strings.Contains(g.stderr.String(), "tracing on") {
		t.Error("tracing turned on by OTEL_SERVICE_NAME alone")
	}
}

// A tracing problem in the environment stops serve with the variable's name.
func TestServeRefusesABadTracingVariable(t *testing.T) {
	app := &App{Stdout: io.Discard, Stderr: io.Discard, Clock: time.Now,
		LookupEnv: env(map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"})}
	err := app.Run(context.Background(), []string{"serve", "--config", writeConfig(t, "{kind: memory}", "", "http://127.0.0.1:1")})
	if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("serve: %v, want an error naming OTEL_TRACES_EXPORTER", err)
	}
}

// check says what tracing serve would do, with the environment applied.
func TestCheckReportsTracing(t *testing.T) {
	path := writeConfig(t, "{kind: memory}", "", "http://127.0.0.1:1")
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "tracing off\n"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example:4318"}, "tracing otlp http/protobuf to https://otel.example:4318/v1/traces, sample ratio 1, service replyonce-gateway\n"},
	} {
		var out bytes.Buffer
		app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(tc.env)}
		if err := app.Run(context.Background(), []string{"check", "--config", path}); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out.String(), tc.want) {
			t.Errorf("check printed %q, want it to end with %q", out.String(), tc.want)
		}
	}
	app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"})}
	if err := app.Run(context.Background(), []string{"check", "--config", path}); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Errorf("check with OTEL_TRACES_EXPORTER=jaeger: %v", err)
	}
}

// traceCollector is an OTLP/gRPC collector that remembers the span names
// it receives.
type traceCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *traceCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.names = append(c.names, s.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// The same over gRPC, turned on by the environment alone (OTEL_TRACES_EXPORTER
// and OTEL_EXPORTER_OTLP_PROTOCOL, injected): an http:// endpoint is plain text.
func TestServeExportsOverOTLPgRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &traceCollector{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, col)
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(lis) }()
	defer func() { gs.Stop(); <-served }()
	agent := newSink(t)
	g := startGatewayApp(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL), func(a *App) {
		a.LookupEnv = env(map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String()})
	})
	body, header := stripeEvent(t, "evt_grpc", nil)
	if r := post(t, newClient(t), g.hook("stripe"), body, header); r.status != 200 {
		t.Fatalf("webhook: %d", r.status)
	}
	g.stop(t)
	col.mu.Lock()
	defer col.mu.Unlock()
	got := strings.Join(col.names, ",")
	for _, want := range []string{"POST /hooks/{source}", "verify", "ledger.begin_claim", "forward", "ledger.settle"} {
		if !strings.Contains(got, want) {
			t.Errorf("collector got spans %s; no %s", got, want)
		}
	}
}

// A collector that refuses the spans is logged through the gateway's
// logger (JSON, warn), not as a raw line.
func TestServeLogsExportFailures(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest) // not retried by the exporter
	}))
	defer collector.Close()
	agent := newSink(t)
	path := writeConfig(t, "{kind: memory}", "", agent.srv.URL)
	appendConfig(t, path, "tracing: {endpoint: \""+collector.URL+"\"}\n")
	g := startGatewayApp(t, path, func(*App) {})
	body, header := stripeEvent(t, "evt_refused_spans", nil)
	if r := post(t, newClient(t), g.hook("stripe"), body, header); r.status != 200 {
		t.Fatalf("webhook: %d", r.status)
	}
	g.stop(t)
	var found bool
	for _, line := range strings.Split(g.stderr.String(), "\n") {
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "{") {
			t.Errorf("raw line on stderr: %q", line)
		}
		if strings.Contains(line, `"logger":"otel"`) && strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "400") {
			found = true
		}
	}
	if !found {
		t.Errorf("no warn line from the otel logger about the refused export in:\n%s", g.stderr.String())
	}
}

// deadlineSpans records the deadline of the context the provider's
// shutdown hands the exporter.
type deadlineSpans struct {
	*tracetest.InMemoryExporter
	mu       sync.Mutex
	deadline time.Time
}

func (d *deadlineSpans) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deadline, _ = ctx.Deadline()
	return nil
}

// The last spans are flushed within what is left of server.shutdown_grace,
// never for the full flush allowance past it: tracing must not make the
// process outlive the grace an orchestrator gives it.
func TestTracingFlushEndsWithTheGrace(t *testing.T) {
	exp := &deadlineSpans{InMemoryExporter: tracetest.NewInMemoryExporter()}
	a := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(nil), SpanExporter: exp}
	_, stop, err := a.startTracing(context.Background(), config.Tracing{Exporter: "otlp"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	graceEnd := time.Now().Add(300 * time.Millisecond)
	stop(graceEnd)
	exp.mu.Lock()
	got := exp.deadline
	exp.mu.Unlock()
	if got.IsZero() || got.After(graceEnd) {
		t.Fatalf("the flush's deadline is %v, want no later than the grace's end %v", got, graceEnd)
	}

	// Without a grace (serve failed before it began) the allowance applies.
	exp2 := &deadlineSpans{InMemoryExporter: tracetest.NewInMemoryExporter()}
	a.SpanExporter = exp2
	_, stop, err = a.startTracing(context.Background(), config.Tracing{Exporter: "otlp"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	stop(time.Time{})
	exp2.mu.Lock()
	got = exp2.deadline
	exp2.mu.Unlock()
	if got.Before(before.Add(tracingFlush)) || got.After(time.Now().Add(tracingFlush)) {
		t.Fatalf("without a grace the flush's deadline is %v, want %v after the call", got, tracingFlush)
	}
}
