package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

func (a *App) logger(c config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
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
	if cfg.Store.Kind == "memory" {
		log.Warn("store.kind is memory: deduplication is lost when the gateway restarts; use bolt, postgres or redis in production")
	}
	sources, err := cfg.BuildSources()
	if err != nil {
		return err
	}
	store, closeStore, err := a.openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer closeStore()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lopts := cfg.LedgerOptions()
	lopts.Clock = a.Clock
	l := ledger.New(store, lopts)
	gw, err := ingress.New(ingress.Options{
		Sources: sources, Ledger: l, Forwarder: forward.New(forward.NewClient(forward.ClientOptions{}), a.Clock),
		Logger: log, Metrics: ingress.NewMetrics(reg), Clock: a.Clock,
	})
	if err != nil {
		return err
	}

	public, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	publicSrv := &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	servers := []*http.Server{publicSrv}
	listeners := []net.Listener{public}
	adminAddr := ""
	if cfg.Admin.Listen != "" {
		admin, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			_ = public.Close()
			return fmt.Errorf("admin.listen: %w", err)
		}
		adminAddr = admin.Addr().String()
		servers = append(servers, &http.Server{
			Handler:           a.adminHandler(reg, store, l, cfg.Admin.Token, log),
			ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
			ReadTimeout:       cfg.Server.ReadTimeout,
			IdleTimeout:       cfg.Server.IdleTimeout,
		})
		listeners = append(listeners, admin)
	}
	log.Info("gateway listening", zap.String("listen", public.Addr().String()), zap.String("admin", adminAddr),
		zap.String("store", cfg.Store.Kind), zap.Int("sources", len(sources)))
	if a.Ready != nil {
		a.Ready(public.Addr().String(), adminAddr)
	}

	errs := make(chan error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
	grace, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownGrace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(grace); err != nil {
			log.Warn("grace period ended with requests still running; closing connections", zap.Error(err))
			_ = srv.Close()
		}
	}
	wg.Wait()
	// Handlers whose connections were cut still finish their forward and
	// settle it before the store closes, so no claim is left pending.
	gw.Wait()
	log.Info("gateway stopped")
	return serveErr
}

// adminHandler serves the private listener: the ledger API under /v1/
// and /metrics, both behind the admin token when one is set, and the
// health probes /healthz and /readyz, which stay open so that orchestrator
// probes need no credentials (they reveal only up or down).
func (a *App) adminHandler(reg *prometheus.Registry, store ledger.Store, l *ledger.Ledger, token string, log *zap.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", ledgerapi.NewHandler(l, token, log.Named("ledgerapi")))
	mux.Handle("GET /metrics", ledgerapi.RequireToken(token, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), log))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if _, err := store.Read(ctx, "replyonce:readyz"); err != nil {
			// The probe needs no token, so the answer says only "down": the
			// error names hosts, users and databases, and goes to the log.
			log.Warn("readyz: store unreachable", zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("store unreachable\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
