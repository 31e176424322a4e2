package config

import (
	"strings"
	"testing"

	"github.com/replyonce/gateway/ingress/field"
)

func TestTracingSection(t *testing.T) {
	vars := lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"})
	cfg, err := Parse([]byte(base+`tracing: {exporter: otlp, endpoint: "https://collector:4317", protocol: grpc, sample_ratio: 0.25, service_name: edge}
`), vars)
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Tracing
	if tr.Exporter != "otlp" || tr.Endpoint != "https://collector:4317" || tr.Protocol != "grpc" || tr.SampleRatio == nil || *tr.SampleRatio != 0.25 || tr.ServiceName != "edge" {
		t.Fatalf("tracing = %+v", tr)
	}
	if cfg, err := Parse([]byte(base), vars); err != nil || cfg.Tracing != (Tracing{}) {
		t.Fatalf("no section: %+v %v, want the zero value (the environment decides)", cfg.Tracing, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{`tracing: {exporter: otlpp}`, "tracing.exporter: \"otlpp\" is not otlp or none, did you mean `otlp`?"},
		{`tracing: {exporter: zipkin}`, `tracing.exporter: "zipkin" is not otlp or none`},
		{`tracing: {protocol: http/json}`, `tracing.protocol: "http/json" is not grpc or http/protobuf`},
		{`tracing: {endpoint: "collector:4317"}`, `tracing.endpoint: want a URL such as`},
		{`tracing: {endpoint: "https://u:p@collector"}`, `tracing.endpoint: must not hold credentials`},
		{`tracing: {exporter: none, endpoint: "http://c:4318"}`, `tracing.endpoint: set, but tracing.exporter is none`},
		{`tracing: {sample_ratio: 1.5}`, `tracing.sample_ratio: 1.5 is not between 0 and 1`},
		{`tracing: {sample_ratio: -0.1}`, `tracing.sample_ratio: -0.1 is not between 0 and 1`},
		{`tracing: {samplerate: 1}`, `tracing.samplerate: unknown field`},
	} {
		_, err := Parse([]byte(base+tc.yaml+"\n"), vars)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// Every tracing problem in one run, each naming its field and line.
	_, err = Parse([]byte(base+"tracing:\n  exporter: jaeger\n  protocol: udp\n  sample_ratio: 2\n"), vars)
	if n := len(field.List(err)); n != 3 || !strings.Contains(err.Error(), "(line 7)") {
		t.Errorf("%d problems in %v, want 3 with lines", n, err)
	}
}
