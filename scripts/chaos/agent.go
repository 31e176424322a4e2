//go:build unix

package main

import (
	"context"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replyonce/gateway/forward"
)

// Fault is how the agent answers one forward.
type Fault int

// The agent's faults.
const (
	Answer  Fault = iota // 200
	Fail500              // 500: retried
	Busy429              // 429 with Retry-After: 1: retried
	Hang                 // no answer until the gateway gives up
	Close                // the request read, the connection closed without an answer
	Deny401              // 401: rejected for good
	Gone404              // 404: rejected for good
)

// FaultPlan picks the agent's answer to a forward; nil answers 200.
type FaultPlan func(f Forward) Fault

// FirstDeliveryFaults fails the first delivery of one event in every
// `every`, cycling through faults by the event id's hash; every later
// delivery is answered 200.
func FirstDeliveryFaults(every int, faults ...Fault) FaultPlan {
	return func(f Forward) Fault {
		if f.Delivery != "1" {
			return Answer
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(f.EventID))
		n := int(h.Sum32())
		if n%every != 0 {
			return Answer
		}
		return faults[(n/every)%len(faults)]
	}
}

// Agent is the recording agent: it receives forwards, answers by its
// plan, and keeps every forward in the order received.
type Agent struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	plan    atomic.Pointer[FaultPlan]
	hangAll atomic.Bool // every forward hangs (a stuck agent)

	mu       sync.Mutex
	forwards []Forward
	last     time.Time // when the latest forward arrived
}

// StartAgent listens on addr.
func StartAgent(addr string) (*Agent, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	a := &Agent{ln: ln, done: make(chan struct{})}
	a.srv = &http.Server{Handler: a, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(a.done)
		_ = a.srv.Serve(ln)
	}()
	return a, nil
}

// URL is where the gateway forwards to.
func (a *Agent) URL() string { return "http://" + a.ln.Addr().String() + "/events" }

// SetPlan sets the faults for the forwards to come.
func (a *Agent) SetPlan(p FaultPlan) { a.plan.Store(&p) }

// HangAll makes every forward hang (true) or be answered by the plan.
func (a *Agent) HangAll(on bool) { a.hangAll.Store(on) }

// Close stops the agent and waits for its server.
func (a *Agent) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
	}
	<-a.done
}

// Forwards is a copy of the record so far.
func (a *Agent) Forwards() []Forward {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Forward(nil), a.forwards...)
}

// Quiet is how long ago the latest forward arrived.
func (a *Agent) Quiet() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Since(a.last)
}

func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f := Forward{
		EventID:  r.Header.Get(forward.HeaderEventID),
		Source:   r.Header.Get(forward.HeaderSource),
		Scope:    r.Header.Get(forward.HeaderScope),
		RunID:    r.Header.Get(forward.HeaderRunID),
		Delivery: r.Header.Get(forward.HeaderDelivery),
		Token:    r.Header.Get(forward.HeaderFencingToken),
	}
	if v := r.Header.Get(forward.HeaderCovers); v != "" {
		n, ids, err := forward.ParseCovers(v)
		if err != nil {
			ids = []string{"unparsable: " + v} // the checker reports it
		}
		f.CoverCount, f.Covers = n, ids
	}
	fault := Answer
	if p := a.plan.Load(); p != nil && *p != nil {
		fault = (*p)(f)
	}
	if a.hangAll.Load() {
		fault = Hang
	}
	f.Final = fault == Answer || fault == Deny401 || fault == Gone404
	a.mu.Lock()
	i := len(a.forwards)
	a.forwards = append(a.forwards, f)
	a.last = time.Now()
	a.mu.Unlock()

	switch fault {
	case Answer:
		w.WriteHeader(http.StatusOK)
	case Fail500:
		w.WriteHeader(http.StatusInternalServerError)
	case Busy429:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	case Deny401:
		w.WriteHeader(http.StatusUnauthorized)
	case Gone404:
		w.WriteHeader(http.StatusNotFound)
	case Close:
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
	case Hang:
		// Until the gateway gives up (or the agent stops); an answer the
		// gateway would still read counts, so it is recorded as final.
		t := time.NewTimer(time.Minute)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
			a.mu.Lock()
			a.forwards[i].Final = true
			a.mu.Unlock()
			w.WriteHeader(http.StatusOK)
		}
	}
}
