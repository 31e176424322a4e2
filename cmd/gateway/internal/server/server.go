package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/cmd/gateway/internal/console"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/ledger"
)

// Options are what New builds the gateway from. Store and Sources are
// required; serve fills the rest from its configuration.
type Options struct {
	// Store is the open store; the caller closes it after Shutdown.
	Store   ledger.Store
	Sources []*ingress.Source
	// Ledger is the ledger's options (the `ledger:` section); New sets
	// its Clock and, before any observer given here, counts the loop
	// breaker's refusals and escalations.
	Ledger ledger.Options
	// Alerts is the `alerts:` section; without targets no notifier runs.
	Alerts alerts.Config
	// Admin, when Admin.Listen is set, makes New build the admin handler.
	Admin config.Admin
	// StoreTimeout bounds each store call of a webhook (server.store_timeout).
	StoreTimeout time.Duration
	// Registry holds the gateway's metrics; nil: a new one.
	Registry *prometheus.Registry
	// HTTPClient forwards to the agents; nil: forward.NewClient's default.
	HTTPClient *http.Client
	// Poll is how often the dispatcher reads the due index when nothing
	// wakes it sooner; 0: the dispatcher's default.
	Poll           time.Duration
	Clock          func() time.Time
	Logger         *zap.Logger
	TracerProvider trace.TracerProvider
}

// Server is the built gateway.
type Server struct {
	Ledger     *ledger.Ledger
	Gateway    *ingress.Gateway
	Dispatcher *dispatch.Dispatcher
	Registry   *prometheus.Registry
	// Admin serves the admin listener; nil unless Options.Admin.Listen is
	// set.
	Admin http.Handler

	notifier *alerts.Notifier
	stopping atomic.Bool
	// history is this instance's last hour for the console's overview
	// (nil without an admin listener); Run samples it.
	history *console.History
}

// historyEvery is how often the console's History samples the metrics:
// an event counts in the minute of the sample after it, so one in the
// last seconds of a minute may count in the next.
const historyEvery = 2 * time.Second

// New builds the gateway. It starts no goroutine but the alert notifier's
// (stopped by Close, or here on an error).
func New(o Options) (_ *Server, err error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	s := &Server{Registry: o.Registry}
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
	}
	log := o.Logger
	lopts := o.Ledger
	lopts.Clock = o.Clock
	// The notifier needs the ledger (it claims each alert through it) and
	// the ledger's observer raises escalation alerts through the notifier:
	// the observer reads it once it is set.
	var alerting atomic.Pointer[alerts.Notifier]
	breaker := loopBreakerObserver(s.Registry, log.Named("ledger"), lopts.Caps, alerting.Load)
	if next := lopts.Observe; next != nil {
		lopts.Observe = func(e ledger.Event) { breaker(e); next(e) }
	} else {
		lopts.Observe = breaker
	}
	s.Ledger = ledger.New(o.Store, lopts)
	client := o.HTTPClient
	if client == nil {
		client = forward.NewClient(forward.ClientOptions{})
	}
	fwd := forward.New(client, o.Clock).WithTracer(o.TracerProvider)
	gwMetrics := ingress.NewMetrics(s.Registry)
	queued := make([]*dispatch.Source, len(o.Sources))
	for i, src := range o.Sources {
		queued[i] = src.Queued()
	}
	// Alerts go out on the notifier's own goroutines, so a target that is
	// down slows no webhook; it stops after the dispatcher.
	if len(o.Alerts.Targets) > 0 {
		if s.notifier, err = alerts.New(alerts.Options{Config: o.Alerts, Ledger: s.Ledger, Logger: log.Named("alerts"), Clock: o.Clock}); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				s.notifier.Close()
			}
		}()
		alerting.Store(s.notifier)
	}
	// Every gateway dispatches its queued sources; several processes on
	// one store share the work through the ledger.
	if s.Dispatcher, err = dispatch.New(dispatch.Options{Ledger: s.Ledger, Forwarder: fwd, Sources: queued, Logger: log.Named("dispatch"),
		Metrics: dispatch.NewMetrics(s.Registry), Conversation: gwMetrics.Conversation, Clock: o.Clock, TracerProvider: o.TracerProvider,
		Alerts: s.notifier, Poll: o.Poll}); err != nil {
		return nil, err
	}
	// Source health is read from the store at each scrape, so the gauges
	// agree across instances and survive restarts.
	health := sourcesHealth(s.Ledger, o.Sources, o.Clock)
	s.Registry.MustRegister(dispatch.NewHealthCollector(health, log.Named("metrics")))
	if s.Gateway, err = ingress.New(ingress.Options{
		Sources: o.Sources, Ledger: s.Ledger, Forwarder: fwd,
		Logger: log, Metrics: gwMetrics, Clock: o.Clock, Handoff: s.Dispatcher, StoreTimeout: o.StoreTimeout,
		TracerProvider: o.TracerProvider, Alerts: s.notifier,
	}); err != nil {
		return nil, err
	}
	if o.Admin.Listen != "" {
		s.history = console.NewHistory(s.Registry, o.Clock)
		if s.Admin, err = adminHandler(adminOptions{reg: s.Registry, store: o.Store, l: s.Ledger, admin: o.Admin, sources: o.Sources,
			log: log, stopping: &s.stopping, tp: o.TracerProvider, pause: s.Dispatcher.PauseNow, trials: s.Dispatcher.SendTrial,
			rejected: s.Gateway.RejectedRequests, hist: s.history, clock: o.Clock}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Run dispatches queued deliveries, and samples the metrics for the
// console's overview, until ctx ends; it returns once both have stopped.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.history != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.history.Run(ctx, historyEvery)
		}()
	}
	s.Dispatcher.Run(ctx)
	wg.Wait()
}

// Stopping turns /readyz to 503, so an orchestrator stops sending traffic
// while the drain runs.
func (s *Server) Stopping() { s.stopping.Store(true) }

// Shutdown waits, until ctx's deadline, for the deliveries Run started
// (call it once Run has returned). A delivery cut by the deadline is left
// due, and its error returned.
func (s *Server) Shutdown(ctx context.Context) error { return s.Dispatcher.Shutdown(ctx) }

// Close stops the alert notifier, once nothing raises alerts any more:
// after Shutdown and after the admin listener has stopped. Stop calls it;
// a second call does nothing.
func (s *Server) Close() { s.notifier.Close() }
