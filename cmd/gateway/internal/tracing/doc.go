// Package tracing turns the gateway's tracing configuration into a
// running OpenTelemetry TracerProvider, and traces the ledger API.
//
// Tracing is off unless the configuration's tracing section or the
// standard OTEL_* variables turn it on; off, serve builds no provider and
// every package it wires gets nil, which costs nothing (see
// ingress.Options.TracerProvider).
//
// # What turns it on, and where a setting comes from
//
// Each setting is taken from the tracing section when the section sets
// it, else from the environment, else from a default. The environment is
// read through the lookup function serve is given (os.LookupEnv in
// production), so tests need not touch the process environment.
//
//   - On or off: OTEL_SDK_DISABLED=true turns it off whatever else says.
//     Otherwise tracing.exporter (otlp or none) decides; without it,
//     OTEL_TRACES_EXPORTER (otlp or none); without that, tracing is on when
//     an endpoint is set (tracing.endpoint, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
//     or OTEL_EXPORTER_OTLP_ENDPOINT). Nothing set: off.
//   - Protocol: tracing.protocol, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
//     OTEL_EXPORTER_OTLP_PROTOCOL; default http/protobuf, as the
//     OpenTelemetry specification recommends. grpc is the other choice.
//   - Endpoint: tracing.endpoint, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used
//     as is), OTEL_EXPORTER_OTLP_ENDPOINT (a base: http/protobuf appends
//     /v1/traces); default http://localhost:4318/v1/traces, or
//     http://localhost:4317 for grpc. An http:// URL is plain text, https://
//     is TLS.
//   - Sampling: tracing.sample_ratio, else OTEL_TRACES_SAMPLER with
//     OTEL_TRACES_SAMPLER_ARG (always_on, always_off, traceidratio and
//     their parentbased_ forms); default 1. The sampler is always parent
//     based: a webhook's server span is a root and is sampled at the ratio,
//     its children and queued attempts follow it, and a ledger API call
//     follows the agent's trace.
//   - Service: tracing.service_name, OTEL_SERVICE_NAME; default
//     replyonce-gateway. OTEL_RESOURCE_ATTRIBUTES adds resource attributes.
//
// Anything else the OTLP exporters read from the process environment
// (OTEL_EXPORTER_OTLP_HEADERS for a collector's credentials, certificates,
// compression, timeout) they still read. A variable holding a value the
// gateway cannot use is an error naming it, so serve refuses to start
// rather than trace nowhere.
//
// Spans are exported in batches; Provider.Shutdown flushes them and stops
// the exporter's goroutines, so serve calls it on exit.
package tracing
