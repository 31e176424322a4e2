package dispatch_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest/backends"
)

// slackReceiver is a test Slack incoming webhook: it keeps the text of
// every message.
type slackReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	texts []string
}

func newSlackReceiver(t *testing.T) *slackReceiver {
	r := &slackReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var msg struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &msg); err != nil || msg.Text == "" {
			t.Errorf("not a Slack message: %s", b)
		}
		r.mu.Lock()
		r.texts = append(r.texts, msg.Text)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *slackReceiver) matching(part string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.texts {
		if strings.Contains(s, part) {
			out = append(out, s)
		}
	}
	return out
}

// withAlerts gives the harness's dispatchers a Notifier sending to the
// receiver and to a target that never answers, which must slow nothing.
// mods change its alerts: section.
func withAlerts(t *testing.T, slack *slackReceiver, mods ...func(*alerts.Config)) func(*harness) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server sees the client go only once the body is read
		<-r.Context().Done()
	}))
	t.Cleanup(hung.Close)
	return func(h *harness) {
		cfg := alerts.Config{Targets: []alerts.Target{{Slack: hung.URL}, {Slack: slack.URL}},
			ConsoleURL: "https://gw.example.com/console"}
		for _, m := range mods {
			m(&cfg)
		}
		n, err := alerts.New(alerts.Options{Ledger: h.ledger, Clock: h.clock.Now, Logger: h.logger,
			Backoff: func(int) time.Duration { return 10 * time.Millisecond }, GroupEvery: 10 * time.Millisecond,
			Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		h.alerts = n
	}
}

// A source whose agent fails raises one Slack-format failing alert after
// alerts.after_failures (3) attempts, with the plain-words error and a
// link to its console page, and one recovery alert when the agent answers
// again, on every store; a target that never answers slows no delivery.
func TestAlertsWhenASourceFailsAndRecovers(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, _ := b.Open(t)
			slack := newSlackReceiver(t)
			h := newHarnessOn(t, queuedSource(), nil, store, withAlerts(t, slack))
			var down atomic.Bool
			down.Store(true)
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				if down.Load() {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			h.post(t, "a-1")
			h.post(t, "a-2")
			settle(t, h.d)
			h.sweep(t) // two failures: no alert yet
			if got := slack.matching("is failing"); len(got) != 0 {
				t.Fatalf("alert after two failures: %q", got)
			}
			h.post(t, "a-3")
			settle(t, h.d)
			testkit.Eventually(t, "the failing alert", func() bool {
				h.sweep(t) // saves the failures not yet in the store
				return len(slack.matching("is failing")) >= 1
			})
			h.post(t, "a-4") // a fourth failure in the same incident
			settle(t, h.d)
			h.sweep(t)
			failing := slack.matching("is failing")
			if len(failing) != 1 || !strings.Contains(failing[0], "Source github is failing") ||
				!strings.Contains(failing[0], "the agent failed (502 Bad Gateway)") ||
				!strings.Contains(failing[0], "<https://gw.example.com/console/events?source=github|") {
				t.Fatalf("failing alerts %q, want one naming the source, the plain-words error and the console page", failing)
			}
			down.Store(false)
			h.post(t, "a-5") // answered: the incident ends
			settle(t, h.d)
			testkit.Eventually(t, "the recovery alert", func() bool { return len(slack.matching("recovered")) >= 1 })
			h.sweep(t)
			settle(t, h.d)
			h.alerts.Close() // every try ended: nothing more can arrive
			if n := len(slack.matching("recovered")); n != 1 {
				t.Fatalf("%d recovery alerts, want 1", n)
			}
			if n := len(slack.matching("is failing")); n != 1 {
				t.Fatalf("%d failing alerts, want 1", n)
			}
			for _, id := range []string{"a-1", "a-2", "a-3", "a-4", "a-5"} {
				if n := len(h.agent.requests(id)); n < 1 {
					t.Fatalf("%s never forwarded", id)
				}
			}
		})
	}
}

// forward.pause_after: the breaker that pauses a source raises one alert.
func TestPauseAfterRaisesOneAlert(t *testing.T) {
	slack := newSlackReceiver(t)
	h := newHarnessOn(t, queuedSource(func(c *ingress.SourceConfig) { c.Forward.Queue.PauseAfter = 5 }), nil,
		memory.New(nil), withAlerts(t, slack))
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusUnauthorized) })
	for _, id := range []string{"p-1", "p-2", "p-3", "p-4", "p-5"} {
		h.post(t, id)
		settle(t, h.d)
	}
	testkit.Eventually(t, "the pause alert", func() bool { return len(slack.matching("paused itself")) >= 1 })
	h.alerts.Close()
	got := slack.matching("paused itself")
	if len(got) != 1 || !strings.Contains(got[0], "refused 5 times in a row") || !strings.Contains(got[0], "gateway sources resume github") {
		t.Fatalf("pause alerts %q, want one", got)
	}
}

// Three dispatchers (three gateway processes, each with its own store
// handle and Notifier) that each see the same source failing raise one
// failing alert between them, on every store.
func TestThreeDispatchersSendOneAlertPerIncident(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, another := b.Open(t)
			slack := newSlackReceiver(t)
			h := newHarnessOn(t, queuedSource(), nil, store, withAlerts(t, slack))
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadGateway) })
			fwd := forward.New(forward.NewClient(forward.ClientOptions{}), h.clock.Now)
			var ds []*dispatch.Dispatcher
			var ns []*alerts.Notifier
			for range 2 {
				s := another()
				n, err := alerts.New(alerts.Options{Ledger: ledger.New(s, ledger.Options{Clock: h.clock.Now}), Clock: h.clock.Now,
					Backoff: func(int) time.Duration { return 10 * time.Millisecond },
					Config:  alerts.Config{Targets: []alerts.Target{{Slack: slack.URL}}}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(n.Close)
				h.alerts = n
				ds = append(ds, h.newDispatcherOnStore(t, s, fwd, nil))
				ns = append(ns, n)
			}
			ids := []string{"t-1", "t-2", "t-3"}
			for _, id := range ids {
				h.post(t, id) // first attempts on the harness's dispatcher
			}
			settle(t, h.d)
			testkit.Eventually(t, "the first dispatcher's failing alert", func() bool {
				h.sweep(t)
				return len(slack.matching("is failing")) >= 1
			})
			// Each other dispatcher takes the retries, fails, and raises the
			// same incident's alert.
			for _, d := range ds {
				h.clock.Advance(6 * time.Minute)
				testkit.Eventually(t, "another dispatcher's failed retries", func() bool {
					if _, err := d.Sweep(context.Background()); err != nil {
						t.Fatal(err)
					}
					settle(t, d)
					for _, id := range ids {
						if q := h.item(t, id); q.NextAt.Before(h.clock.Now()) {
							return false
						}
					}
					return true
				})
				h.clock.Advance(2 * time.Second) // the next save of this dispatcher's failures
				_, _ = d.Sweep(context.Background())
			}
			testkit.Eventually(t, "every attempt failed", func() bool {
				return len(h.agent.requests("t-1")) >= 3
			})
			h.alerts.Close()
			for _, n := range ns {
				n.Close()
			}
			if got := slack.matching("is failing"); len(got) != 1 {
				t.Fatalf("%d failing alerts from three dispatchers, want 1: %q", len(got), got)
			}
		})
	}
}

// Events that go to dead letter raise one alert per source and minute,
// sent once the minute is over, counted in the store: how many went in
// that minute and how many are dead now. On every store.
func TestDeadLettersRaiseOneAlertPerMinute(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, _ := b.Open(t)
			slack := newSlackReceiver(t)
			h := newHarnessOn(t, queuedSource(func(c *ingress.SourceConfig) {
				c.Forward.Queue.Retry.Backoff.Schedule = []time.Duration{0} // the first failure is dead
			}), nil, store, withAlerts(t, slack))
			alignClock(h, time.Minute, 5*time.Second)
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadGateway) })
			for _, id := range []string{"x-1", "x-2", "x-3"} {
				h.post(t, id)
				settle(t, h.d)
			}
			for _, id := range []string{"x-1", "x-2", "x-3"} {
				if q := h.item(t, id); q.Status != ledger.DeliveryDead {
					t.Fatalf("%s is %s, want dead", id, q.Status)
				}
			}
			h.clock.Advance(time.Minute)
			testkit.Eventually(t, "the dead-letter alert", func() bool { return len(slack.matching("dead letter")) >= 1 })
			h.alerts.Close()
			got := slack.matching("dead letter")
			if len(got) != 1 {
				t.Fatalf("%d dead-letter alerts, want 1: %q", len(got), got)
			}
			for _, want := range []string{"Source github: 3 events went to dead letter in the minute from", "(x-1, x-2, x-3)",
				"3 in dead letter now", "the agent failed (502 Bad Gateway)", "gateway events replay --status dead --source github"} {
				if !strings.Contains(got[0], want) {
					t.Fatalf("dead-letter alert %q lacks %q", got[0], want)
				}
			}
		})
	}
}

// alerts.after: a source failing that long raises the failing alert,
// however few of its attempts failed, read from the store at a sweep; and
// its recovery is told too.
func TestFailingAlertAfterADuration(t *testing.T) {
	slack := newSlackReceiver(t)
	h := newHarnessOn(t, queuedSource(), nil, memory.New(nil), withAlerts(t, slack, func(c *alerts.Config) {
		c.AfterFailures, c.After = 50, 2*time.Minute
	}))
	var down atomic.Bool
	down.Store(true)
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.post(t, "f-1")
	settle(t, h.d)
	h.clock.Advance(time.Minute)
	testkit.Eventually(t, "the failure recorded", func() bool {
		hs, err := dispatch.ReadHealth(context.Background(), h.ledger, []*dispatch.Source{h.source.Queued()}, h.clock.Now())
		return err == nil && hs[0].Health == dispatch.Failing
	})
	h.sweep(t)
	h.clock.Advance(59 * time.Second) // failing for 1m59s
	h.sweep(t)
	if got := slack.matching("is failing"); len(got) != 0 {
		t.Fatalf("failing alert before alerts.after: %q", got)
	}
	h.clock.Advance(time.Second)
	testkit.Eventually(t, "the failing alert after alerts.after", func() bool {
		h.sweep(t) // the sweep reads the store's health record once a second
		return len(slack.matching("is failing")) >= 1
	})
	// One or two attempts failed (the retry 5 s later may have run), far
	// from after_failures' 50.
	if got := slack.matching("is failing"); !strings.Contains(got[0], "Source github is failing: 1 attempt in a row") &&
		!strings.Contains(got[0], "Source github is failing: 2 attempts in a row") {
		t.Fatalf("failing alert: %q", got)
	}
	down.Store(false)
	h.clock.Advance(6 * time.Minute) // the retry is due
	h.sweep(t)
	testkit.Eventually(t, "the recovery alert", func() bool { return len(slack.matching("recovered")) >= 1 })
	h.alerts.Close()
	if n := len(slack.matching("is failing")); n != 1 {
		t.Fatalf("%d failing alerts, want 1", n)
	}
}

// Requests refused for their signature, alerts.verification_failures of
// them within a minute, raise one verification alert (a secret rotated
// on one side only); the events that verify are unaffected.
func TestVerificationFailuresRaiseAnAlert(t *testing.T) {
	slack := newSlackReceiver(t)
	h := newHarnessOn(t, queuedSource(), nil, memory.New(nil), withAlerts(t, slack, func(c *alerts.Config) { c.VerificationFailures = 5 }))
	alignClock(h, time.Hour, time.Second)
	forge := func() int {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/hooks/github", strings.NewReader(`{"action":"opened"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Github-Event", "issues")
		req.Header.Set("X-Github-Delivery", "forged")
		req.Header.Set("X-Hub-Signature-256", "sha256=00000000000000000000000000000000000000000000000000000000000000ff")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for range 4 {
		if s := forge(); s != http.StatusUnauthorized {
			t.Fatalf("forged request answered %d, want 401", s)
		}
	}
	if s, _ := h.post(t, "v-1"); s != http.StatusAccepted && s != http.StatusOK {
		t.Fatalf("a signed event answered %d", s)
	}
	forge()
	testkit.Eventually(t, "the verification alert", func() bool { return len(slack.matching("for their signature")) >= 1 })
	for range 10 { // more within the hour: no second alert
		forge()
	}
	h.alerts.Close()
	got := slack.matching("for their signature")
	if len(got) != 1 || !strings.Contains(got[0], "Source github refused 5 requests for their signature") ||
		!strings.Contains(got[0], "no_match: 5") {
		t.Fatalf("verification alerts %q, want one", got)
	}
}

// alignClock moves the harness's clock to offset past the start of the
// next unit (minute, hour), so that what a test does falls in one.
func alignClock(h *harness, unit, offset time.Duration) {
	now := h.clock.Now()
	h.clock.Advance(now.Truncate(unit).Add(unit + offset).Sub(now))
}

// Two dispatchers (two gateway processes, each with its own store handle
// and Notifier) that each sent events of one source to dead letter in the
// same minute send one dead-letter alert between them, counting both
// processes' dead letters from the store. On every store.
func TestDeadLetterAlertCountsEveryInstance(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, another := b.Open(t)
			slack := newSlackReceiver(t)
			h := newHarnessOn(t, queuedSource(func(c *ingress.SourceConfig) {
				c.Forward.Queue.Retry.Backoff.Schedule = []time.Duration{0, time.Second} // dead at the second failure
			}), nil, store, withAlerts(t, slack))
			alignClock(h, time.Minute, 5*time.Second)
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadGateway) })
			first := h.alerts
			s := another()
			// The same alerts: section as the first process's (targets are
			// named by their place in it), a log to tell when it is done.
			core, logs := observer.New(zapcore.DebugLevel)
			second, err := alerts.New(alerts.Options{Ledger: ledger.New(s, ledger.Options{Clock: h.clock.Now}), Clock: h.clock.Now,
				Backoff: func(int) time.Duration { return 10 * time.Millisecond }, GroupEvery: 10 * time.Millisecond,
				Config: alerts.Config{Targets: []alerts.Target{{Slack: "http://127.0.0.1:9/unused"}, {Slack: slack.URL}}}, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(second.Close)
			h.alerts = second
			fwd := forward.New(forward.NewClient(forward.ClientOptions{}), h.clock.Now)
			d2 := h.newDispatcherOnStore(t, s, fwd, nil)
			dead := func(id string) bool { return h.item(t, id).Status == ledger.DeliveryDead }

			h.post(t, "y-1") // fails on the first dispatcher
			settle(t, h.d)
			h.clock.Advance(2 * time.Second)
			testkit.Eventually(t, "y-1 dead on the first dispatcher", func() bool { h.sweep(t); return dead("y-1") })
			for _, id := range []string{"y-2", "y-3"} {
				h.post(t, id)
				settle(t, h.d)
			}
			h.clock.Advance(2 * time.Second)
			testkit.Eventually(t, "y-2 and y-3 dead on the second dispatcher", func() bool {
				if _, err := d2.Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
				settle(t, d2)
				return dead("y-2") && dead("y-3")
			})
			h.clock.Advance(time.Minute)
			testkit.Eventually(t, "the dead-letter alert", func() bool { return len(slack.matching("dead letter")) >= 1 })
			// The second process has claimed its group at the receiver's
			// target: sent it, or found it sent.
			testkit.Eventually(t, "the second process done with its alert", func() bool {
				for _, e := range logs.All() {
					if strings.HasPrefix(e.Message, "alerts: ") && e.ContextMap()["kind"] == "dead" && e.ContextMap()["target"] == "slack-1" &&
						(e.Message == "alerts: alert sent" || e.Message == "alerts: the alert was sent already, by this or another instance") {
						return true
					}
				}
				return false
			})
			first.Close()
			second.Close()
			got := slack.matching("dead letter")
			if len(got) != 1 || !strings.Contains(got[0], "Source github: 3 events went to dead letter") ||
				!strings.Contains(got[0], "3 in dead letter now") {
				t.Fatalf("dead-letter alerts %q, want one counting both processes' 3", got)
			}
		})
	}
}
