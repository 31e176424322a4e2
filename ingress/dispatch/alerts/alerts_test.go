package alerts_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest/backends"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// receiver is a test alert target: it keeps every body it was posted,
// answering down's status while down is set.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	down   atomic.Int32 // a status to answer instead of 200
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if s := r.down.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.heads = append(r.heads, req.Header.Clone())
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

func fastBackoff(int) time.Duration { return 5 * time.Millisecond }

func newNotifier(t *testing.T, l *ledger.Ledger, cfg alerts.Config, clock ...func() time.Time) *alerts.Notifier {
	t.Helper()
	return newLoggedNotifier(t, l, cfg, nil, clock...)
}

// newLoggedNotifier is newNotifier logging to log (nil: nowhere).
func newLoggedNotifier(t *testing.T, l *ledger.Ledger, cfg alerts.Config, log *zap.Logger, clock ...func() time.Time) *alerts.Notifier {
	t.Helper()
	o := alerts.Options{Config: cfg, Ledger: l, Backoff: fastBackoff, GroupEvery: 5 * time.Millisecond, Logger: log}
	if len(clock) > 0 {
		o.Clock = clock[0]
	}
	n, err := alerts.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

var start = time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)

// One Slack-format message per incident and kind, on every store, however
// many gateway processes raise it: three notifiers, each on its own handle
// of the same store (its own caches), raise the same failing and recovery
// alerts, and the receiver gets one of each.
func TestThreeInstancesSendOneAlertPerIncident(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, another := b.Open(t)
			slack := newReceiver(t)
			cfg := alerts.Config{Targets: []alerts.Target{{Slack: slack.URL + "/services/T0/B0/secret"}},
				ConsoleURL: "https://gw.example.com/console"}
			// The notifiers log each alert they sent once its claim is
			// settled; the test closes them only after that (see below).
			core, logs := observer.New(zapcore.InfoLevel)
			var ns []*alerts.Notifier
			for i := range 3 {
				s := store
				if i > 0 {
					s = another()
				}
				ns = append(ns, newLoggedNotifier(t, ledger.New(s, ledger.Options{}), cfg, zap.New(core)))
			}
			failing := alerts.Alert{Kind: alerts.Failing, Source: "stripe", Incident: start, Failures: 3,
				Error: "nothing is listening at http://127.0.0.1:9/ (connection refused): check that the agent is running and forward.url"}
			for _, n := range ns {
				n.Raise(failing)
			}
			testkit.Eventually(t, "one failing alert", func() bool { return len(slack.got()) >= 1 })
			for _, n := range ns {
				n.Raise(alerts.Alert{Kind: alerts.Recovered, Source: "stripe", Incident: start, Lasted: 4*time.Minute + 12*time.Second})
			}
			// Closing cancels a send in flight, and a send cancelled after
			// the receiver had the message but before its answer came
			// back is recorded as not sent, so another notifier sends it
			// again (twice rather than never, by design). So wait until
			// the sender has recorded both alerts as sent: every other
			// try then finds them sent.
			testkit.Eventually(t, "both alerts sent and recorded", func() bool {
				return len(slack.got()) >= 2 && logs.FilterMessage("alerts: alert sent").Len() >= 2
			})
			for _, n := range ns {
				n.Close() // every try has ended: nothing more can arrive
			}
			got := slack.got()
			if len(got) != 2 {
				t.Fatalf("the receiver got %d messages, want 2 (one per incident and kind):\n%s", len(got), got)
			}
			var msg map[string]any
			if err := json.Unmarshal(got[0], &msg); err != nil || len(msg) != 1 {
				t.Fatalf("not Slack's {\"text\": …} format: %s (%v)", got[0], err)
			}
			text, _ := msg["text"].(string)
			for _, want := range []string{"Source stripe is failing", "3 attempts in a row", "connection refused",
				"<https://gw.example.com/console/events?source=stripe|Open stripe in the console>"} {
				if !strings.Contains(text, want) {
					t.Fatalf("failing alert %q lacks %q", text, want)
				}
			}
			if !strings.Contains(string(got[1]), "stripe recovered: its agent answers again after 4m12s") {
				t.Fatalf("recovery alert: %s", got[1])
			}
			// A new incident of the same source is a new alert.
			n := newNotifier(t, ledger.New(store, ledger.Options{}), cfg)
			failing.Incident = start.Add(time.Hour)
			n.Raise(failing)
			testkit.Eventually(t, "the next incident's alert", func() bool { return len(slack.got()) == 3 })
		})
	}
}

// A recovery of an incident that raised no failing alert (too short, or
// opened on another instance by an attempt sent before the agent came
// back) sends nothing; the recovery of one that did is sent.
func TestRecoveryFollowsOnlyASentFailingAlert(t *testing.T) {
	slack := newReceiver(t)
	l := ledger.New(memory.New(nil), ledger.Options{})
	n := newNotifier(t, l, alerts.Config{Targets: []alerts.Target{{Slack: slack.URL + "/services/x"}}})
	n.Raise(alerts.Alert{Kind: alerts.Recovered, Source: "stripe", Incident: start, Lasted: time.Second})
	n.Raise(alerts.Alert{Kind: alerts.Failing, Source: "stripe", Incident: start.Add(time.Hour), Failures: 3, Error: "x"})
	n.Raise(alerts.Alert{Kind: alerts.Recovered, Source: "stripe", Incident: start.Add(time.Hour), Lasted: time.Minute})
	testkit.Eventually(t, "the failing and its recovery", func() bool { return len(slack.got()) >= 2 })
	n.Close() // every try has ended: nothing more can arrive
	got := slack.got()
	if len(got) != 2 || !strings.Contains(string(got[0]), "is failing") || !strings.Contains(string(got[1]), "recovered") {
		t.Fatalf("messages %s, want the failing alert and its recovery only", got)
	}
}

// A webhook target gets a JSON body signed with Standard Webhooks, which
// svix's own verifier accepts.
func TestWebhookAlertIsSignedWithStandardWebhooks(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	hook := newReceiver(t)
	n := newNotifier(t, ledger.New(memory.New(nil), ledger.Options{}), alerts.Config{
		Targets: []alerts.Target{{Webhook: hook.URL, Secret: secret}}, ConsoleURL: "https://gw.example.com/console/"})
	n.Raise(alerts.Alert{Kind: alerts.Paused, Source: "github", Incident: start, Failures: 5, Error: "the agent refused"})
	testkit.Eventually(t, "the webhook alert", func() bool { return len(hook.got()) == 1 })
	hook.mu.Lock()
	body, head := hook.bodies[0], hook.heads[0]
	hook.mu.Unlock()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, head); err != nil {
		t.Fatalf("svix does not verify the alert: %v\n%s\n%v", err, body, head)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "source.paused" || got["source"] != "github" || got["consecutiveFailures"] != float64(5) ||
		got["consoleUrl"] != "https://gw.example.com/console/events?source=github" {
		t.Fatalf("webhook body: %s", body)
	}
}

// A target that is down neither blocks Raise nor the other targets: it is
// retried with backoff on its own goroutine and gets the alert, once,
// when it is back.
func TestDownTargetIsRetriedAndBlocksNothing(t *testing.T) {
	down, up := newReceiver(t), newReceiver(t)
	down.down.Store(http.StatusServiceUnavailable)
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers until the test ends
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer func() { close(hang); slow.Close() }()
	n := newNotifier(t, ledger.New(memory.New(nil), ledger.Options{}), alerts.Config{Targets: []alerts.Target{
		{Slack: slow.URL}, {Slack: down.URL}, {Slack: up.URL}}})
	for i := range 300 { // more than a queue holds: Raise still returns
		n.Raise(alerts.Alert{Kind: alerts.Failing, Source: "s", Incident: start.Add(time.Duration(i) * time.Second), Failures: 3})
	}
	testkit.Eventually(t, "the up target's alerts", func() bool { return len(up.got()) >= 256 })
	if len(down.got()) != 0 {
		t.Fatal("the down target counted a message")
	}
	down.down.Store(0)
	testkit.Eventually(t, "the down target's first alert once it is back", func() bool { return len(down.got()) >= 1 })
	n.Close() // returns although the slow target never answered
}

// texts decodes the Slack messages the receiver got.
func (r *receiver) texts(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, b := range r.got() {
		var msg struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatalf("not a Slack message: %s", b)
		}
		out = append(out, msg.Text)
	}
	return out
}

// Dead letters are grouped per source and minute: those of one minute
// are one message once the minute is over, naming the events; three
// processes on one store that each saw dead letters of the same source in
// the same minute send one message between them. On every store.
func TestDeadLettersAreGroupedPerMinuteAndSentOnce(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, another := b.Open(t)
			slack := newReceiver(t)
			clock := testkit.NewClock(start.Add(10 * time.Second))
			cfg := alerts.Config{Targets: []alerts.Target{{Slack: slack.URL}}, ConsoleURL: "https://gw.example.com/console"}
			var ns []*alerts.Notifier
			var logs []*observer.ObservedLogs
			for i := range 3 {
				s := store
				if i > 0 {
					s = another()
				}
				core, ol := observer.New(zapcore.DebugLevel)
				logs = append(logs, ol)
				ns = append(ns, newLoggedNotifier(t, ledger.New(s, ledger.Options{Clock: clock.Now}), cfg, zap.New(core), clock.Now))
			}
			const why = "the agent failed (502 Bad Gateway): see the agent's own log"
			ns[0].DeadLetter("stripe", "evt_0", why)
			ns[0].DeadLetter("stripe", "evt_1", why)
			clock.Advance(30 * time.Second) // the same minute
			ns[0].DeadLetter("stripe", "evt_2", why)
			clock.Advance(30 * time.Second)
			testkit.Eventually(t, "the dead-letter alert", func() bool { return len(slack.got()) >= 1 })
			for i, n := range ns { // the next minute, seen by every process
				n.DeadLetter("stripe", "evt_n"+strconv.Itoa(i), why)
			}
			clock.Advance(time.Minute)
			testkit.Eventually(t, "the next minute's alert", func() bool { return len(slack.got()) >= 2 })
			// Every process has claimed its group: sent it, or found it sent.
			for i, want := range []int{2, 1, 1} {
				testkit.Eventually(t, "each process done with its dead-letter alerts", func() bool { return done(logs[i], alerts.Dead) >= want })
			}
			for _, n := range ns {
				n.Close() // every try has ended: nothing more can arrive
			}
			got := slack.texts(t)
			if len(got) != 2 {
				t.Fatalf("%d messages, want one per minute: %q", len(got), got)
			}
			for _, want := range []string{"Source stripe: 3 events went to dead letter in the minute from 2026-12-04 01:00 UTC",
				"(evt_0, evt_1, evt_2)", "0 in dead letter now", "502 Bad Gateway", "gateway events replay --status dead --source stripe",
				"<https://gw.example.com/console/events?source=stripe&status=dead|Open stripe in the console>"} {
				if !strings.Contains(got[0], want) {
					t.Fatalf("dead-letter alert %q lacks %q", got[0], want)
				}
			}
			if !strings.Contains(got[1], "1 event went to dead letter in the minute from 2026-12-04 01:01 UTC (evt_n") {
				t.Fatalf("next minute's alert: %q", got[1])
			}
		})
	}
}

// The verification alert: alerts.verification_failures refusals within
// one minute, counted across instances in the store, raise it, though no
// process saw that many; fewer do not; and it is one message, however many
// processes see the count cross the threshold. On every store.
func TestVerificationFailuresJumpRaisesOneAlert(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, another := b.Open(t)
			hook := newReceiver(t)
			clock := testkit.NewClock(start.Add(5 * time.Second))
			cfg := alerts.Config{VerificationFailures: 5,
				Targets: []alerts.Target{{Webhook: hook.URL, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}
			var ns []*alerts.Notifier
			for i := range 3 {
				s := store
				if i > 0 {
					s = another()
				}
				ns = append(ns, newNotifier(t, ledger.New(s, ledger.Options{Clock: clock.Now}), cfg, clock.Now))
			}
			// 01:00: one refusal at each process, three in all: under the threshold.
			for _, n := range ns {
				n.VerificationFailed("github", "no_match")
			}
			// 01:01: two at each process, six in all: over it, though no
			// process saw more than two.
			clock.Advance(time.Minute)
			for _, n := range ns {
				n.VerificationFailed("github", "stale")
				n.VerificationFailed("github", "no_match")
			}
			testkit.Eventually(t, "the verification alert", func() bool { return len(hook.got()) >= 1 })
			for _, n := range ns {
				n.Close()
			}
			got := hook.got()
			if len(got) != 1 {
				t.Fatalf("%d verification alerts from three processes past the threshold, want 1: %s", len(got), got)
			}
			var body map[string]any
			if err := json.Unmarshal(got[0], &body); err != nil {
				t.Fatal(err)
			}
			text, _ := body["text"].(string)
			if body["type"] != "source.verification" || body["source"] != "github" ||
				!regexp.MustCompile(`^Source github refused [56] requests for their signature in the minute from 2026-12-04 01:01 UTC \(`).MatchString(text) ||
				!strings.Contains(text, "no_match: 1") || !strings.Contains(text, "sources.github.secrets") {
				t.Fatalf("verification alert: %s", got[0])
			}
		})
	}
}

// A loop-breaker escalation raised by every process that hears it is one
// message, naming the scope, the cap and the command that dismisses it,
// linked to the conversation's console page; another escalation is
// another message.
func TestEscalationAlertIsSentOnce(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, another := b.Open(t)
			slack := newReceiver(t)
			cfg := alerts.Config{Targets: []alerts.Target{{Slack: slack.URL}}, ConsoleURL: "https://gw.example.com/console"}
			core0, log0 := observer.New(zapcore.DebugLevel)
			core1, log1 := observer.New(zapcore.DebugLevel)
			ns := []*alerts.Notifier{newLoggedNotifier(t, ledger.New(store, ledger.Options{}), cfg, zap.New(core0)),
				newLoggedNotifier(t, ledger.New(another(), ledger.Options{}), cfg, zap.New(core1))}
			esc := alerts.Alert{Kind: alerts.Escalation, Scope: "conv-42", Intent: "reply", RunID: "github:d-1",
				EscalationID: "e1", Max: 3, Window: 5 * time.Minute}
			for _, n := range ns {
				n.Raise(esc)
			}
			testkit.Eventually(t, "the escalation alert", func() bool { return len(slack.got()) >= 1 })
			esc.EscalationID = "e2"
			ns[1].Raise(esc)
			testkit.Eventually(t, "the next escalation's alert", func() bool { return len(slack.got()) >= 2 })
			testkit.Eventually(t, "both processes done with their escalation alerts", func() bool {
				return done(log0, alerts.Escalation) >= 1 && done(log1, alerts.Escalation) >= 2
			})
			for _, n := range ns {
				n.Close()
			}
			got := slack.texts(t)
			if len(got) != 2 {
				t.Fatalf("%d messages, want one per escalation: %q", len(got), got)
			}
			for _, want := range []string{"Loop breaker: scope conv-42 reached its cap of reply (3 in 5m0s)", "run github:d-1",
				"gateway ledger dismiss conv-42 e1", "<https://gw.example.com/console/scope?scope=conv-42|Open conv-42 in the console>"} {
				if !strings.Contains(got[0], want) {
					t.Fatalf("escalation alert %q lacks %q", got[0], want)
				}
			}
		})
	}
}

// alerts.after and alerts.verification_failures are checked like the
// other keys.
func TestConfigRefusesNegativeThresholds(t *testing.T) {
	for _, c := range []struct {
		cfg  alerts.Config
		want string
	}{
		{alerts.Config{After: -time.Second}, "alerts.after: -1s is negative"},
		{alerts.Config{VerificationFailures: -1}, "alerts.verification_failures: -1 is negative"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("Validate(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	var cfg alerts.Config
	if cfg.FailingAfter() != alerts.DefaultAfter || cfg.VerificationThreshold() != alerts.DefaultVerificationFailures {
		t.Fatal("zero values do not mean the defaults")
	}
}

// done counts the alerts of kind a Notifier logged as finished at a
// target: sent, or found sent by another instance.
func done(logs *observer.ObservedLogs, kind alerts.Kind) int {
	n := 0
	for _, e := range logs.All() {
		if (e.Message == "alerts: alert sent" || e.Message == "alerts: the alert was sent already, by this or another instance") &&
			e.ContextMap()["kind"] == string(kind) {
			n++
		}
	}
	return n
}
