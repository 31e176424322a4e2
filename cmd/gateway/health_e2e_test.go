package main

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// restartableAgent counts forwards per event id; it listens only once
// started, so until then the gateway finds nothing listening.
type restartableAgent struct {
	addr string
	mu   sync.Mutex
	byID map[string]int
}

func newRestartableAgent(t *testing.T) *restartableAgent {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &restartableAgent{addr: ln.Addr().String(), byID: map[string]int{}}
	_ = ln.Close() // stopped: connections are refused
	return a
}

func (a *restartableAgent) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.byID[r.Header.Get("Replyonce-Event-Id")]++
		a.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
}

func (a *restartableAgent) counts() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.byID))
	for k, v := range a.byID {
		out[k] = v
	}
	return out
}

// An agent that is down is visible within seconds, on every store: a warn
// line with the reason in plain words, the source failing on the admin API
// and in `gateway sources list`; once it is back, one recovery line and
// every waiting event delivered once.
func TestSourceHealthEndToEnd(t *testing.T) {
	for name, store := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			agent := newRestartableAgent(t)
			receiver := newSlackReceiver(t)
			alerted := receiver.count
			// The alerts: section rides after the store's line.
			store += "\nalerts: {console_url: 'http://console.example/console', targets: [{slack: '" + receiver.srv.URL + "/services/x'}]}"
			g := startGateway(t, writeConfig(t, store,
				"      mode: queued\n      retry: {schedule: [0s, 1s, 2s, 2s, 2s, 2s, 2s, 2s, 2s, 2s, 2s, 2s, 2s, 2s, 2s, 2s]}\n", "http://"+agent.addr))
			client := newClient(t)
			var ids []string
			for i := range 30 {
				id := "evt_health_" + name + "_" + string(rune('a'+i/26)) + string(rune('a'+i%26))
				ids = append(ids, id)
				body, header := stripeEvent(t, id, nil)
				if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
					t.Fatalf("accept %s: %d %v", id, r.status, r.body)
				}
			}
			plain := "nothing is listening at http://" + agent.addr + "/events (connection refused): check that the agent is running and forward.url"
			start := time.Now()
			waitFor(t, "a warn line naming the reason", func() bool {
				return strings.Contains(g.stderr.String(), `"level":"warn"`) && strings.Contains(g.stderr.String(), "the agent is failing") &&
					strings.Contains(g.stderr.String(), plain)
			})
			var hs ledgerapi.SourcesHealthJSON
			waitFor(t, "the source failing on the admin API", func() bool {
				if err := json.Unmarshal([]byte(runCLI(t, g, "sources", "list", "--json")), &hs); err != nil {
					t.Fatal(err)
				}
				return len(hs.Sources) == 1 && hs.Sources[0].Health == "failing" && hs.Sources[0].Waiting == 30
			})
			if waited := time.Since(start); waited > 10*time.Second {
				t.Errorf("failing was seen after %s, want within 10s", waited)
			}
			waitFor(t, "one Slack-format failing alert", func() bool { return alerted("Source stripe is failing") == 1 })
			s := hs.Sources[0]
			if s.LastError != plain || s.ConsecutiveFailures < 1 || s.Since == "" || s.Mode != "queued" || s.Dead != 0 {
				t.Fatalf("source health %+v", s)
			}
			out := runCLI(t, g, "sources", "list")
			if !strings.Contains(out, "failing") || !strings.Contains(out, plain) || !strings.Contains(out, "queued") {
				t.Fatalf("sources list:\n%s", out)
			}

			agent.start(t)
			waitFor(t, "every waiting event delivered", func() bool { return len(agent.counts()) == len(ids) })
			for _, id := range ids {
				if n := agent.counts()[id]; n != 1 {
					t.Errorf("%s forwarded %d times once the agent was back, want 1", id, n)
				}
			}
			waitFor(t, "the source healthy again", func() bool {
				if err := json.Unmarshal([]byte(runCLI(t, g, "sources", "list", "--json")), &hs); err != nil {
					t.Fatal(err)
				}
				return hs.Sources[0].Health == "healthy" && hs.Sources[0].Waiting == 0
			})
			waitFor(t, "the recovery line", func() bool { return strings.Contains(g.stderr.String(), "agent answering again after") })
			if n := strings.Count(g.stderr.String(), "agent answering again after"); n != 1 {
				t.Fatalf("%d recovery lines, want 1:\n%s", n, g.stderr.String())
			}
			waitFor(t, "one recovery alert", func() bool { return alerted("Source stripe recovered") == 1 })
			if n := alerted("Source stripe is failing"); n != 1 {
				t.Fatalf("%d failing alerts, want 1", n)
			}
		})
	}
}

// The dead count that source health and the overview show is read from
// the store: with the real binary on a bolt file, two dead letters are
// still counted after the gateway restarts, and `events replay --status
// dead` with the agent back brings the count to 0, each event delivered
// once.
func TestDeadCountSurvivesARestart(t *testing.T) {
	agent := newRestartableAgent(t)
	dbPath := filepath.Join(t.TempDir(), "ledger.db")
	cfg := writeConfig(t, "{kind: bolt, path: '"+filepath.ToSlash(dbPath)+"'}", "      mode: queued\n      retry: {schedule: [0s]}\n", "http://"+agent.addr)
	dead := func(g *gateway) int {
		var hs ledgerapi.SourcesHealthJSON
		if err := json.Unmarshal([]byte(runCLI(t, g, "sources", "list", "--json")), &hs); err != nil {
			t.Fatal(err)
		}
		return hs.Sources[0].Dead
	}
	g := startGateway(t, cfg)
	client := newClient(t)
	for _, id := range []string{"evt_dead_restart_1", "evt_dead_restart_2"} {
		body, header := stripeEvent(t, id, nil)
		if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
			t.Fatalf("accept %s: %d %v", id, r.status, r.body)
		}
	}
	waitFor(t, "two dead letters", func() bool { return dead(g) == 2 })
	g.stop(t)

	g = startGateway(t, cfg)
	if n := dead(g); n != 2 {
		t.Fatalf("dead count after a restart = %d, want 2", n)
	}
	agent.start(t)
	if out := runCLI(t, g, "events", "replay", "--status", "dead"); !strings.Contains(out, "2 event(s) due again") {
		t.Fatalf("events replay --status dead:\n%s", out)
	}
	waitFor(t, "the dead count at 0", func() bool { return dead(g) == 0 })
	waitFor(t, "both delivered", func() bool { return len(agent.counts()) == 2 })
	for id, n := range agent.counts() {
		if n != 1 {
			t.Errorf("%s delivered %d times, want 1", id, n)
		}
	}
}
