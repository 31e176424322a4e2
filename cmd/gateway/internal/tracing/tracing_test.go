package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func ratio(r float64) *float64 { return &r }

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.Tracing
		env  map[string]string
		want Settings
	}{
		{"nothing set: off", config.Tracing{}, nil, Settings{}},
		{"other OTEL_ variables alone: off", config.Tracing{}, map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "bogus"}, Settings{}},
		{"OTEL_EXPORTER_OTLP_ENDPOINT turns it on", config.Tracing{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318/", "OTEL_SERVICE_NAME": "edge-eu"},
			Settings{On: true, Protocol: "http/protobuf", Endpoint: "http://otel:4318/v1/traces", SampleRatio: 1, ServiceName: "edge-eu"}},
		{"the traces endpoint is used as is", config.Tracing{}, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://otel/custom", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:4318"},
			Settings{On: true, Protocol: "http/protobuf", Endpoint: "https://otel/custom", SampleRatio: 1, ServiceName: DefaultServiceName}},
		{"OTEL_TRACES_EXPORTER=otlp with grpc", config.Tracing{}, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
			Settings{On: true, Protocol: "grpc", Endpoint: "http://localhost:4317", SampleRatio: 0.1, ServiceName: DefaultServiceName}},
		{"OTEL_TRACES_EXPORTER=none wins over an endpoint", config.Tracing{}, map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"}, Settings{}},
		{"the section turns it on; its fields win over the environment", config.Tracing{Exporter: "otlp", Endpoint: "https://collector", Protocol: "grpc", SampleRatio: ratio(0.5), ServiceName: "gw"},
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SERVICE_NAME": "env", "OTEL_TRACES_SAMPLER": "always_off"},
			Settings{On: true, Protocol: "grpc", Endpoint: "https://collector", SampleRatio: 0.5, ServiceName: "gw"}},
		{"a section endpoint alone turns it on, and gets the traces path", config.Tracing{Endpoint: "http://collector:4318"}, nil,
			Settings{On: true, Protocol: "http/protobuf", Endpoint: "http://collector:4318/v1/traces", SampleRatio: 1, ServiceName: DefaultServiceName}},
		{"exporter none in the section wins over the environment", config.Tracing{Exporter: "none"}, map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, Settings{}},
		{"OTEL_SDK_DISABLED wins over everything", config.Tracing{Exporter: "otlp"}, map[string]string{"OTEL_SDK_DISABLED": "true"}, Settings{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.cfg, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want.On {
				if got.On {
					t.Fatalf("on: %s", got)
				}
				return
			}
			if got.String() != tc.want.String() || got.Protocol != tc.want.Protocol {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestResolveErrorsNameTheVariable(t *testing.T) {
	on := map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range on {
			if _, ok := m[a]; !ok {
				m[a] = b
			}
		}
		return m
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER: "zipkin" is not otlp or none`},
		{with("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), `OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" is not grpc or http/protobuf`},
		{with("OTEL_EXPORTER_OTLP_ENDPOINT", "otel:4317"), `OTEL_EXPORTER_OTLP_ENDPOINT: want a URL`},
		{with("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://x"), `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: want a URL`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, `OTEL_TRACES_SAMPLER_ARG: "2" is not a ratio`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, `OTEL_TRACES_SAMPLER_ARG: "half"`},
		{with("OTEL_TRACES_SAMPLER", "jaeger_remote"), `OTEL_TRACES_SAMPLER: "jaeger_remote"`},
		{with("OTEL_RESOURCE_ATTRIBUTES", "team"), `OTEL_RESOURCE_ATTRIBUTES: "team" is not key=value`},
	} {
		_, err := Resolve(config.Tracing{}, env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.want)
		}
	}
}

func TestResourceAttributes(t *testing.T) {
	s, err := Resolve(config.Tracing{Exporter: "otlp"}, env(map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod, team=a%2Cb"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Resource) != 2 || s.Resource[0].Value.AsString() != "prod" || s.Resource[1].Value.AsString() != "a,b" {
		t.Fatalf("resource %v", s.Resource)
	}
}

// A ledger API call carrying the agent's traceparent, with the admin token,
// continues the agent's trace; without the token it starts no span.
func TestLedgerAPIContinuesTheAgentsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	l := ledger.New(memory.New(nil), ledger.Options{})
	srv := httptest.NewServer(LedgerAPI(l, "tok", nil, tp))
	defer srv.Close()
	const agentTrace, agentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	call := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/runs", strings.NewReader(`{"scope":"s","run_id":"r"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := call("tok"); st != http.StatusOK {
		t.Fatalf("begin: %d", st)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "POST /v1/runs" || s.SpanContext.TraceID().String() != agentTrace || s.Parent.SpanID().String() != agentSpan {
		t.Errorf("span %q trace %s parent %s; want POST /v1/runs, a child of the agent's %s/%s", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(), agentTrace, agentSpan)
	}
	exp.Reset()
	if st := call("wrong"); st != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", st)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("a request refused for its token made %d spans", n)
	}
	http.DefaultClient.CloseIdleConnections()
}
