package config

import (
	"errors"
	"math"
	"net/url"

	"github.com/replyonce/gateway/cmd/gateway/internal/suggest"
	"github.com/replyonce/gateway/ingress/field"
)

// Tracing turns on OpenTelemetry tracing and says where spans go. Every
// field is optional: a field left out takes its value from the standard
// OTEL_* variables, then from the defaults (see cmd/gateway/internal/
// tracing). Tracing is off unless exporter is otlp here, or the
// environment asks for it.
type Tracing struct {
	// Exporter is otlp or none; empty leaves it to OTEL_TRACES_EXPORTER
	// and the OTLP endpoint variables.
	Exporter string `yaml:"exporter"`
	// Endpoint is the collector's URL: http:// for plain text, https://
	// for TLS (for http/protobuf, a URL with no path gets /v1/traces).
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc or http/protobuf.
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of webhooks traced, from 0 to 1 (default
	// 1). A ledger API call follows the sampling of the agent's trace.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name resource attribute (default
	// replyonce-gateway).
	ServiceName string `yaml:"service_name"`
}

// Tracing exporters and protocols.
const (
	TracingOTLP         = "otlp"
	TracingNone         = "none"
	TracingGRPC         = "grpc"
	TracingHTTPProtobuf = "http/protobuf"
)

// validate checks the tracing section; its problems name their field.
func (t Tracing) validate() []error {
	var errs []error
	bad := func(name, format string, args ...any) { errs = append(errs, field.Errorf(name, format, args...)) }
	switch t.Exporter {
	case "", TracingOTLP:
	case TracingNone:
		if t.Endpoint != "" {
			bad("tracing.endpoint", "set, but tracing.exporter is none: remove one of them")
		}
	default:
		bad("tracing.exporter", "%q is not otlp or none%s", t.Exporter, suggest.Hint(t.Exporter, []string{TracingOTLP, TracingNone}))
	}
	switch t.Protocol {
	case "", TracingGRPC, TracingHTTPProtobuf:
	default:
		bad("tracing.protocol", "%q is not grpc or http/protobuf%s", t.Protocol, suggest.Hint(t.Protocol, []string{TracingGRPC, TracingHTTPProtobuf}))
	}
	if t.Endpoint != "" {
		if err := CheckCollectorURL(t.Endpoint); err != nil {
			bad("tracing.endpoint", "%v", err)
		}
	}
	if r := t.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		bad("tracing.sample_ratio", "%v is not between 0 and 1", *r)
	}
	return errs
}

// CheckCollectorURL accepts an OTLP collector URL: http or https, with a
// host, and no credentials (the exporter's headers, from
// OTEL_EXPORTER_OTLP_HEADERS, carry those).
func CheckCollectorURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("want a URL such as http://collector:4318 or https://collector:4317 (http: plain text, https: TLS)")
	case u.User != nil:
		return errors.New("must not hold credentials: set them in OTEL_EXPORTER_OTLP_HEADERS")
	}
	return nil
}
