package server

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/cmd/gateway/internal/console"
	"github.com/replyonce/gateway/cmd/gateway/internal/tracing"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// pauseWait bounds how long a pause waits for the other instances'
// dispatchers to stop the source: several sweeps (1 s each), and within
// the CLI's default admin timeout (10 s).
const pauseWait = 5 * time.Second

// adminOptions are what the admin handler is built on.
type adminOptions struct {
	reg      *prometheus.Registry
	store    ledger.Store
	l        *ledger.Ledger
	admin    config.Admin
	sources  []*ingress.Source
	log      *zap.Logger
	stopping *atomic.Bool
	tp       trace.TracerProvider
	pause    func(source string, paused bool)
	// trials sends an event to another URL (POST /v1/deliveries/trial).
	trials ledgerapi.Trials
	// rejected lists the requests this instance refused (GET /v1/rejected).
	rejected func(source string) []ingress.Rejected
	// hist is this instance's last hour for the console's overview.
	hist  *console.History
	clock func() time.Time
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
func adminHandler(o adminOptions) (http.Handler, error) {
	token, log := o.admin.Token, o.log
	mux := http.NewServeMux()
	names := make([]string, 0, len(o.sources))
	var inline []string
	for _, s := range o.sources {
		names = append(names, s.Name)
		if s.Queued().Policy.Mode == dispatch.ModeInline {
			inline = append(inline, s.Name)
		}
	}
	apiOpts := []ledgerapi.Option{ledgerapi.WithSources(names), ledgerapi.WithInlineSources(inline)}
	if o.trials != nil {
		apiOpts = append(apiOpts, ledgerapi.WithTrials(o.trials))
	}
	if o.pause != nil {
		// A pause answers once every live instance's dispatcher has
		// stopped the source (docs/health.md), or after pauseWait.
		apiOpts = append(apiOpts, ledgerapi.WithPauseHook(o.pause), ledgerapi.WithPauseWait(pauseWait))
	}
	// The ledger API and, beside it, the sources' health (which needs the
	// sources' configuration): one handler, which the console calls too.
	api := http.NewServeMux()
	api.Handle("/v1/", tracing.LedgerAPI(o.l, token, log.Named("ledgerapi"), o.tp, apiOpts...))
	api.Handle("GET "+ledgerapi.HealthPath, ledgerapi.HealthHandler(healthJSON(sourcesHealth(o.l, o.sources, o.clock)), token, log.Named("ledgerapi")))
	if o.rejected != nil {
		api.Handle("GET "+RejectedPath, rejectedHandler(o.rejected, token, log.Named("ledgerapi")))
	}
	mux.Handle("/v1/", api)
	clock := o.clock
	if clock == nil {
		clock = time.Now
	}
	con, err := NewConsole(api, token, o.admin.TrustForwardedProto, o.sources, o.reg, o.hist, clock, log.Named("console"))
	if err != nil {
		return nil, err
	}
	mux.Handle("/", con)
	mux.Handle("GET /metrics", ledgerapi.RequireToken(token, promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}), log))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if o.stopping.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("shutting down\n"))
			return
		}
		if _, err := o.store.Read(ctx, "replyonce:readyz"); err != nil {
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
