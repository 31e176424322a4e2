package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/cmd/gateway/internal/server"
)

func (a *App) logger(c config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	// "12.3ms", not a bare 0.0123: a duration in a log line carries its unit.
	enc.EncodeDuration = zapcore.StringDurationEncoder
	var encoder zapcore.Encoder = zapcore.NewJSONEncoder(enc)
	if c.Format == "console" {
		encoder = zapcore.NewConsoleEncoder(enc)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.AddSync(a.Stderr), level)), nil
}

func (a *App) serve(ctx context.Context, args []string) error {
	cfg, _, err := a.configOnly("serve", args)
	if err != nil {
		return err
	}
	log, err := a.logger(cfg.Log)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	routeLibraryLogs(log, a.Clock)
	if cfg.Store.Kind == "memory" {
		log.Warn("store.kind is memory: deduplication is lost when the gateway restarts; use bolt, postgres or redis in production")
	}
	sources, err := cfg.BuildSources()
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	// srv.Stop stops tracing and closes the store in its order; the
	// defers do it on a way out before the gateway ran, and nothing twice.
	tp, startedTracing, err := a.startTracing(ctx, cfg.Tracing, log)
	if err != nil {
		return err
	}
	var tracingStopped sync.Once
	stopTracing := func(graceEnd time.Time) { tracingStopped.Do(func() { startedTracing(graceEnd) }) }
	defer stopTracing(time.Time{})
	store, openedStore, err := a.openStoreRetrying(ctx, cfg.Store, log)
	if err != nil {
		return err
	}
	closeStore := sync.OnceFunc(openedStore)
	defer closeStore()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := server.New(server.Options{Store: store, Sources: sources, Ledger: cfg.Ledger, Alerts: cfg.Alerts, Admin: cfg.Admin,
		StoreTimeout: cfg.Server.StoreTimeout, Registry: reg, Clock: a.Clock, Logger: log, TracerProvider: tp})
	if err != nil {
		return err
	}
	defer srv.Close() // a no-op once srv.Stop has closed it

	ls, err := listen(&cfg, srv, log)
	if err != nil {
		return err
	}
	servers, listeners, certs, public, adminAddr := ls.servers, ls.listeners, ls.certs, ls.listeners[0], ls.adminAddr
	log.Info("gateway listening", zap.String("listen", public.Addr().String()), zap.String("admin", adminAddr),
		zap.String("store", cfg.Store.Kind), zap.Int("sources", len(sources)))
	if a.Ready != nil {
		a.Ready(public.Addr().String(), adminAddr)
	}

	errs := make(chan error, len(servers))
	var wg sync.WaitGroup
	stopWatch := func() {}
	if certs != nil {
		check := a.TLSCheck
		if every := cmp.Or(cfg.TLS.CheckEvery, defaultTLSCheck); check == nil && every > 0 {
			t := time.NewTicker(every)
			defer t.Stop()
			check = t.C
		}
		var watchCtx context.Context
		watchCtx, stopWatch = context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			certs.watch(watchCtx, a.Reload, check, a.TLSChecked, log)
		}()
	}
	dispCtx, stopDispatch := context.WithCancel(context.Background())
	defer stopDispatch()
	dispDone := make(chan struct{})
	go func() {
		defer close(dispDone)
		srv.Run(dispCtx)
	}()
	for i, hs := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining in-flight requests", zap.Duration("grace", cfg.Server.ShutdownGrace))
	case serveErr = <-errs:
		log.Error("listener failed; shutting down", zap.Error(serveErr))
	}
	srv.Stop(server.Process{Public: servers[0], Admin: servers[1:], Grace: cfg.Server.ShutdownGrace, StoreTimeout: cfg.Server.StoreTimeout,
		StopRun:     func() { stopDispatch(); <-dispDone },
		Background:  func() { stopWatch(); wg.Wait() },
		CloseStore:  closeStore,
		StopTracing: stopTracing, Log: log})
	log.Info("gateway stopped")
	return serveErr
}
