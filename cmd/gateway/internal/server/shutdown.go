package server

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Process is what a process owns around its Server and hands to Stop:
// the listeners' servers, the goroutines it started, the store it opened
// and its tracing. Every func field may be nil.
type Process struct {
	// Public serves the webhooks (Server.Gateway); Admin the admin
	// listener (Server.Admin), if any.
	Public *http.Server
	Admin  []*http.Server
	// Grace is server.shutdown_grace: everything below ends within it.
	// StoreTimeout is server.store_timeout: the part of the grace kept
	// for settling forwards cut by its end.
	Grace, StoreTimeout time.Duration
	// StopRun ends Run: it cancels Run's context and returns once Run has
	// returned.
	StopRun func()
	// Background stops, and waits for, the process's other goroutines
	// (the listeners' Serve, a certificate watcher), once every listener
	// is shut down.
	Background func()
	// CloseStore closes the store, once nothing can read it any more.
	CloseStore func()
	// StopTracing flushes the spans, the shutdown's own included, by
	// graceEnd at the latest.
	StopTracing func(graceEnd time.Time)
	Log         *zap.Logger
}

// Stop shuts the gateway down within p.Grace, in this order, each step
// once the one before has finished:
//
//  1. /readyz answers 503, so an orchestrator stops sending traffic;
//  2. the public listener stops taking webhooks and drains the requests
//     in flight (see drain), whose handlers are then waited for;
//  3. the dispatcher stops taking queued deliveries (p.StopRun), and those
//     in flight get what is left of the grace; a cut one is left due;
//  4. the admin listener stops: agents settle through its ledger API until
//     the deliveries above have ended;
//  5. the process's other goroutines end (p.Background) and the alert
//     notifier stops, once nothing can raise an alert;
//  6. the store closes, once nothing reads it;
//  7. tracing stops last, so the shutdown's own spans are exported.
//
// It returns when the grace ended.
func (s *Server) Stop(p Process) (graceEnd time.Time) {
	log := p.Log
	if log == nil {
		log = zap.NewNop()
	}
	s.Stopping()
	end := time.Now().Add(p.Grace)
	if p.Public != nil {
		s.drain(log, p.Public, end, min(p.StoreTimeout+time.Second, p.Grace/2))
	}
	call(p.StopRun)
	grace, cancelGrace := context.WithDeadline(context.Background(), end)
	defer cancelGrace()
	if err := s.Shutdown(grace); err != nil {
		log.Warn("queued deliveries cut by shutdown; they are due again", zap.Error(err))
	}
	for _, hs := range p.Admin {
		if err := hs.Shutdown(grace); err != nil {
			_ = hs.Close()
		}
	}
	call(p.Background)
	s.Close()
	call(p.CloseStore)
	if p.StopTracing != nil {
		p.StopTracing(end)
	}
	return end
}

func call(f func()) {
	if f != nil {
		f()
	}
}

// drain stops the public listener by end, whatever the agents do. The
// admin listener stays up meanwhile, for /readyz (503 now) and for agents
// settling through the ledger API. Before end, forwards still running are
// cancelled and their claims settled as not applied, leaving the settles
// reserve, the rest of the grace (Stop keeps at most half of it, at least
// a store timeout when the grace allows); at end every connection is
// closed.
func (s *Server) drain(log *zap.Logger, public *http.Server, end time.Time, reserve time.Duration) {
	cancelAt, cancel := context.WithDeadline(context.Background(), end.Add(-reserve))
	defer cancel()
	if err := public.Shutdown(cancelAt); err != nil {
		log.Warn("grace period nearly over with deliveries still running; cancelling their forwards",
			zap.Duration("left", time.Until(end)))
		s.Gateway.CancelForwards(end)
		hard, cancelHard := context.WithDeadline(context.Background(), end)
		defer cancelHard()
		if err := public.Shutdown(hard); err != nil {
			log.Warn("grace period over; closing connections", zap.Error(err))
		}
		_ = public.Close()
	}
	handlers := make(chan struct{})
	go func() { s.Gateway.Wait(); close(handlers) }()
	select {
	case <-handlers:
	case <-time.After(time.Until(end)):
		// Only a store that ignores its context gets here; the process
		// exits anyway, and the claim expires on its TTL.
		log.Error("grace period over with webhook handlers still waiting on the store")
	}
}
