package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/netutil"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/cmd/gateway/internal/console"
	"github.com/replyonce/gateway/cmd/gateway/internal/tracing"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// pauseWait bounds how long a pause waits for the other instances'
// dispatchers to stop the source: several sweeps (1 s each), and within
// the CLI's default admin timeout (10 s).
const pauseWait = 5 * time.Second

// historyEvery is how often the console's History samples the metrics:
// an event counts in the minute of the sample after it, so one in the
// last seconds of a minute may count in the next.
const historyEvery = 2 * time.Second

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
	lopts := cfg.Ledger
	lopts.Clock = a.Clock
	// The notifier needs the ledger (it claims each alert through it) and
	// the ledger's observer raises escalation alerts through the notifier:
	// the observer reads it once it is set.
	var alerting atomic.Pointer[alerts.Notifier]
	lopts.Observe = loopBreakerObserver(reg, log.Named("ledger"), lopts.Caps, alerting.Load)
	l := ledger.New(store, lopts)
	fwd := forward.New(forward.NewClient(forward.ClientOptions{}), a.Clock).WithTracer(tp)
	// Every serve process dispatches queued sources; several processes on
	// one store share the work through the ledger.
	gwMetrics := ingress.NewMetrics(reg)
	queued := make([]*dispatch.Source, len(sources))
	for i, s := range sources {
		queued[i] = s.Queued()
	}
	// Alerts go out on the notifier's own goroutines, so a target that is
	// down slows no webhook; it stops after the dispatcher (deferred first).
	var notifier *alerts.Notifier
	if len(cfg.Alerts.Targets) > 0 {
		if notifier, err = alerts.New(alerts.Options{Config: cfg.Alerts, Ledger: l, Logger: log.Named("alerts"), Clock: a.Clock}); err != nil {
			return err
		}
		defer notifier.Close()
		alerting.Store(notifier)
	}
	disp, err := dispatch.New(dispatch.Options{Ledger: l, Forwarder: fwd, Sources: queued, Logger: log.Named("dispatch"),
		Metrics: dispatch.NewMetrics(reg), Conversation: gwMetrics.Conversation, Clock: a.Clock, TracerProvider: tp, Alerts: notifier})
	if err != nil {
		return err
	}
	// Source health is read from the store at each scrape, so the gauges
	// agree across instances and survive restarts.
	reg.MustRegister(dispatch.NewHealthCollector(sourcesHealth(l, sources, a.Clock), log.Named("metrics")))
	gw, err := ingress.New(ingress.Options{
		Sources: sources, Ledger: l, Forwarder: fwd,
		Logger: log, Metrics: gwMetrics, Clock: a.Clock, Handoff: disp, StoreTimeout: cfg.Server.StoreTimeout,
		TracerProvider: tp, Alerts: notifier,
	})
	if err != nil {
		return err
	}

	public, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var certs *certReloader
	if cfg.TLS.Cert != "" {
		if certs, err = newCertReloader(cfg.TLS); err != nil {
			_ = public.Close()
			return err
		}
		public = tls.NewListener(public, certs.config())
	}
	// Beyond the limit, connections wait in the kernel's accept queue
	// instead of each costing a goroutine and its buffers.
	public = netutil.LimitListener(public, cfg.Server.MaxConnections)
	publicSrv := &http.Server{
		Handler:           gw,
		MaxHeaderBytes:    int(cfg.Server.MaxHeaderBytes),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	// stopping turns /readyz to 503 from the signal on, so an orchestrator
	// stops sending traffic while the drain runs.
	var stopping atomic.Bool
	servers := []*http.Server{publicSrv}
	listeners := []net.Listener{public}
	adminAddr := ""
	// hist is this instance's last hour per source for the console's
	// overview; it samples the metrics until the servers are done.
	var hist *console.History
	if cfg.Admin.Listen != "" {
		admin, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			_ = public.Close()
			return fmt.Errorf("admin.listen: %w", err)
		}
		adminAddr = admin.Addr().String()
		hist = console.NewHistory(reg, a.Clock)
		adminH, err := a.adminHandler(reg, store, l, cfg.Admin, sources, log, &stopping, tp, disp.PauseNow, disp.SendTrial, gw.RejectedRequests, hist)
		if err != nil {
			_ = public.Close()
			_ = admin.Close()
			return err
		}
		servers = append(servers, &http.Server{
			Handler:           newHostGuard(cfg.Admin.Listen, cfg.Admin.AllowedHosts, log.Named("admin"), adminH),
			MaxHeaderBytes:    int(cfg.Server.MaxHeaderBytes),
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
	histCtx, stopHist := context.WithCancel(context.Background())
	defer stopHist()
	if hist != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hist.Run(histCtx, historyEvery)
		}()
	}
	dispCtx, stopDispatch := context.WithCancel(context.Background())
	defer stopDispatch()
	dispDone := make(chan struct{})
	go func() {
		defer close(dispDone)
		disp.Run(dispCtx)
	}()
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
	stopping.Store(true)
	end := a.drain(log, gw, servers[0], cfg.Server)
	graceEnd = end
	// The dispatcher stops taking work, and its deliveries in flight get
	// what is left of the grace period; a cut one is left due.
	stopDispatch()
	<-dispDone
	grace, cancelGrace := context.WithDeadline(context.Background(), end)
	defer cancelGrace()
	if err := disp.Shutdown(grace); err != nil {
		log.Warn("queued deliveries cut by shutdown; they are due again", zap.Error(err))
	}
	// The admin listener goes last: agents settle through it meanwhile.
	for _, srv := range servers[1:] {
		if err := srv.Shutdown(grace); err != nil {
			_ = srv.Close()
		}
	}
	stopWatch()
	stopHist()
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

// adminHandler serves the private listener: the ledger API under /v1/
// and /metrics, both behind the admin token when one is set, the health
// probes /healthz and /readyz, which stay open so that orchestrator
// probes need no credentials (they reveal only up or down), and the admin
// console on every other path, behind a session signed in with the token.
// The console calls the same ledger API handler (traced when tp is set).
//
// pause (nil: none) is told of each pause and resume the API records,
// before it answers: this process's dispatcher stops the source at once.
// A pause then waits for every other live instance's dispatcher.
func (a *App) adminHandler(reg *prometheus.Registry, store ledger.Store, l *ledger.Ledger, admin config.Admin, sources []*ingress.Source, log *zap.Logger, stopping *atomic.Bool,
	tp trace.TracerProvider, pause func(source string, paused bool), trials ledgerapi.Trials, rejected func(source string) []ingress.Rejected, hist *console.History) (http.Handler, error) {
	token := admin.Token
	mux := http.NewServeMux()
	names := make([]string, 0, len(sources))
	var inline []string
	for _, s := range sources {
		names = append(names, s.Name)
		if s.Queued().Policy.Mode == dispatch.ModeInline {
			inline = append(inline, s.Name)
		}
	}
	apiOpts := []ledgerapi.Option{ledgerapi.WithSources(names), ledgerapi.WithInlineSources(inline)}
	if trials != nil {
		apiOpts = append(apiOpts, ledgerapi.WithTrials(trials))
	}
	if pause != nil {
		// A pause answers once every live instance's dispatcher has
		// stopped the source (docs/health.md), or after pauseWait.
		apiOpts = append(apiOpts, ledgerapi.WithPauseHook(pause), ledgerapi.WithPauseWait(pauseWait))
	}
	// The ledger API and, beside it, the sources' health (which needs the
	// sources' configuration): one handler, which the console calls too.
	api := http.NewServeMux()
	api.Handle("/v1/", tracing.LedgerAPI(l, token, log.Named("ledgerapi"), tp, apiOpts...))
	api.Handle("GET "+ledgerapi.HealthPath, ledgerapi.HealthHandler(healthJSON(sourcesHealth(l, sources, a.Clock)), token, log.Named("ledgerapi")))
	if rejected != nil {
		api.Handle("GET "+rejectedPath, rejectedHandler(rejected, token, log.Named("ledgerapi")))
	}
	mux.Handle("/v1/", api)
	clock := a.Clock
	if clock == nil {
		clock = time.Now
	}
	con, err := newConsole(api, token, admin.TrustForwardedProto, sources, reg, hist, clock, log.Named("console"))
	if err != nil {
		return nil, err
	}
	mux.Handle("/", con)
	mux.Handle("GET /metrics", ledgerapi.RequireToken(token, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), log))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if stopping.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("shutting down\n"))
			return
		}
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
	return mux, nil
}
