package dispatch_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const githubSecret = "gh-dispatch-secret"

var errStoreDown = errors.New("teststore: connection refused")

// downStore is a store that can be made unreachable.
type downStore struct {
	ledger.Store
	down  atomic.Bool
	reads atomic.Int64 // Read, ReadControl and ScopesDue calls, failed ones included
	// countDown fails CountDue alone.
	countDown atomic.Bool
}

func (s *downStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.Transact(ctx, scope, fn)
}

func (s *downStore) ReadControl(ctx context.Context, name string) ([]byte, error) {
	s.reads.Add(1)
	if s.down.Load() {
		return nil, errStoreDown
	}
	return s.Store.ReadControl(ctx, name)
}

func (s *downStore) Read(ctx context.Context, scope string) ([]byte, error) {
	s.reads.Add(1)
	if s.down.Load() {
		return nil, errStoreDown
	}
	return s.Store.Read(ctx, scope)
}

func (s *downStore) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	s.reads.Add(1)
	if s.down.Load() {
		return nil, errStoreDown
	}
	return s.Store.ScopesDue(ctx, notAfter, limit)
}

func (s *downStore) ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error) {
	if s.down.Load() {
		return nil, errStoreDown
	}
	return s.Store.ScopesDueBetween(ctx, from, notAfter, limit)
}

func (s *downStore) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	if s.down.Load() || s.countDown.Load() {
		return 0, errStoreDown
	}
	return s.Store.CountDue(ctx, notAfter)
}

// got is one request as the agent saw it.
type got struct {
	Header http.Header
	Body   []byte
}

// agent records requests by event id and answers as told (200 by default).
type agent struct {
	*httptest.Server
	mu     sync.Mutex
	byID   map[string][]got
	answer func(w http.ResponseWriter, r *http.Request, n int)
}

func newAgent(t *testing.T) *agent {
	a := &agent{byID: map[string][]got{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(forward.HeaderEventID)
		a.mu.Lock()
		a.byID[id] = append(a.byID[id], got{Header: r.Header.Clone(), Body: body})
		n := len(a.byID[id])
		answer := a.answer
		a.mu.Unlock()
		if answer != nil {
			answer(w, r, n)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *agent) setAnswer(f func(w http.ResponseWriter, r *http.Request, n int)) {
	a.mu.Lock()
	a.answer = f
	a.mu.Unlock()
}

func (a *agent) requests(id string) []got {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]got(nil), a.byID[id]...)
}

// harness is a gateway with a queued GitHub source, its dispatcher (not
// running: tests drive sweeps themselves, or start Run), a memory store
// and a manual clock.
type harness struct {
	clock   *storetest.Clock
	store   *downStore
	ledger  *ledger.Ledger
	agent   *agent
	source  *ingress.Source
	gw      *ingress.Gateway
	d       *dispatch.Dispatcher
	srv     *httptest.Server
	jitterU float64
	tp      trace.TracerProvider // nil: no tracing
	// conv and logs are what the harness's dispatchers count and log;
	// dreg holds the metrics of the harness's own dispatcher (d).
	reg    *prometheus.Registry
	dreg   *prometheus.Registry
	conv   *dispatch.ConversationMetrics
	logs   *observer.ObservedLogs
	logger *zap.Logger
	// alerts is given to every dispatcher the harness builds (nil: none).
	alerts *alerts.Notifier
	// poll is the Poll of the dispatchers built after it is set (zero:
	// 20 ms).
	poll time.Duration
}

func queuedSource(mods ...func(*ingress.SourceConfig)) ingress.SourceConfig {
	c := ingress.SourceConfig{Name: "github", Provider: "github", Signature: signatures.Config{Secrets: []string{githubSecret}},
		Forward: ingress.ForwardConfig{Target: forward.Target{Timeout: 2 * time.Second, SigningSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, // Accepts never wait for a place unless a test gives them
			// forward.accept_wait.
			Queue: dispatch.Policy{Mode: dispatch.ModeQueued, AcceptWait: dispatch.AcceptWaitOf(0)}}}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func newHarness(t *testing.T, cfg ingress.SourceConfig) *harness {
	t.Helper()
	return newTracedHarness(t, cfg, nil)
}

// newTracedHarness is newHarness with the gateway, forwarder and
// dispatchers tracing under tp.
func newTracedHarness(t *testing.T, cfg ingress.SourceConfig, tp trace.TracerProvider) *harness {
	t.Helper()
	return newHarnessOn(t, cfg, tp, memory.New(nil))
}

// newHarnessOn is newTracedHarness on the given store.
// Each of mods changes the harness before its dispatcher is built.
func newHarnessOn(t *testing.T, cfg ingress.SourceConfig, tp trace.TracerProvider, store ledger.Store, mods ...func(*harness)) *harness {
	t.Helper()
	h := &harness{clock: storetest.NewClock(time.Now()), jitterU: 0.5, tp: tp, reg: prometheus.NewRegistry(), dreg: prometheus.NewRegistry()}
	h.conv = dispatch.NewConversationMetrics(h.reg)
	var core zapcore.Core
	core, h.logs = observer.New(zapcore.InfoLevel)
	h.logger = zap.New(core)
	h.agent = newAgent(t)
	h.store = &downStore{Store: store}
	h.ledger = ledger.New(h.store, ledger.Options{Clock: h.clock.Now})
	for _, m := range mods {
		m(h)
	}
	if cfg.Forward.URL == "" {
		cfg.Forward.URL = h.agent.URL + "/events"
	}
	src, err := ingress.NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.source = src
	client := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(client.CloseIdleConnections)
	fwd := forward.New(client, h.clock.Now).WithTracer(tp)
	h.d = h.newDispatcher(t, fwd, dispatch.NewMetrics(h.dreg))
	h.gw, err = ingress.New(ingress.Options{Sources: []*ingress.Source{src}, Ledger: h.ledger, Forwarder: fwd, Clock: h.clock.Now, Handoff: h.d,
		TracerProvider: tp, Alerts: h.alerts})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(h.gw)
	t.Cleanup(h.srv.Close)
	return h
}

// newDispatcher is another dispatcher on the harness's store (another
// process, as far as the ledger can tell). It is shut down at cleanup.
// metrics may be nil (counted nowhere).
func (h *harness) newDispatcher(t *testing.T, fwd *forward.Forwarder, metrics *dispatch.Metrics) *dispatch.Dispatcher {
	t.Helper()
	return h.newDispatcherOnStore(t, h.store, fwd, metrics)
}

// newDispatcherOn is newDispatcher reaching the harness's store through
// store (a wrapper of it), counting metrics nowhere.
func (h *harness) newDispatcherOn(t *testing.T, store ledger.Store, fwd *forward.Forwarder) *dispatch.Dispatcher {
	t.Helper()
	return h.newDispatcherOnStore(t, store, fwd, nil)
}

func (h *harness) newDispatcherOnStore(t *testing.T, store ledger.Store, fwd *forward.Forwarder, metrics *dispatch.Metrics) *dispatch.Dispatcher {
	t.Helper()
	d, err := dispatch.New(dispatch.Options{Ledger: ledger.New(store, ledger.Options{Clock: h.clock.Now}), Forwarder: fwd, Conversation: h.conv, Logger: h.logger,
		Metrics: metrics,
		Sources: []*dispatch.Source{h.source.Queued()}, Clock: h.clock.Now, Jitter: func() float64 { return h.jitterU }, Poll: cmp.Or(h.poll, 20*time.Millisecond),
		TracerProvider: h.tp, Alerts: h.alerts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return d
}

// run starts d's loop until the test ends.
func run(t *testing.T, d *dispatch.Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// settle waits until d has no delivery in flight.
func settle(t testing.TB, d *dispatch.Dispatcher) {
	t.Helper()
	testkit.Eventually(t, "the dispatcher has no delivery in flight", func() bool { return len(d.InFlight()) == 0 })
}

// sweep runs one sweep and waits for what it started.
func (h *harness) sweep(t *testing.T) {
	t.Helper()
	if _, err := h.d.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, h.d)
}

func githubBody(id string) []byte {
	return []byte(`{"action":"opened","issue":{"title":"` + id + `"}}`)
}

// post sends a signed GitHub delivery and returns the status and answer.
func (h *harness) post(t *testing.T, id string) (int, map[string]string) {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"issues"}, "X-Github-Delivery": {id}}
	signer, err := signatures.NewSigner("github", signatures.Config{Secrets: []string{githubSecret}})
	if err != nil {
		t.Fatal(err)
	}
	r := &signatures.Request{Method: http.MethodPost, Header: hdr, Body: githubBody(id)}
	if err := signer.Sign(r, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/hooks/github", bytes.NewReader(r.Body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans map[string]string
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &ans)
	return resp.StatusCode, ans
}

// item returns the queued delivery of event id.
func (h *harness) item(t *testing.T, id string) ledger.QueueItem {
	t.Helper()
	items, err := h.ledger.Queue().QueueItems(context.Background(), "github:"+id)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 {
		t.Fatalf("%d queued deliveries for %s, want 1", len(items), id)
	}
	return items[0]
}

func wantHeader(t *testing.T, g got, name, want string) {
	t.Helper()
	if v := g.Header.Get(name); v != want {
		t.Errorf("%s = %q, want %q", name, v, want)
	}
}

// counter reads a counter of the harness's registry by name and source.
func (h *harness) counter(t *testing.T, name, source string) float64 {
	t.Helper()
	return metricValue(t, h.reg, name, "source", source)
}

// metricValue reads the counter or gauge name from reg, the series whose
// labels include the given name, value pairs (0 when there is none yet).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue series
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// fillHolds reserves every place d has for source's deliveries, so that
// what is posted next waits in the store. It takes at least
// forward.concurrency places and no more than takeAhead times that, and
// releases at cleanup whatever the test has not.
func fillHolds(t *testing.T, d *dispatch.Dispatcher, source string) []*dispatch.Slot {
	t.Helper()
	var slots []*dispatch.Slot
	for {
		sl, ok := d.Reserve(context.Background(), source)
		if !ok {
			break
		}
		slots = append(slots, sl)
	}
	t.Cleanup(func() { // a test that failed before releasing them must not hang the shutdown
		for _, sl := range slots {
			sl.Release()
		}
	})
	c := d.Concurrency(source)
	if len(slots) < c || len(slots) > dispatch.TakeAhead*c {
		t.Fatalf("%d places reserved, want %d to %d", len(slots), c, dispatch.TakeAhead*c)
	}
	return slots
}

// wantDeliveredOnceAsSecond checks that id reached the agent exactly once,
// as the run's second delivery (the first one's claim was lost or given
// back unsent), and is recorded delivered.
func (h *harness) wantDeliveredOnceAsSecond(t *testing.T, id string) {
	t.Helper()
	reqs := h.agent.requests(id)
	if len(reqs) != 1 {
		t.Fatalf("%s: %d forwards, want 1", id, len(reqs))
	}
	wantHeader(t, reqs[0], forward.HeaderDelivery, "2")
	if q := h.item(t, id); q.Status != ledger.DeliveryDelivered {
		t.Fatalf("%s: %s, want delivered", id, q.Status)
	}
}

// gate returns a channel for a test's agent to wait on and the function
// that opens it; it is opened at cleanup too, so a test that fails first
// does not leave the agent hanging its shutdown.
func gate(t *testing.T) (<-chan struct{}, func()) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	return release, open
}
