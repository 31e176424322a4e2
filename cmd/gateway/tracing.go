package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/cmd/gateway/internal/tracing"
)

// tracingFlush bounds flushing the last spans at exit, after the drain:
// a collector that is down must not hold the process past its grace by
// more than this.
const tracingFlush = 2 * time.Second

// startTracing builds serve's TracerProvider when the configuration or
// the OTEL_* variables turn tracing on; off, it returns nil, which every
// package takes as "no tracing". stop flushes and shuts the exporter down,
// for at most tracingFlush and never past deadline (the end of the
// shutdown grace, when serve has one), so tracing cannot make the process
// outlive server.shutdown_grace: spans not exported by then are dropped.
func (a *App) startTracing(ctx context.Context, c config.Tracing, log *zap.Logger) (tp trace.TracerProvider, stop func(deadline time.Time), err error) {
	s, err := tracing.Resolve(c, a.LookupEnv)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if !s.On {
		return nil, func(time.Time) {}, nil
	}
	// The SDK reports export failures through OpenTelemetry's one
	// process-wide handler, which prints raw lines to stderr by default;
	// serve, like it does for go-redis, sends them through its logger.
	olog := log.Named("otel")
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		olog.Warn("tracing: spans could not be exported", zap.Error(err))
	}))
	p, err := tracing.Start(ctx, s, Version, a.SpanExporter)
	if err != nil {
		return nil, nil, err
	}
	log.Info("tracing on", zap.String("export", s.String()))
	return p, func(deadline time.Time) {
		if flushBy := time.Now().Add(tracingFlush); deadline.IsZero() || flushBy.Before(deadline) {
			deadline = flushBy
		}
		fctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := p.Shutdown(fctx); err != nil {
			log.Warn("tracing: the last spans could not be exported", zap.Error(err))
		}
	}, nil
}

// checkTracing prints what tracing serve would do with this file and this
// environment, or the variable at fault.
func (a *App) checkTracing(c config.Tracing) error {
	s, err := tracing.Resolve(c, a.LookupEnv)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	fmt.Fprintf(a.Stdout, "tracing %s\n", s)
	return nil
}
