package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	gwserver "github.com/replyonce/gateway/cmd/gateway/internal/server"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// headerBenchID carries the event id on the generator's requests so the
// sink can count baseline forwards without parsing bodies. The gateway does
// not forward it (it is not on any provider's allow-list); there the sink
// reads Replyonce-Event-Id, which the gateway sets from the event itself.
const headerBenchID = "Bench-Event-Id"

// sourceName is the route both middle boxes serve: /hooks/bench.
const sourceName = "bench"

// tally counts forwards per event id for one pass.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
}

func (t *tally) add(id string) {
	t.mu.Lock()
	t.counts[id]++
	t.mu.Unlock()
}

func (t *tally) count(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[id]
}

// sink is the agent: it reads the body, counts the event and answers 200.
type sink struct {
	current atomic.Pointer[tally]
}

func (s *sink) reset() *tally {
	t := &tally{counts: map[string]int{}}
	s.current.Store(t)
	return t
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get(forward.HeaderEventID)
	if id == "" {
		id = r.Header.Get(headerBenchID)
	}
	if t := s.current.Load(); t != nil {
		t.add(id)
	}
	w.WriteHeader(http.StatusOK)
}

// server is one loopback http.Server and the goroutine serving it.
type server struct {
	srv  *http.Server
	url  string
	done chan struct{}
	err  error
}

// serve listens on a port the kernel picks on 127.0.0.1. Its timeouts are
// the gateway's configuration defaults, for every server in the run alike.
func serve(part string, h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: listen: %w", err)
	}
	d := config.Default().Server
	s := &server{
		srv: &http.Server{Handler: h, ReadHeaderTimeout: d.ReadHeaderTimeout, ReadTimeout: d.ReadTimeout, IdleTimeout: d.IdleTimeout,
			// A benchmark that loses connections under load should say so
			// in its error counts, not on the terminal.
			ErrorLog: zap.NewStdLog(zap.NewNop())},
		url:  "http://" + ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		// Every connection goroutine inherits the label, so --cpuprofile
		// can be split by part (go tool pprof -tagfocus part=gateway).
		pprof.Do(context.Background(), pprof.Labels("part", part), func(context.Context) {
			if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.err = err
			}
		})
	}()
	return s, nil
}

// stop shuts the server down and waits for its goroutine.
func (s *server) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// env is everything one run keeps up between passes.
type env struct {
	store      *openedStore
	storeNotes string
	// storeTimer stands between the gateway's ledger and the store, timing
	// the store calls of the gateway passes.
	storeTimer *timedStore
	sink       *sink
	sinkSrv    *server
	gateway    *ingress.Gateway
	gwSrv      *server
	// srv is the gateway built as serve builds it; its dispatcher delivers
	// queued events (queued is the mode), stopDispatch ends its loop,
	// dispatchDone closes when it has.
	srv          *gwserver.Server
	ledger       *ledger.Ledger
	queued       bool
	stopDispatch context.CancelFunc
	dispatchDone chan struct{}
	proxySrv     *server
	transports   []*http.Transport
	logFile      *os.File
	provider     string
	signer       signatures.Signer
}

// benchSecret is the provider secret of the bench source: a Standard
// Webhooks style whsec_ secret, which both providers accept.
const benchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// forwardSecret signs forwarded requests when Config.SignForward is set.
const forwardSecret = "whsec_QmVuY2hGb3J3YXJkU2lnbmluZ1NlY3JldDE="

// newSigner signs as the provider would, with the bench source's secret.
func newSigner(provider string) (signatures.Signer, error) {
	return signatures.NewSigner(provider, signatures.Config{Secrets: []string{benchSecret}})
}

func startEnv(ctx context.Context, cfg Config) (e *env, err error) {
	e = &env{sink: &sink{}, provider: cfg.Provider}
	// The returns below set e to nil: close what was started through a
	// copy, or a failed start panics instead of saying why.
	started := e
	defer func() {
		if err != nil {
			started.close()
			e = nil
		}
	}()
	if e.signer, err = newSigner(cfg.Provider); err != nil {
		return nil, err
	}
	if e.sinkSrv, err = serve("sink", e.sink); err != nil {
		return nil, err
	}
	if e.store, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	e.storeNotes = e.store.notes
	e.storeTimer = newTimedStore(e.store.store, time.Now)

	// The gateway, built as `serve` builds it (package server), but for
	// the store timing around its store and its handler.
	fc := ingress.ForwardConfig{Target: forward.Target{URL: e.sinkSrv.url + "/events"}, Queue: dispatch.Policy{Mode: dispatch.Mode(cfg.Mode), Concurrency: cfg.DispatchConcurrency, AcceptWait: dispatch.AcceptWaitOf(cfg.AcceptWait)}}
	if cfg.SignForward {
		fc.SigningSecret = forwardSecret
	}
	fc.KeepBody = cfg.KeepBody
	var scope extract.Templates
	if len(cfg.LongScope) > 0 {
		scope = extract.Templates{"{header:" + headerBenchScope + "}"}
		if cfg.LongScopeWaiting {
			fc.Queue.Order = ledger.OrderScope
		}
	}
	src, err := ingress.NewSource(ingress.SourceConfig{
		Name: sourceName, Provider: cfg.Provider, Scope: scope,
		// Events are signed before their pass starts, and a slow store's
		// pass can outlast the providers' 5 minute tolerance. Checking the
		// timestamp costs the same whatever the tolerance.
		Signature: signatures.Config{Secrets: []string{benchSecret}, Tolerance: 24 * time.Hour},
		Forward:   fc,
	})
	if err != nil {
		return nil, err
	}
	log := zap.NewNop()
	if cfg.Log == "devnull" {
		if e.logFile, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return nil, err
		}
		enc := zap.NewProductionEncoderConfig()
		enc.EncodeTime = zapcore.ISO8601TimeEncoder
		log = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(e.logFile), zapcore.InfoLevel))
	}
	fwdClient := forward.NewClient(forward.ClientOptions{})
	e.transports = append(e.transports, fwdClient.Transport.(*http.Transport))
	srv, err := gwserver.New(gwserver.Options{Store: e.storeTimer, Sources: []*ingress.Source{src}, HTTPClient: fwdClient,
		Logger: log, Poll: 50 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	e.srv, e.ledger, e.queued = srv, srv.Ledger, cfg.Mode == "queued"
	var dctx context.Context
	dctx, e.stopDispatch = context.WithCancel(context.Background())
	e.dispatchDone = make(chan struct{})
	go func() {
		defer close(e.dispatchDone)
		pprof.Do(dctx, pprof.Labels("part", "gateway"), srv.Run)
	}()
	gw := srv.Gateway
	e.gateway = gw
	if e.gwSrv, err = serve("gateway", e.storeTimer.handler(gw)); err != nil {
		return nil, err
	}

	// The baseline: a bare echo reverse proxy to the same sink, with a
	// transport pooled like the gateway's (see the package doc).
	proxyTransport := forward.NewClient(forward.ClientOptions{}).Transport.(*http.Transport)
	e.transports = append(e.transports, proxyTransport)
	target, err := parseURL(e.sinkSrv.url)
	if err != nil {
		return nil, err
	}
	if e.proxySrv, err = serve("proxy", newBaseline(target, proxyTransport)); err != nil {
		return nil, err
	}
	return e, nil
}

// newBaseline is the bare reverse proxy: echo routing POST /hooks/:source
// to httputil.ReverseProxy, which is also what echo's middleware.Proxy runs
// underneath. (That middleware package would pull golang.org/x/time into
// the module for its rate limiter; the proxy itself is the same.) Nothing is
// read, verified or remembered: the body streams through.
func newBaseline(target *url.URL, transport http.RoundTripper) *echo.Echo {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = "/events"
			r.SetXForwarded()
		},
		Transport: transport,
		ErrorLog:  zap.NewStdLog(zap.NewNop()),
	}
	ec := echo.New()
	ec.HideBanner, ec.HidePort = true, true
	ec.Any("/hooks/:source", echo.WrapHandler(rp))
	return ec
}

// close stops everything startEnv started, in reverse order, and waits for
// it: servers first, so no handler is still using the store when it goes.
func (e *env) close() {
	if e.proxySrv != nil {
		e.proxySrv.stop()
	}
	if e.gwSrv != nil {
		e.gwSrv.stop()
	}
	if e.gateway != nil {
		e.gateway.Wait()
	}
	if e.srv != nil {
		e.stopDispatch()
		<-e.dispatchDone
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = e.srv.Shutdown(ctx)
		cancel()
		e.srv.Close()
	}
	if e.sinkSrv != nil {
		e.sinkSrv.stop()
	}
	for _, t := range e.transports {
		t.CloseIdleConnections()
	}
	if e.store != nil {
		e.store.close()
	}
	if e.logFile != nil {
		_ = e.logFile.Close()
	}
}
