package bench

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// timedStore is the ledger store as the bench hands it to the gateway: every
// method goes to the real store with its arguments and results unchanged,
// and each Transact and Read made on behalf of a recorded request is timed,
// whether it succeeds or not.
//
// Calls are attributed to requests through the request's context: handler
// puts a storeRequest in it, and the gateway passes that context, or one
// derived from it, through the ledger to the store. A call whose context
// carries none (a warm-up, an in-process benchmark, a pass that is not the
// gateway's) is forwarded without reading the clock.
//
// No code in the module looks for optional methods on a ledger.Store (Ping,
// Close, DeleteExpired) by type assertion, and the bench closes the concrete
// store it opened, so the wrapper has only the interface's methods. Were
// such a check added, this wrapper would hide them from it.
type timedStore struct {
	store ledger.Store
	now   func() time.Time
	// recording is the pass whose slice is being sent, nil between slices.
	recording atomic.Pointer[storeRecorder]
}

var _ ledger.Store = (*timedStore)(nil)

func newTimedStore(s ledger.Store, now func() time.Time) *timedStore {
	return &timedStore{store: s, now: now}
}

// ChecksAbsent forwards ledger.AbsenceChecker.
func (s *timedStore) ChecksAbsent() bool { return ledger.ChecksAbsent(s.store) }

// Transact forwards to the store and, within a recorded request, times it.
// The time includes the ledger's decision function, which the store runs
// inside the call (again after an optimistic store lost a race).
func (s *timedStore) Transact(ctx context.Context, scope string, fn func(current []byte) (*ledger.Write, error)) error {
	rq := requestOf(ctx)
	if rq == nil {
		return s.store.Transact(ctx, scope, fn)
	}
	start := s.now()
	err := s.store.Transact(ctx, scope, fn)
	rq.add(s.now().Sub(start))
	return err
}

// Read forwards to the store and, within a recorded request, times it.
func (s *timedStore) Read(ctx context.Context, scope string) ([]byte, error) {
	rq := requestOf(ctx)
	if rq == nil {
		return s.store.Read(ctx, scope)
	}
	start := s.now()
	doc, err := s.store.Read(ctx, scope)
	rq.add(s.now().Sub(start))
	return doc, err
}

// ScopesToReview forwards untimed: it serves operators listing ambiguous
// entries, never a webhook.
func (s *timedStore) ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	return s.store.ScopesToReview(ctx, notAfter, limit)
}

// ScopesDue forwards untimed: dispatchers call it, never a webhook.
func (s *timedStore) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	return s.store.ScopesDue(ctx, notAfter, limit)
}

// ScopesDueBetween forwards untimed, as ScopesDue.
func (s *timedStore) ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error) {
	return s.store.ScopesDueBetween(ctx, from, notAfter, limit)
}

// CountDue forwards untimed: the dispatcher's gauges call it, never a
// webhook.
func (s *timedStore) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	return s.store.CountDue(ctx, notAfter)
}

// ScopesReceived forwards untimed: operators call it, never a webhook.
func (s *timedStore) ScopesReceived(ctx context.Context, before ledger.ScopeAt, limit int) ([]ledger.ScopeAt, error) {
	return s.store.ScopesReceived(ctx, before, limit)
}

// ReadBlob forwards untimed: dispatchers and operators call it.
func (s *timedStore) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	return s.store.ReadBlob(ctx, scope, name)
}

// ReadBlobs forwards untimed, as ReadBlob: a claim on a long scope calls
// it before its Transact, which is what the pass times.
func (s *timedStore) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	return s.store.ReadBlobs(ctx, scope, names)
}

// ReadControl forwards untimed: dispatchers and operators call it.
func (s *timedStore) ReadControl(ctx context.Context, name string) ([]byte, error) {
	return s.store.ReadControl(ctx, name)
}

// TransactControl forwards untimed: operators call it, never a webhook.
func (s *timedStore) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	return s.store.TransactControl(ctx, name, fn)
}

// handler wraps the gateway's handler so that, while a pass is recording,
// each request's store calls are collected and handed to that pass when the
// request is done. Outside a recording it costs one atomic load.
func (s *timedStore) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := s.recording.Load()
		if rec == nil || !rec.begin() {
			next.ServeHTTP(w, r)
			return
		}
		rq := &storeRequest{}
		rq.calls = rq.buf[:0]
		defer rec.end(rq)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), storeRequestKey{}, rq)))
	})
}

// newRecorder makes the recorder of one pass of about requests requests.
func (s *timedStore) newRecorder(requests int) *storeRecorder {
	r := &storeRecorder{timer: s, calls: make([]time.Duration, 0, 2*requests), perRequest: make([]time.Duration, 0, requests)}
	r.idle.L = &r.mu
	return r
}

type storeRequestKey struct{}

func requestOf(ctx context.Context) *storeRequest {
	rq, _ := ctx.Value(storeRequestKey{}).(*storeRequest)
	return rq
}

// storeRequest is one request's store calls. The gateway calls the ledger
// from the request's goroutine, one call after the other; the lock costs
// little and keeps the figures right should that ever change.
type storeRequest struct {
	mu    sync.Mutex
	calls []time.Duration
	buf   [4]time.Duration // room for the gateway's one or two calls without allocating
}

func (rq *storeRequest) add(d time.Duration) {
	rq.mu.Lock()
	rq.calls = append(rq.calls, d)
	rq.mu.Unlock()
}

// storeRecorder gathers the store calls of one pass's requests, over all its
// slices.
type storeRecorder struct {
	timer *timedStore

	mu sync.Mutex
	// idle is signalled when the last request in flight ends after finish
	// has closed the recorder.
	idle       sync.Cond
	closed     bool
	inFlight   int
	calls      []time.Duration // every timed call, in no particular order
	perRequest []time.Duration // each request's calls, summed
}

// attach makes the gateway's requests from now on count for this pass.
func (r *storeRecorder) attach() { r.timer.recording.Store(r) }

// detach stops counting new requests for this pass; those already in flight
// still count.
func (r *storeRecorder) detach() { r.timer.recording.CompareAndSwap(r, nil) }

// begin admits a request, unless finish has already read the figures.
func (r *storeRecorder) begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.inFlight++
	return true
}

func (r *storeRecorder) end(rq *storeRequest) {
	rq.mu.Lock()
	var sum time.Duration
	for _, d := range rq.calls {
		sum += d
	}
	r.mu.Lock()
	r.calls = append(r.calls, rq.calls...)
	rq.mu.Unlock()
	r.perRequest = append(r.perRequest, sum)
	r.inFlight--
	if r.inFlight == 0 && r.closed {
		r.idle.Broadcast()
	}
	r.mu.Unlock()
}

// finish closes the recorder, waits for the requests it admitted (their
// answers are in before the pass ends, but the handler may not have
// returned yet) and summarizes them.
func (r *storeRecorder) finish() StoreTiming {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for r.inFlight > 0 {
		r.idle.Wait()
	}
	return storeTimingOf(r.calls, r.perRequest)
}

// StoreTiming is the wall time a gateway pass's requests spent inside the
// ledger store's Transact and Read calls.
type StoreTiming struct {
	Requests    int     `json:"requests"` // requests the figures cover
	Calls       int     `json:"calls"`    // Transact and Read calls they made
	CallsPerReq float64 `json:"calls_per_req"`
	CallP50ms   float64 `json:"call_p50_ms"` // one call
	CallP99ms   float64 `json:"call_p99_ms"`
	ReqP50ms    float64 `json:"per_req_p50_ms"` // one request's calls, summed
	ReqP99ms    float64 `json:"per_req_p99_ms"`
	// ServerCPUus is the store server's CPU per request over the pass
	// (Postgres and Redis, when the server's CPU can be read): work the
	// gateway moved out of this process, not counted in CPUus.
	ServerCPUus *float64 `json:"server_cpu_us_per_req,omitempty"`
}

func storeTimingOf(calls, perRequest []time.Duration) StoreTiming {
	c, q := slices.Clone(calls), slices.Clone(perRequest)
	slices.Sort(c)
	slices.Sort(q)
	t := StoreTiming{Requests: len(q), Calls: len(c),
		CallP50ms: ms(percentile(c, .50)), CallP99ms: ms(percentile(c, .99)),
		ReqP50ms: ms(percentile(q, .50)), ReqP99ms: ms(percentile(q, .99))}
	if t.Requests > 0 {
		t.CallsPerReq = float64(t.Calls) / float64(t.Requests)
	}
	return t
}
