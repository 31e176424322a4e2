package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// DefaultServiceName is service.name when neither the configuration nor
// OTEL_SERVICE_NAME gives one.
const DefaultServiceName = "replyonce-gateway"

// Settings is the tracing configuration with the environment and the
// defaults applied.
type Settings struct {
	On          bool
	Protocol    string // config.TracingGRPC or config.TracingHTTPProtobuf
	Endpoint    string // the collector's URL, as the exporter is given it
	SampleRatio float64
	ServiceName string
	// Resource holds OTEL_RESOURCE_ATTRIBUTES.
	Resource []attribute.KeyValue
}

// String describes the settings for a log line or `gateway check`.
func (s Settings) String() string {
	if !s.On {
		return "off"
	}
	return fmt.Sprintf("otlp %s to %s, sample ratio %g, service %s", s.Protocol, s.Endpoint, s.SampleRatio, s.ServiceName)
}

// Resolve applies the OTEL_* variables (read through lookup) and the
// defaults to the configuration's tracing section. Its errors name the
// variable at fault.
func Resolve(c config.Tracing, lookup func(string) (string, bool)) (Settings, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	var errs, always []error
	bad := func(variable, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", variable, fmt.Sprintf(format, args...)))
	}
	s := Settings{ServiceName: DefaultServiceName, SampleRatio: 1}

	tracesEndpoint, baseEndpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), get("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch c.Exporter {
	case config.TracingOTLP:
		s.On = true
	case config.TracingNone:
	default:
		switch v := strings.ToLower(get("OTEL_TRACES_EXPORTER")); v {
		case "otlp":
			s.On = true
		case "none":
		case "":
			s.On = c.Endpoint != "" || tracesEndpoint != "" || baseEndpoint != ""
		default:
			// Reported even though tracing stays off: the operator asked
			// for traces the gateway cannot send.
			always = append(always, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not otlp or none (the gateway exports with OTLP only)", v))
		}
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return Settings{ServiceName: DefaultServiceName}, nil
	}

	s.Protocol = firstOf(c.Protocol, get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), get("OTEL_EXPORTER_OTLP_PROTOCOL"), config.TracingHTTPProtobuf)
	if s.Protocol != config.TracingGRPC && s.Protocol != config.TracingHTTPProtobuf {
		name := "OTEL_EXPORTER_OTLP_PROTOCOL"
		if get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") != "" {
			name = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
		}
		bad(name, "%q is not grpc or http/protobuf", s.Protocol)
	}
	httpProto := s.Protocol == config.TracingHTTPProtobuf
	switch {
	case c.Endpoint != "":
		s.Endpoint = c.Endpoint
		if u, err := url.Parse(c.Endpoint); err == nil && httpProto && strings.Trim(u.Path, "/") == "" {
			u.Path = "/v1/traces"
			s.Endpoint = u.String()
		}
	case tracesEndpoint != "":
		s.Endpoint = tracesEndpoint
		if err := config.CheckCollectorURL(tracesEndpoint); err != nil {
			bad("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "%v", err)
		}
	case baseEndpoint != "":
		s.Endpoint = baseEndpoint
		if err := config.CheckCollectorURL(baseEndpoint); err != nil {
			bad("OTEL_EXPORTER_OTLP_ENDPOINT", "%v", err)
		} else if httpProto {
			s.Endpoint = strings.TrimRight(baseEndpoint, "/") + "/v1/traces"
		}
	case httpProto:
		s.Endpoint = "http://localhost:4318/v1/traces"
	default:
		s.Endpoint = "http://localhost:4317"
	}

	if c.SampleRatio != nil {
		s.SampleRatio = *c.SampleRatio
	} else if r, err := samplerRatio(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		errs = append(errs, err)
	} else {
		s.SampleRatio = r
	}

	s.ServiceName = firstOf(c.ServiceName, get("OTEL_SERVICE_NAME"), DefaultServiceName)
	if v := get("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		kvs, err := resourceAttributes(v)
		if err != nil {
			bad("OTEL_RESOURCE_ATTRIBUTES", "%v", err)
		}
		s.Resource = kvs
	}
	if !s.On {
		// A variable meant for some other program's tracing must not stop
		// a gateway that does not trace.
		return Settings{ServiceName: s.ServiceName}, errors.Join(always...)
	}
	return s, errors.Join(append(always, errs...)...)
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// samplerRatio reads OTEL_TRACES_SAMPLER and its argument as a ratio.
func samplerRatio(sampler, arg string) (float64, error) {
	switch strings.ToLower(sampler) {
	case "", "always_on", "parentbased_always_on":
		return 1, nil
	case "always_off", "parentbased_always_off":
		return 0, nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a ratio between 0 and 1", arg)
		}
		return r, nil
	}
	return 0, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not one of always_on, always_off, traceidratio or their parentbased_ forms", sampler)
}

// resourceAttributes reads "key=value,key=value" with percent-encoded
// values.
func resourceAttributes(v string) ([]attribute.KeyValue, error) {
	var out []attribute.KeyValue
	for _, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", pair)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("the value of %s is not percent-encoded correctly", k)
		}
		out = append(out, attribute.String(k, dec))
	}
	return out, nil
}

// Provider is a running TracerProvider. Shutdown flushes the spans still
// buffered and stops the exporter.
type Provider struct {
	*sdktrace.TracerProvider
}

// Start builds the provider for s (which must be On): spans batched to
// exp, or to the OTLP exporter s names when exp is nil (tests pass an
// in-memory one). version is service.version.
func Start(ctx context.Context, s Settings, version string, exp sdktrace.SpanExporter) (*Provider, error) {
	if !s.On {
		return nil, errors.New("tracing: Start called with tracing off")
	}
	if exp == nil {
		var err error
		switch s.Protocol {
		case config.TracingGRPC:
			exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(s.Endpoint))
		default:
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.Endpoint))
		}
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter to %s: %w", s.Endpoint, err)
		}
	}
	attrs := append([]attribute.KeyValue{}, s.Resource...)
	attrs = append(attrs, attribute.String("service.name", s.ServiceName), attribute.String("service.version", version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Provider{tp}, nil
}

// LedgerAPI is the ledger API handler (with opts), traced under tp when
// tp is not nil. A request that passed the admin token check continues the caller's
// trace: the agent holds the token, so its traceparent is trusted here,
// unlike a provider's. Requests refused for their token start no span.
// Each span is named after its route ("POST /v1/claims").
func LedgerAPI(l *ledger.Ledger, token string, log *zap.Logger, tp trace.TracerProvider, opts ...ledgerapi.Option) http.Handler {
	if tp == nil {
		return ledgerapi.NewHandler(l, token, log, opts...)
	}
	traced := otelhttp.NewHandler(ledgerapi.NewHandler(l, "", log, opts...), "ledgerapi",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" && r.Pattern != "/v1/" {
				return r.Pattern
			}
			return r.Method + " /v1/"
		}),
	)
	return ledgerapi.RequireToken(token, traced, log)
}
