package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/storetest"
)

// Conversation-aware delivery through the real gateway (`gateway serve`,
// in process or as a child process) on every store: debounce, newest
// wins, per-scope order, several instances, a crash in a quiet window.

// convAgent is the agent of these tests. It records every forward, the
// 2xx answers per scope in order, and how many deliveries of one scope it
// held at once; with a ledger it makes one fenced reply per forward, as
// the example agent does, and counts the replies that ran.
type convAgent struct {
	srv *httptest.Server
	api atomic.Pointer[ledgerapi.Ledger]

	// gate, when set, holds every request until it is closed.
	gate atomic.Pointer[chan struct{}]
	// fail says whether to answer this request 503.
	fail func(scope, eventID string) bool
	// delay is how long each request takes.
	delay time.Duration

	mu          sync.Mutex
	forwards    []http.Header
	replies     []string            // event ids whose fenced reply ran
	delivered   map[string][]string // scope → event ids answered 2xx, in order
	inFlight    map[string]int
	maxPerScope int
	inAll       int
	maxAll      int
}

func newConvAgent(t *testing.T) *convAgent {
	a := &convAgent{delivered: map[string][]string{}, inFlight: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *convAgent) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	scope, id := r.Header.Get(forward.HeaderScope), r.Header.Get(forward.HeaderEventID)
	a.mu.Lock()
	a.forwards = append(a.forwards, r.Header.Clone())
	a.inFlight[scope]++
	a.inAll++
	a.maxPerScope = max(a.maxPerScope, a.inFlight[scope])
	a.maxAll = max(a.maxAll, a.inAll)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.inFlight[scope]--
		a.inAll--
		a.mu.Unlock()
	}()
	if g := a.gate.Load(); g != nil {
		<-*g
	}
	if a.delay > 0 {
		time.Sleep(a.delay)
	}
	if a.fail != nil && a.fail(scope, id) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if api := a.api.Load(); api != nil {
		token, _ := strconv.ParseUint(r.Header.Get(forward.HeaderFencingToken), 10, 64)
		run := (*api).RunRef(scope, r.Header.Get(forward.HeaderRunID), token)
		covers := r.Header.Get(forward.HeaderCovers)
		if covers == "" {
			covers = "1; ids=" + id
		}
		res, err := run.Once(r.Context(), "reply", map[string]string{"answers": covers}, func(context.Context, ledger.Call) (any, error) {
			a.mu.Lock()
			a.replies = append(a.replies, id)
			a.mu.Unlock()
			return nil, nil
		}, ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})
		if err != nil || (!res.OK() && res.Reason != ledger.ReasonSuperseded) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	a.mu.Lock()
	a.delivered[scope] = append(a.delivered[scope], id)
	a.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// useAdmin makes the agent's fenced replies through g's ledger API.
func (a *convAgent) useAdmin(t *testing.T, g *gateway) {
	c, err := ledgerapi.NewClient("http://"+g.admin, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := ledgerapi.Remote(c)
	a.api.Store(&l)
}

func (a *convAgent) forwarded() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, h := range a.forwards {
		out = append(out, h.Get(forward.HeaderEventID))
	}
	return out
}

func (a *convAgent) replied() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.replies)
}

func customer(conv string) map[string]any {
	return map[string]any{"data": map[string]any{"object": map[string]any{"customer": conv}}}
}

// metric reads one sample from g's /metrics.
func metric(t *testing.T, g *gateway, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

const convScope = "    scope: '{json:data.object.customer}'\n"

// A burst of 5 messages on one conversation within 1 s, debounce on: one
// forward, standing for all 5 (Replyonce-Covers), and one agent reply.
// Simulated time; every store.
func TestDebounceBurstOneForward(t *testing.T) {
	for name, store := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			clock := storetest.NewClock(time.Now())
			agent := newConvAgent(t)
			cfg := writeConfig(t, store, "      mode: queued\n      debounce: {quiet: 2s, max_wait: 10s}\n"+convScope, agent.srv.URL)
			g := startGatewayClock(t, cfg, clock.Now)
			agent.useAdmin(t, g)
			client := newClient(t)
			var ids []string
			for i := range 5 {
				id := fmt.Sprintf("evt_burst_%s_%d", name, i)
				ids = append(ids, id)
				body, header := stripeEventAt(t, id, customer("cus_burst"), clock.Now())
				if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
					t.Fatalf("%s: %d %v", id, r.status, r.body)
				}
				clock.Advance(200 * time.Millisecond) // 5 messages in 1 s
			}
			// The scope has been quiet for 0.2 s of the 2 s: nothing goes out,
			// however many sweeps run (they run every second of real time).
			time.Sleep(1500 * time.Millisecond)
			if f := agent.forwarded(); len(f) != 0 {
				t.Fatalf("forwarded during the quiet window: %v", f)
			}
			clock.Advance(2 * time.Second)
			waitFor(t, "the covering forward and its reply", func() bool { return len(agent.replied()) == 1 })
			time.Sleep(1500 * time.Millisecond) // more sweeps: nothing else may go out
			f := agent.forwarded()
			if len(f) != 1 || f[0] != ids[4] {
				t.Fatalf("forwards: %v, want one, of the newest event %s", f, ids[4])
			}
			n, covered, err := forward.ParseCovers(agent.forwards[0].Get(forward.HeaderCovers))
			if err != nil || n != 5 || !slices.Equal(covered, ids) {
				t.Fatalf("Replyonce-Covers: %d %v %v, want 5 %v", n, covered, err, ids)
			}
			if r := agent.replied(); len(r) != 1 {
				t.Fatalf("agent replies: %v, want one for the burst", r)
			}
			// The ledger history says the same, visible to operators.
			var d ledgerapi.DeliveryJSON
			if err := json.Unmarshal([]byte(runCLI(t, g, "events", "show", "stripe", ids[1], "--scope", "cus_burst", "--json")), &d); err != nil {
				t.Fatal(err)
			}
			if d.Delivery.Status != "coalesced" || d.Delivery.CoveredBy != ids[4] {
				t.Fatalf("events show of a covered event: %+v", d.Delivery)
			}
			if got := metric(t, g, `replyonce_events_coalesced_total{source="stripe"}`); got != 4 {
				t.Fatalf("coalesced metric: %v, want 4", got)
			}
			// Per-scope depth, one observation per event: the burst never
			// stacked up (each event folded the held one into itself).
			if n, sum := metric(t, g, `replyonce_scope_queue_depth_count{source="stripe"}`), metric(t, g, `replyonce_scope_queue_depth_sum{source="stripe"}`); n != 5 || sum != 5 {
				t.Fatalf("scope depth histogram: %v observations summing to %v, want 5 and 5", n, sum)
			}
		})
	}
}

// Debounce off, runs: supersede: a burst arriving while the agent works on
// the first message costs one agent reply per conversation turn. The
// events the newest one superseded before delivery are never forwarded.
// Simulated time; every store.
func TestSupersedeOneReplyPerTurn(t *testing.T) {
	for name, store := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			clock := storetest.NewClock(time.Now())
			agent := newConvAgent(t)
			gate := make(chan struct{})
			agent.gate.Store(&gate)
			t.Cleanup(func() { // a failed test must not leave the agent's requests hanging
				select {
				case <-gate:
				default:
					close(gate)
				}
			})
			cfg := writeConfig(t, store, "      mode: queued\n      concurrency: 1\n    runs: supersede\n"+convScope, agent.srv.URL)
			g := startGatewayClock(t, cfg, clock.Now)
			agent.useAdmin(t, g)
			client := newClient(t)
			send := func(id string) {
				t.Helper()
				body, header := stripeEventAt(t, id, customer("cus_turns"), clock.Now())
				if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
					t.Fatalf("%s: %d %v", id, r.status, r.body)
				}
				clock.Advance(200 * time.Millisecond)
			}
			id := func(i int) string { return fmt.Sprintf("evt_turn_%s_%d", name, i) }
			// Turn 1: the first message reaches the agent, which is slow;
			// four more arrive meanwhile.
			send(id(1))
			waitFor(t, "the first message at the agent", func() bool { return len(agent.forwarded()) == 1 })
			for i := 2; i <= 5; i++ {
				send(id(i))
			}
			var d ledgerapi.DeliveryJSON
			if err := json.Unmarshal([]byte(runCLI(t, g, "events", "show", "stripe", id(3), "--scope", "cus_turns", "--json")), &d); err != nil {
				t.Fatal(err)
			}
			if d.Delivery.Status != "superseded" || d.Delivery.SupersededBy != "stripe:"+id(4) {
				t.Fatalf("events show of a superseded event: %+v", d.Delivery)
			}
			agent.gate.Store(nil)
			close(gate)
			waitFor(t, "turn 1 answered", func() bool { return len(agent.replied()) == 1 && len(agent.forwarded()) == 2 })
			time.Sleep(1500 * time.Millisecond)
			if f, r := agent.forwarded(), agent.replied(); !slices.Equal(f, []string{id(1), id(5)}) || !slices.Equal(r, []string{id(5)}) {
				t.Fatalf("turn 1: forwards %v replies %v; want %s and %s forwarded, one reply by %s", f, r, id(1), id(5), id(5))
			}
			// Turn 2: a message after the answer is a turn of its own.
			clock.Advance(5 * time.Second)
			send(id(6))
			waitFor(t, "turn 2 answered", func() bool { return len(agent.replied()) == 2 })
			if r := agent.replied(); !slices.Equal(r, []string{id(5), id(6)}) {
				t.Fatalf("replies after two turns: %v", r)
			}
			if got := metric(t, g, `replyonce_events_superseded_total{source="stripe"}`); got != 3 {
				t.Fatalf("superseded metric: %v, want 3", got)
			}
			// Depths at accept: 1 (m1), 2 (m1 in flight, m2 waiting), then 2
			// each time (the newest replaced the waiting one), 1 (m6).
			if got := metric(t, g, `replyonce_scope_queue_depth_sum{source="stripe"}`); got != 10 {
				t.Fatalf("scope depth sum: %v, want 1+2+2+2+2+1", got)
			}
		})
	}
}

// orderedConfig is a queued source with order: scope, contextAt from the
// event's created time, and a retry schedule long enough that nothing
// goes to dead letter under the test's random failures.
func orderedConfig(retry time.Duration, n, concurrency int) string {
	var sched []string
	for i := range n {
		if i == 0 {
			sched = append(sched, "0s")
			continue
		}
		sched = append(sched, retry.String())
	}
	return "      mode: queued\n      order: scope\n      concurrency: " + strconv.Itoa(concurrency) + "\n      retry: {schedule: [" + strings.Join(sched, ", ") + "]}\n" +
		convScope + "    context_at: '{json:created}'\n"
}

// sendConversations posts each conversation's events in order (event k
// created at base+k s), the conversations in parallel, each post to one
// of the targets at random, and reports whether every one was accepted.
func sendConversations(t *testing.T, targets []string, convs, events int, prefix string, at func() time.Time) {
	t.Helper()
	base := time.Now().Add(-time.Hour).Unix()
	client := newClient(t)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for c := range work {
				for k := range events {
					id := fmt.Sprintf("%s_c%03d_e%02d", prefix, c, k)
					extra := customer(fmt.Sprintf("%s_c%03d", prefix, c))
					extra["created"] = base + int64(k)
					body, header := stripeEventAt(t, id, extra, at())
					// A request that got no answer (a pooled connection the
					// server closed) is sent again, as a provider would: a
					// duplicate answer then means the first copy was kept.
					var r reply
					for try := 0; try < 5 && r.status == 0; try++ {
						req, _ := http.NewRequest(http.MethodPost, targets[rand.IntN(len(targets))], bytes.NewReader(body))
						req.Header = header.Clone()
						resp, err := client.Do(req)
						if err != nil {
							continue
						}
						r.status = resp.StatusCode
						_ = json.NewDecoder(resp.Body).Decode(&r.body)
						resp.Body.Close()
					}
					if !(r.status == http.StatusAccepted || r.status == http.StatusOK && r.body["status"] == "duplicate") {
						t.Errorf("%s: %d %v", id, r.status, r.body)
					}
				}
			}
		})
	}
	for c := range convs {
		work <- c
	}
	close(work)
	wg.Wait()
}

// waitLong is waitFor for the runs of a thousand events on a loaded
// machine: the last retries of a run wait for the dispatchers' poll.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOrder says every conversation was delivered whole and in order.
func (a *convAgent) checkOrder(t *testing.T, prefix string, convs, events int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range convs {
		scope := fmt.Sprintf("%s_c%03d", prefix, c)
		var want []string
		for k := range events {
			want = append(want, fmt.Sprintf("%s_e%02d", scope, k))
		}
		if got := a.delivered[scope]; !slices.Equal(got, want) {
			t.Errorf("%s delivered %v, want %v", scope, got, want)
		}
	}
	if a.maxPerScope != 1 {
		t.Errorf("the agent held %d deliveries of one conversation at once, want 1", a.maxPerScope)
	}
}

func (a *convAgent) doneConversations(prefix string, events int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for scope, got := range a.delivered {
		if strings.HasPrefix(scope, prefix) && len(got) == events {
			n++
		}
	}
	return n
}

// 100 conversations × 10 events, random per-event agent failures: each
// conversation is delivered in order, one delivery at a time, and a
// conversation whose first event keeps failing holds back only itself.
// Simulated time (retries 1 s apart); every store.
func TestOrderedConversations(t *testing.T) {
	stores := storeConfigs(t)
	for _, name := range []string{"memory", "bolt", "postgres", "redis"} {
		if _, ok := stores[name]; !ok {
			t.Logf("%s: skipped, REPLYONCE_TEST_%s is not set", name, strings.ToUpper(name))
			continue
		}
		t.Run(name, func(t *testing.T) {
			const convs, events = 100, 10
			prefix := "cus_ord_" + name
			clock := storetest.NewClock(time.Now())
			agent := newConvAgent(t)
			agent.delay = 2 * time.Millisecond
			var stuck atomic.Bool
			stuck.Store(true)
			stuckID := prefix + "_c000_e00"
			var rmu sync.Mutex
			rng := rand.New(rand.NewPCG(14, 14))
			agent.fail = func(scope, id string) bool {
				if id == stuckID && stuck.Load() {
					return true
				}
				rmu.Lock()
				defer rmu.Unlock()
				return rng.Float64() < 0.25
			}
			cfg := writeConfig(t, stores[name], orderedConfig(time.Second, 400, 32), agent.srv.URL)
			g := startGatewayClock(t, cfg, clock.Now)
			// Simulated time runs 10× real time, so retries (1 s apart)
			// come every 100 ms of the test.
			stop := make(chan struct{})
			ticked := make(chan struct{})
			go func() {
				defer close(ticked)
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						clock.Advance(100 * time.Millisecond)
					}
				}
			}()
			defer func() { close(stop); <-ticked }()
			sendConversations(t, []string{g.hook("stripe")}, convs, events, prefix, clock.Now)
			waitLong(t, "every other conversation delivered", func() bool { return agent.doneConversations(prefix, events) == convs-1 })
			agent.mu.Lock()
			held := len(agent.delivered[prefix+"_c000"])
			agent.mu.Unlock()
			if held != 0 {
				t.Fatalf("the stuck conversation delivered %d events past its failing head", held)
			}
			stuck.Store(false)
			waitLong(t, "the stuck conversation delivered", func() bool { return agent.doneConversations(prefix, events) == convs })
			agent.checkOrder(t, prefix, convs, events)
			if agent.maxAll < 2 {
				t.Errorf("at most %d deliveries in flight at once: conversations did not go side by side", agent.maxAll)
			}
			t.Logf("%s: %d forwards for %d events; up to %d conversations in flight at once", name, len(agent.forwarded()), convs*events, agent.maxAll)
		})
	}
}

// Three instances on one Postgres or Redis keep per-scope order and one
// delivery in flight per scope, with events sent to random instances and
// random agent failures. Real time.
func TestOrderedInstancesShareTheQueue(t *testing.T) {
	stores := storeConfigs(t)
	for _, name := range []string{"postgres", "redis"} {
		store, ok := stores[name]
		if !ok {
			t.Logf("%s: skipped, REPLYONCE_TEST_%s is not set", name, strings.ToUpper(name))
			continue
		}
		t.Run(name, func(t *testing.T) {
			const convs, events = 30, 10
			prefix := fmt.Sprintf("cus_three_%s_%d", name, time.Now().UnixNano())
			agent := newConvAgent(t)
			agent.delay = 5 * time.Millisecond
			var rmu sync.Mutex
			rng := rand.New(rand.NewPCG(3, 14))
			agent.fail = func(string, string) bool {
				rmu.Lock()
				defer rmu.Unlock()
				return rng.Float64() < 0.2
			}
			cfg := writeConfig(t, store, orderedConfig(200*time.Millisecond, 60, 8), agent.srv.URL)
			instances := []*gateway{startGateway(t, cfg), startGateway(t, cfg), startGateway(t, cfg)}
			var targets []string
			for _, g := range instances {
				targets = append(targets, g.hook("stripe"))
			}
			sendConversations(t, targets, convs, events, prefix, time.Now)
			waitLong(t, "every conversation delivered", func() bool { return agent.doneConversations(prefix, events) == convs })
			agent.checkOrder(t, prefix, convs, events)
			t.Logf("%s: %d forwards for %d events; up to %d deliveries in flight at once", name, len(agent.forwarded()), convs*events, agent.maxAll)
		})
	}
}

// A gateway SIGKILLed while a burst is held in its debounce window: after
// the restart the covering delivery still happens, exactly once, and the
// fenced reply runs once.
func TestDebounceSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills gateway processes")
	}
	stores := storeConfigs(t)
	delete(stores, "memory") // not durable by design
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			agent := newConvAgent(t)
			if l := agentLedger(t, name, store); l != nil {
				in := ledgerapi.InProcess(l)
				agent.api.Store(&in)
			}
			cfg := writeConfig(t, store, "      mode: queued\n      debounce: {quiet: 2s, max_wait: 10s}\n"+convScope, agent.srv.URL)
			child := startChild(t, cfg)
			client := newClient(t)
			conv := fmt.Sprintf("cus_kill_%s_%d", name, time.Now().UnixNano())
			var ids []string
			for i := range 5 {
				id := fmt.Sprintf("%s_%d", conv, i)
				ids = append(ids, id)
				body, header := stripeEvent(t, id, customer(conv))
				req, _ := http.NewRequest(http.MethodPost, child.hook(), strings.NewReader(string(body)))
				req.Header = header
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("%s: %d", id, resp.StatusCode)
				}
			}
			child.kill() // inside the 2 s quiet window
			client.CloseIdleConnections()
			if f := agent.forwarded(); len(f) != 0 {
				t.Fatalf("forwarded before the quiet window ended: %v", f)
			}
			startChild(t, cfg)
			waitFor(t, "the covering delivery after the restart", func() bool { return len(agent.forwarded()) == 1 })
			time.Sleep(3 * time.Second) // past another quiet window and several sweeps
			f := agent.forwarded()
			if len(f) != 1 || f[0] != ids[4] {
				t.Fatalf("forwards after the restart: %v, want one of %s", f, ids[4])
			}
			if n, covered, err := forward.ParseCovers(agent.forwards[0].Get(forward.HeaderCovers)); err != nil || n != 5 || !slices.Equal(covered, ids) {
				t.Fatalf("Replyonce-Covers: %d %v %v", n, covered, err)
			}
			if agent.api.Load() != nil {
				if r := agent.replied(); len(r) != 1 {
					t.Fatalf("fenced replies: %v, want one", r)
				}
			}
		})
	}
}
