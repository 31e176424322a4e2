package dispatch_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/storetest/backends"
)

// Source health is read from the store, on every store: failing with the
// plain-words error and the waiting events while the agent refuses, paused
// when paused, healthy again once any process sees the agent answer; dead
// events are counted from the store, so a replay brings them to 0.
func TestSourceHealthFromTheStore(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, _ := b.Open(t)
			h := newHarnessOn(t, queuedSource(), nil, store)
			ctx := context.Background()
			var down atomic.Bool
			down.Store(true)
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				if down.Load() {
					w.WriteHeader(http.StatusForbidden)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			read := func() dispatch.SourceHealth {
				t.Helper()
				hs, err := dispatch.ReadHealth(ctx, h.ledger, []*dispatch.Source{h.source.Queued()}, h.clock.Now())
				if err != nil || len(hs) != 1 {
					t.Fatalf("ReadHealth: %v %v", hs, err)
				}
				return hs[0]
			}
			if got := read(); got.Health != dispatch.Healthy || got.Waiting != 0 || got.Dead != 0 {
				t.Fatalf("before any event: %+v", got)
			}
			for _, id := range []string{"h-1", "h-2", "h-3"} {
				h.post(t, id)
			}
			settle(t, h.d)
			h.clock.Advance(time.Minute)
			got := read()
			const plain = "the agent refused the gateway's credentials (403 Forbidden): check forward.signing_secret and forward.headers"
			if got.Health != dispatch.Failing || got.LastError != plain || got.Failures < 1 || got.Waiting != 3 ||
				got.OldestWaiting < time.Minute || got.Mode != "queued" || !strings.HasPrefix(got.URL, h.agent.URL) {
				t.Fatalf("agent refusing: %+v", got)
			}
			// The sweep writes what was not saved yet: every failure counts.
			h.sweep(t) // retries are due (5s): three more failures
			waitForHealth(t, func() bool {
				h.sweep(t) // nothing is due: the sweep only saves what was not saved
				return read().Failures == 6
			})

			reg := prometheus.NewRegistry()
			reg.MustRegister(dispatch.NewHealthCollector(func(ctx context.Context) ([]dispatch.SourceHealth, error) {
				return dispatch.ReadHealth(ctx, h.ledger, []*dispatch.Source{h.source.Queued()}, h.clock.Now())
			}, nil))
			if v := metricValue(t, reg, "replyonce_source_health", "source", "github", "health", "failing"); v != 1 {
				t.Fatalf("replyonce_source_health{health=failing} = %v, want 1", v)
			}
			if v := metricValue(t, reg, "replyonce_source_waiting_events", "source", "github"); v != 3 {
				t.Fatalf("replyonce_source_waiting_events = %v, want 3", v)
			}

			if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
				t.Fatal(err)
			}
			if got := read(); got.Health != dispatch.Paused || got.Waiting != 3 {
				t.Fatalf("paused: %+v", got)
			}
			if err := h.ledger.Sources().SetSourcePaused(ctx, "github", false); err != nil {
				t.Fatal(err)
			}

			// Another process, which never saw a failure, sees the agent
			// answer: the incident ends for everyone.
			down.Store(false)
			other := h.newDispatcher(t, forward.New(forward.NewClient(forward.ClientOptions{}), h.clock.Now), nil)
			h.clock.Advance(10 * time.Minute)
			if _, err := other.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			settle(t, other)
			if got := read(); got.Health != dispatch.Healthy || got.Waiting != 0 || got.Failures != 0 {
				t.Fatalf("after the agent answered: %+v", got)
			}
		})
	}
}

// Dead events are counted from the store: a replay brings the count to 0.
func TestSourceHealthCountsDeadFromTheStore(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Forward.Queue.Retry.Backoff.Schedule = []time.Duration{0}
	}))
	ctx := context.Background()
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadGateway) })
	h.post(t, "d-1")
	settle(t, h.d)
	hs, err := dispatch.ReadHealth(ctx, h.ledger, []*dispatch.Source{h.source.Queued()}, h.clock.Now())
	if err != nil || hs[0].Dead != 1 || hs[0].Waiting != 0 {
		t.Fatalf("after a dead letter: %+v %v", hs, err)
	}
	q := h.item(t, "d-1")
	if _, err := h.ledger.Queue().ReplayDelivery(ctx, q.Scope, q.EntryID); err != nil {
		t.Fatal(err)
	}
	hs, err = dispatch.ReadHealth(ctx, h.ledger, []*dispatch.Source{h.source.Queued()}, h.clock.Now())
	if err != nil || hs[0].Dead != 0 || hs[0].Waiting != 1 {
		t.Fatalf("after the replay: %+v %v", hs, err)
	}
}

func waitForHealth(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, "source health", cond)
}

// The dead count is read from the store, not kept by a process: a gateway
// restarted on the same store (bolt reopened from its file; on Postgres
// and Redis a new handle, another process's) reports the same dead
// events, and a replay made after the restart brings the count down.
func TestSourceHealthDeadCountSurvivesARestart(t *testing.T) {
	type restartable struct {
		name string
		// open returns the store the first process uses, and a function
		// that stops using it and opens the one the restarted process uses.
		open func(t *testing.T, h **harness) (ledger.Store, func() ledger.Store)
	}
	cases := []restartable{{name: "bolt", open: func(t *testing.T, h **harness) (ledger.Store, func() ledger.Store) {
		path := filepath.Join(t.TempDir(), "ledger.db")
		first, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return first, func() ledger.Store {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := (*h).d.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := bolt.Open(path, bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = again.Close() })
			return again
		}
	}}}
	for _, b := range backends.All(t) {
		if b.Name == "postgres" || b.Name == "redis" {
			cases = append(cases, restartable{name: b.Name, open: func(t *testing.T, _ **harness) (ledger.Store, func() ledger.Store) {
				return b.Open(t)
			}})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h *harness
			store, restart := c.open(t, &h)
			h = newHarnessOn(t, queuedSource(func(c *ingress.SourceConfig) {
				c.Forward.Queue.Retry.Backoff.Schedule = []time.Duration{0} // the first failure is dead
			}), nil, store)
			ctx := context.Background()
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadGateway) })
			for _, id := range []string{"r-1", "r-2"} {
				h.post(t, id)
				settle(t, h.d)
			}
			sources := []*dispatch.Source{h.source.Queued()}
			hs, err := dispatch.ReadHealth(ctx, h.ledger, sources, h.clock.Now())
			if err != nil || hs[0].Dead != 2 {
				t.Fatalf("before the restart: %+v %v, want 2 dead", hs, err)
			}
			q := h.item(t, "r-1")
			l := ledger.New(restart(), ledger.Options{Clock: h.clock.Now}) // the restarted process
			hs, err = dispatch.ReadHealth(ctx, l, sources, h.clock.Now())
			if err != nil || hs[0].Dead != 2 || hs[0].Health != dispatch.Failing {
				t.Fatalf("after the restart: %+v %v, want 2 dead and still failing", hs, err)
			}
			if _, err := l.Queue().ReplayDelivery(ctx, q.Scope, q.EntryID); err != nil {
				t.Fatal(err)
			}
			hs, err = dispatch.ReadHealth(ctx, l, sources, h.clock.Now())
			if err != nil || hs[0].Dead != 1 || hs[0].Waiting != 1 {
				t.Fatalf("after a replay on the restarted process: %+v %v, want 1 dead and 1 waiting", hs, err)
			}
		})
	}
}
