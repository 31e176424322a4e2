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
	"github.com/replyonce/gateway/ingress"
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
	tp, stopTracing, err := a.startTracing(ctx, cfg.Tracing, log)
	if err != nil {
		return err
	}
	var graceEnd time.Time // zero until shutdown begins
	defer func() { stopTracing(graceEnd) }()
	store, closeStore, err := a.openStoreRetrying(ctx, cfg.Store, log)
	if err != nil {
		return err
	}
	defer closeStore()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := server.New(server.Options{Store: store, Sources: sources, Ledger: cfg.Ledger, Alerts: cfg.Alerts, Admin: cfg.Admin,
		StoreTimeout: cfg.Server.StoreTimeout, Registry: reg, Clock: a.Clock, Logger: log, TracerProvider: tp})
	if err != nil {
		return err
	}
	// The alert notifier stops last, once nothing can raise an alert.
	defer srv.Close()
	gw := srv.Gateway

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
			certs.watch(watchCtx, a.Reload, check, log)
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
	// /readyz turns 503 from here on, so an orchestrator stops sending
	// traffic while the drain runs.
	srv.Stopping()
	end := a.drain(log, gw, servers[0], cfg.Server)
	graceEnd = end
	// The dispatcher stops taking work, and its deliveries in flight get
	// what is left of the grace period; a cut one is left due.
	stopDispatch()
	<-dispDone
	grace, cancelGrace := context.WithDeadline(context.Background(), end)
	defer cancelGrace()
	if err := srv.Shutdown(grace); err != nil {
		log.Warn("queued deliveries cut by shutdown; they are due again", zap.Error(err))
	}
	// The admin listener goes last: agents settle through it meanwhile.
	for _, hs := range servers[1:] {
		if err := hs.Shutdown(grace); err != nil {
			_ = hs.Close()
		}
	}
	stopWatch()
	wg.Wait()
	log.Info("gateway stopped")
	return serveErr
}

// drain stops servers within the grace period, whatever the agents do.
// The public listener closes first, while the admin listener stays up for
// /readyz (503 now) and for agents settling through the ledger API. Before
// the grace ends, forwards still running are cancelled and their claims
// settled as not applied, leaving the settles the rest of the grace (at
// most half of it, at least a store timeout when the grace allows); at
// the end every connection is closed.
func (a *App) drain(log *zap.Logger, gw *ingress.Gateway, public *http.Server, c config.Server) (end time.Time) {
	end = time.Now().Add(c.ShutdownGrace)
	reserve := min(c.StoreTimeout+time.Second, c.ShutdownGrace/2)
	cancelAt, cancel := context.WithDeadline(context.Background(), end.Add(-reserve))
	defer cancel()
	if err := public.Shutdown(cancelAt); err != nil {
		log.Warn("grace period nearly over with deliveries still running; cancelling their forwards",
			zap.Duration("left", time.Until(end)))
		gw.CancelForwards(end)
		hard, cancelHard := context.WithDeadline(context.Background(), end)
		defer cancelHard()
		if err := public.Shutdown(hard); err != nil {
			log.Warn("grace period over; closing connections", zap.Error(err))
		}
		_ = public.Close()
	}
	handlers := make(chan struct{})
	go func() { gw.Wait(); close(handlers) }()
	select {
	case <-handlers:
	case <-time.After(time.Until(end)):
		// Only a store that ignores its context gets here; the process
		// exits anyway, and the claim expires on its TTL.
		log.Error("grace period over with webhook handlers still waiting on the store")
	}
	return end
}
