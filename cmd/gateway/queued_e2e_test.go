package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/redis"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The queued-delivery end-to-end tests run real `gateway serve` processes
// (this test binary, re-executed) so that one can be killed with SIGKILL
// the instant after it answered, as a crash or an OOM kill would.

const childConfigEnv = "REPLYONCE_GATEWAY_CHILD_CONFIG"

// TestHelperGatewayProcess is the child: `gateway serve` on the given
// config, printing its public address.
func TestHelperGatewayProcess(t *testing.T) {
	path := os.Getenv(childConfigEnv)
	if path == "" {
		t.Skip("child of the queued-delivery process tests; runs only when they start it")
	}
	app := &App{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: env(nil), Clock: time.Now,
		Ready: func(public, _ string) { fmt.Printf("LISTEN %s\n", public) }}
	// SIGTERM ends serve as it does in main.
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, 5*time.Minute)
	defer cancel()
	if err := app.Run(ctx, []string{"serve", "--config", path}); err != nil {
		t.Fatal(err)
	}
}

type childGateway struct {
	cmd    *exec.Cmd
	public string
	done   chan struct{}
}

func startChild(t *testing.T, config string) *childGateway {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGatewayProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childConfigEnv+"="+config)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil // the child's JSON log is noise here
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childGateway{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
				addr <- a
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	select {
	case c.public = <-addr:
	case <-c.done:
		t.Fatal("child gateway exited before listening")
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("child gateway did not start")
	}
	t.Cleanup(func() { c.kill() })
	return c
}

func (c *childGateway) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (c *childGateway) hook() string { return "http://" + c.public + "/hooks/stripe" }

// effectAgent is the agent: it counts forwards per event and, when it has
// a ledger, makes one fenced effect per forward through it, as the
// example agent replies, counting the effects that ran. It also counts the
// forwards of an event that came after it had answered an earlier one with
// 2xx promptly (well inside forward.timeout): those the gateway had no
// reason to send.
type effectAgent struct {
	srv      *httptest.Server
	ledger   *ledger.Ledger
	mu       sync.Mutex
	forwards map[string]int
	effects  map[string]int
	// answered marks events answered 2xx within promptAnswer;
	// afterAnswered counts forwards that came after such an answer.
	answered      map[string]bool
	afterAnswered map[string]int
	scopes        map[string]string // the scope each event came in
}

// promptAnswer is an answer the gateway (forward.timeout 2s in the test
// config) cannot have missed: a later forward of the same event is then a
// duplicate, not a retry of a timed-out attempt.
const promptAnswer = 500 * time.Millisecond

func newEffectAgent(t *testing.T, l *ledger.Ledger) *effectAgent {
	a := &effectAgent{ledger: l, forwards: map[string]int{}, effects: map[string]int{},
		answered: map[string]bool{}, afterAnswered: map[string]int{}, scopes: map[string]string{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("Replyonce-Event-Id")
		a.mu.Lock()
		a.forwards[id]++
		a.scopes[id] = r.Header.Get("Replyonce-Scope")
		if a.answered[id] {
			a.afterAnswered[id]++
		}
		a.mu.Unlock()
		if a.ledger != nil {
			token, _ := strconv.ParseUint(r.Header.Get("Replyonce-Fencing-Token"), 10, 64)
			run := a.ledger.RunRef(r.Header.Get("Replyonce-Scope"), r.Header.Get("Replyonce-Run-Id"), token)
			_, err := run.Once(r.Context(), "reply", map[string]string{"event": id}, func(context.Context, ledger.Call) (any, error) {
				a.mu.Lock()
				a.effects[id]++
				a.mu.Unlock()
				return nil, nil
			}, ledger.OnceOptions{Conflict: ledger.ConflictNone})
			if err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		if time.Since(start) < promptAnswer && r.Context().Err() == nil {
			a.mu.Lock()
			a.answered[id] = true
			a.mu.Unlock()
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// forwardedAfterAnswer is how many forwards of id came after the agent had
// promptly answered one of them with 2xx.
func (a *effectAgent) forwardedAfterAnswer(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.afterAnswered[id]
}

// takenAfterDelivered reads the gateway's attempt records of id and
// reports the one that shows a defect: an attempt the gateway recorded
// delivered in time (not late: no other delivery had taken over) followed
// by another attempt. A forward the agent answered promptly may still be
// sent again when, on a loaded machine, the answer reached the gateway
// after forward.timeout, or the claim ran out before the gateway recorded
// it: the records then show that attempt failed or late, and the retry is
// the at-least-once delivery the queue promises.
func (a *effectAgent) takenAfterDelivered(t *testing.T, id string) string {
	t.Helper()
	a.mu.Lock()
	scope := a.scopes[id]
	a.mu.Unlock()
	ctx := context.Background()
	q, err := a.ledger.Queue().FindDelivery(ctx, scope, "stripe", id)
	if err != nil {
		t.Fatalf("%s: find its delivery in %s: %v", id, scope, err)
	}
	records, err := a.ledger.Queue().AttemptsOf(ctx, q)
	if err != nil {
		t.Fatalf("%s: its attempts: %v", id, err)
	}
	var lines []string
	defect := false
	for _, r := range records {
		if r.To != "" {
			continue // a trial, not a delivery
		}
		lines = append(lines, fmt.Sprintf("attempt %d %s (late %v, agent %d) %s", r.N, r.Outcome, r.Late, r.AgentStatus, r.Error))
		// Attempts counts every take: one after r means the queue gave
		// out an event it had recorded delivered.
		if r.Outcome == "delivered" && !r.Late && q.Attempts > r.N {
			defect = true
		}
	}
	if defect {
		return fmt.Sprintf("%d attempts: %s", q.Attempts, strings.Join(lines, "; "))
	}
	return ""
}

func (a *effectAgent) counts(id string) (forwards, effects int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.forwards[id], a.effects[id]
}

// agentLedger is a ledger on the test's store for the agent's fenced
// effects; bolt's file is locked by the gateway, so there the agent only
// counts forwards.
// agentLedger is a ledger on the same store, table and key prefix as the
// gateway's store config, so the agent's fenced effects see its runs.
func agentLedger(t *testing.T, name, storeConfig string) *ledger.Ledger {
	ctx := context.Background()
	setting := func(key string) string {
		m := regexp.MustCompile(key + `: '?([^',}]+)'?`).FindStringSubmatch(storeConfig)
		if m == nil {
			return ""
		}
		return m[1]
	}
	switch name {
	case "postgres":
		pool, err := pgxpool.New(ctx, os.Getenv("REPLYONCE_TEST_POSTGRES"))
		if err != nil {
			t.Fatal(err)
		}
		s := postgres.New(pool, postgres.Options{Table: setting("table")})
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(); pool.Close() })
		return ledger.New(s, ledger.Options{})
	case "redis":
		s, err := redis.Open(ctx, os.Getenv("REPLYONCE_TEST_REDIS"), redis.Options{KeyPrefix: setting("prefix")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return ledger.New(s, ledger.Options{})
	case "redis-cluster":
		top, err := redis.Config{Cluster: clusterSeeds(t)}.Topology("")
		if err != nil {
			t.Fatal(err)
		}
		s, err := top.Open(ctx, redis.Options{KeyPrefix: setting("prefix")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return ledger.New(s, ledger.Options{})
	}
	return nil
}

// Acknowledged means stored: a gateway SIGKILLed right after answering
// 202 loses nothing. After a restart every acknowledged event reaches the
// agent, and every fenced agent effect happens once.
func TestQueuedSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills gateway processes")
	}
	stores := storeConfigs(t)
	delete(stores, "memory") // not durable by design
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			agent := newEffectAgent(t, agentLedger(t, name, store))
			cfg := writeConfig(t, store, "      mode: queued\n", agent.srv.URL)
			client := newClient(t)
			const events, killEvery = 200, 20
			prefix := fmt.Sprintf("evt_kill_%s_%d_", name, time.Now().UnixNano())
			child := startChild(t, cfg)
			var acked []string
			for i := range events {
				id := prefix + strconv.Itoa(i)
				body, header := stripeEvent(t, id, nil)
				req, _ := http.NewRequest(http.MethodPost, child.hook(), strings.NewReader(string(body)))
				req.Header = header
				resp, err := client.Do(req)
				if err == nil {
					if resp.StatusCode == http.StatusAccepted {
						acked = append(acked, id)
					}
					resp.Body.Close()
				}
				if i%killEvery == killEvery-1 {
					child.kill() // right after the answer, deliveries in flight or not
					client.CloseIdleConnections()
					child = startChild(t, cfg)
				}
			}
			if len(acked) < events*9/10 {
				t.Fatalf("only %d of %d events acknowledged", len(acked), events)
			}
			deadline := time.Now().Add(2 * time.Minute)
			for _, id := range acked {
				for {
					f, e := agent.counts(id)
					if f > 0 && (agent.ledger == nil || e > 0) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("acknowledged event %s never reached the agent (%d forwards, %d effects)", id, f, e)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			child.kill()
			again := 0
			for _, id := range acked {
				f, e := agent.counts(id)
				if f > 1 {
					again++
				}
				if agent.ledger != nil && e != 1 {
					t.Errorf("%s: the fenced effect ran %d times, want once", id, e)
				}
			}
			t.Logf("%s: %d events acknowledged, all delivered; %d forwarded again after a kill", name, len(acked), again)
		})
	}
}

// Three instances on one Postgres, Redis or Redis Cluster with 1,000
// queued events and 20 % duplicates sent to random instances: every
// unique event is forwarded, none again after the gateway recorded it
// delivered, and every fenced agent effect happens once. An attempt the
// agent answered slowly or with 503 (its own store call failing on a
// loaded machine), or whose prompt answer reached the gateway only after
// forward.timeout, is retried, as it should be; the test counts those and
// says how many.
func TestQueuedInstancesShareTheQueue(t *testing.T) {
	stores := sharedStoreConfigs(t)
	for _, name := range []string{"postgres", "redis", "redis-cluster"} {
		store, ok := stores[name]
		if !ok {
			t.Logf("%s: skipped, REPLYONCE_TEST_%s is not set", name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
			continue
		}
		t.Run(name, func(t *testing.T) {
			agent := newEffectAgent(t, agentLedger(t, name, store))
			cfg := writeConfig(t, store, "      mode: queued\n      concurrency: 8\n", agent.srv.URL)
			instances := []*gateway{startGateway(t, cfg), startGateway(t, cfg), startGateway(t, cfg)}
			client := newClient(t)
			const unique = 1000
			prefix := fmt.Sprintf("evt_three_%s_%d_", name, time.Now().UnixNano())
			var sends []string
			for i := range unique {
				sends = append(sends, prefix+strconv.Itoa(i))
				if i%5 == 0 {
					sends = append(sends, prefix+strconv.Itoa(i)) // 20 % duplicates
				}
			}
			rand.Shuffle(len(sends), func(i, j int) { sends[i], sends[j] = sends[j], sends[i] })
			var wg sync.WaitGroup
			work := make(chan string)
			for range 16 {
				wg.Go(func() {
					for id := range work {
						body, header := stripeEvent(t, id, nil)
						// A request that got no answer at all (the loaded
						// machine can starve a connection past the test
						// config's 500 ms header timeout) is retried, as a
						// provider retries: it was not acknowledged.
						var r reply
						for try := 0; try < 5; try++ {
							req, _ := http.NewRequest(http.MethodPost, instances[rand.IntN(len(instances))].hook("stripe"), strings.NewReader(string(body)))
							req.Header = header.Clone()
							resp, err := client.Do(req)
							if err != nil {
								continue
							}
							r = reply{status: resp.StatusCode}
							_ = json.NewDecoder(resp.Body).Decode(&r.body)
							resp.Body.Close()
							break
						}
						if !(r.status == http.StatusAccepted && r.body["status"] == "queued" ||
							r.status == http.StatusOK && r.body["status"] == "duplicate") {
							t.Errorf("%s: %d %v", id, r.status, r.body)
						}
					}
				})
			}
			for _, id := range sends {
				work <- id
			}
			close(work)
			wg.Wait()
			deadline := time.Now().Add(2 * time.Minute)
			for i := range unique {
				id := prefix + strconv.Itoa(i)
				for {
					if f, e := agent.counts(id); f > 0 && e > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s never reached the agent", id)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			retried := 0
			for i := range unique {
				id := prefix + strconv.Itoa(i)
				f, e := agent.counts(id)
				if e != 1 {
					t.Errorf("%s: effect ran %d times, want 1", id, e)
				}
				if again := agent.forwardedAfterAnswer(id); again > 0 {
					if defect := agent.takenAfterDelivered(t, id); defect != "" {
						t.Errorf("%s: forwarded %d times, %d of them after the agent had answered 2xx at once and the gateway had recorded it delivered: %s", id, f, again, defect)
					} else {
						t.Logf("%s: forwarded %d times, %d of them after a prompt 2xx that reached the gateway too late (its records say the attempt failed or ran out)", id, f, again)
					}
				}
				if f > 1 {
					retried++
				}
			}
			t.Logf("%s: %d unique events, each effect once; %d forwarded again after a slow or failed answer", name, unique, retried)
		})
	}
}

// SIGTERM under load on a queued source: deliveries in flight finish
// within the grace period, nothing is left half-done (no delivery is left
// held), and a restarted gateway delivers whatever was still waiting.
func TestQueuedShutdownUnderLoad(t *testing.T) {
	agent := newSink(t)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) { return 200, 300 * time.Millisecond })
	dbPath := filepath.Join(t.TempDir(), "ledger.db")
	cfg := writeConfig(t, "{kind: bolt, path: "+dbPath+"}", "      mode: queued\n      concurrency: 4\n", agent.srv.URL)
	g := startGateway(t, cfg)
	client := newClient(t)
	const n = 30
	var ids []string
	for i := range n {
		id := fmt.Sprintf("evt_term_%d", i)
		body, header := stripeEvent(t, id, nil)
		if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
			t.Fatalf("%s: %d %v", id, r.status, r.body)
		}
		ids = append(ids, id)
	}
	g.stop(t) // what SIGTERM does
	s, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.New(s, ledger.Options{})
	waiting := 0
	for _, id := range ids {
		items, err := l.Queue().QueueItems(context.Background(), "stripe:"+id)
		if err != nil || len(items) != 1 {
			t.Fatalf("%s: %+v %v", id, items, err)
		}
		switch items[0].Status {
		case ledger.DeliveryDelivered:
		case ledger.DeliveryQueued:
			waiting++
		default:
			t.Errorf("%s left %s after shutdown", id, items[0].Status)
		}
	}
	_ = s.Close()
	startGateway(t, cfg)
	waitFor(t, "every event delivered after the restart", func() bool {
		seen := map[string]bool{}
		for i := range agent.count() {
			seen[agent.request(i).Header.Get("Replyonce-Event-Id")] = true
		}
		return len(seen) == n
	})
	t.Logf("%d of %d events were still waiting at shutdown", waiting, n)
}
