package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores"
)

// Defaults for Config.
const (
	DefaultSeed          = 7
	DefaultConversations = 100
)

// The demo's secrets. They sign simulated traffic inside one process and
// protect nothing.
const (
	providerSecret = "whsec_cmVwbHlvbmNlIGRlbW86IGNoYXQgcGxhdGZvcm0ga2U="
	forwardSecret  = "whsec_cmVwbHlvbmNlIGRlbW86IGdhdGV3YXktPmFnZW50IGs="
)

const (
	gatewayURL = "http://gateway.demo/hooks/chat"
	agentURL   = "http://agent.demo/events"
	// forwardTimeout is the source's forward timeout; with the gateway's
	// margin it is the deliver claim's pending TTL on simulated time, and it
	// comfortably covers the longest handling the demo produces.
	forwardTimeout = time.Minute
	// conversationGap separates one conversation's start from the previous
	// one's end.
	conversationGap = time.Minute
)

// epoch is where simulated time starts. A fixed date keeps fencing tokens,
// which start from the clock, the same on every run.
func epoch() time.Time { return time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC) }

// Config says what to simulate.
type Config struct {
	Seed          uint64
	Conversations int
	// Store is "memory" or "bolt".
	Store string
	// StorePath is the bolt file. It must not exist yet: the demo needs an
	// empty ledger. Empty: a file in a temporary directory, removed after.
	StorePath string
}

// Report is what the demo found.
type Report struct {
	Seed          uint64
	Conversations int
	Store         string
	Without, With Outcome
	// Stats is what the gateway and the ledger did in the run with the
	// gateway.
	Stats Stats
	// Bursts is the customer-burst scenario (burst.go).
	Bursts BurstReport
}

// Outcome is one run's faults and what the customers saw.
type Outcome struct {
	Faults     Faults
	Messages   int
	Replies    int
	Duplicates int
	Unanswered int
	// Missing explains each unanswered message, in conversation order.
	Missing []Missing
}

// Missing is an unanswered message and what kept it so.
type Missing struct {
	Message string
	Why     string
}

// Stats counts the decisions that kept the run with the gateway clean.
type Stats struct {
	// Deliveries answered by the gateway: forwarded and answered, a repeat
	// answered from the ledger, 503 because the same event was in flight, 503
	// because the agent could not take it.
	Delivered, Repeats, InFlight, Retried int
	// Agent-side ledger decisions.
	Superseded, ConversationChanged, Reconciled, Takeovers int
}

// Run simulates cfg.Conversations conversations without and with the
// gateway. Its error is about the simulation itself (a store that cannot be
// opened); duplicates are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Conversations <= 0 {
		return nil, fmt.Errorf("demo: conversations must be positive, got %d", cfg.Conversations)
	}
	if cfg.Store == "" {
		cfg.Store = "memory"
	}
	rep := &Report{Seed: cfg.Seed, Conversations: cfg.Conversations, Store: cfg.Store}

	without := newWorld(cfg)
	if err := without.naive(); err != nil {
		return nil, err
	}
	if err := without.run(ctx); err != nil {
		return nil, err
	}
	rep.Without = without.outcome()

	with := newWorld(cfg)
	store, closeStore, err := openStore(ctx, cfg, with.clock)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	if err := with.gateway(store, &rep.Stats); err != nil {
		return nil, err
	}
	if err := with.run(ctx); err != nil {
		return nil, err
	}
	rep.With = with.outcome()
	if rep.Bursts, err = runBursts(ctx, cfg.Seed, DefaultBursts); err != nil {
		return nil, err
	}
	return rep, nil
}

// clockedKinds are the store kinds that judge expiry by the clock they are
// given (stores.Options.Clock), so they follow the demo's simulated time.
var clockedKinds = []string{"memory", "bolt"}

// StoreKinds are the stores the demo runs on: those that follow its
// simulated clock.
func StoreKinds() []string { return slices.Clone(clockedKinds) }

// openStore opens the run's store through stores.Open, as serve does, on
// the simulated clock. A bolt file with no StorePath goes in a temporary
// directory that the returned close removes.
func openStore(ctx context.Context, cfg Config, c *clock) (ledger.Store, func(), error) {
	if !slices.Contains(clockedKinds, cfg.Store) {
		return nil, nil, fmt.Errorf("demo: store %q is not one of %s", cfg.Store, strings.Join(clockedKinds, ", "))
	}
	sc := stores.Config{Kind: cfg.Store, Path: cfg.StorePath}
	cleanup := func() {}
	if sc.Kind == "bolt" && sc.Path == "" {
		dir, err := os.MkdirTemp("", "replyonce-demo-")
		if err != nil {
			return nil, nil, fmt.Errorf("demo: temporary directory for the bolt store: %w", err)
		}
		sc.Path = filepath.Join(dir, "ledger.db")
		cleanup = func() { _ = os.RemoveAll(dir) }
	} else if sc.Path != "" {
		if _, err := os.Stat(sc.Path); err == nil {
			return nil, nil, fmt.Errorf("demo: store path %s already exists; the demo needs an empty ledger", sc.Path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("demo: store path: %w", err)
		}
	}
	op, err := stores.Open(ctx, sc, stores.Options{Clock: c.Now})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("demo: %w", err)
	}
	return op.Store, func() { op.Close(); cleanup() }, nil
}

// world is one run: the clock, the platform, the conversation being
// played, and how the platform's deliveries reach the agent.
type world struct {
	cfg    Config
	clock  *clock
	chat   *chat
	convs  map[string]*convState
	queue  *queue
	faults Faults
	// receive hands one delivery attempt to the gateway or the agent and
	// reports whether it was acknowledged (2xx).
	receive func(ctx context.Context, ev *event) (bool, string, error)
	// why remembers, per message, the last reason it could not be answered.
	why map[string]string
}

// convState is what the agent needs to know about the conversation being
// played: its send-fault dice and the conversation faults still waiting.
type convState struct {
	dice  *dice
	hooks hooks
}

func newWorld(cfg Config) *world {
	c := newClock(epoch())
	return &world{cfg: cfg, clock: c, chat: newChat(c), convs: map[string]*convState{}, why: map[string]string{}}
}

// naive wires the run without the gateway: the platform posts straight to
// the agent, which checks the platform's signature.
func (w *world) naive() error {
	verify, err := signatures.New("standard-webhooks", signatures.Config{Secrets: []string{providerSecret}})
	if err != nil {
		return err
	}
	send, err := newSender(w.clock, agentURL)
	if err != nil {
		return err
	}
	bot := &agent{w: w, verify: verify, out: naive{w}}
	w.receive = func(ctx context.Context, ev *event) (bool, string, error) {
		req, err := send.request(ctx, ev)
		if err != nil {
			return false, "", err
		}
		rec, lost := serveInProcess(bot, req)
		if lost {
			return false, "the agent crashed", nil
		}
		return rec.Code/100 == 2, fmt.Sprintf("the agent answered %d", rec.Code), nil
	}
	return nil
}

// gateway wires the run with the gateway: the platform posts to the real
// ingress handler, which forwards through the real forwarder to the agent;
// the gateway and the agent keep separate ledgers over one store, as two
// processes would.
func (w *world) gateway(store ledger.Store, stats *Stats) error {
	src, err := ingress.NewSource(ingress.SourceConfig{
		Name: "chat", Provider: "standard-webhooks",
		Signature: signatures.Config{Secrets: []string{providerSecret}},
		Scope:     []string{"{json:conversation}"},
		ContextAt: []string{"{json:message.created_at}"},
		Runs:      ledger.ModeSupersede,
		// Inline: the demo's gateway run shows the provider's retry as the
		// queue (the burst run shows queued delivery).
		Forward: ingress.ForwardConfig{Target: forward.Target{URL: agentURL, Timeout: forwardTimeout, SigningSecret: forwardSecret}, Queue: dispatch.Policy{Mode: dispatch.ModeInline}},
	})
	if err != nil {
		return err
	}
	// The agent checks the gateway's signature, whatever the provider's.
	verify, err := signatures.New("standard-webhooks", signatures.Config{Secrets: []string{forwardSecret}})
	if err != nil {
		return err
	}
	out := &gated{w: w, stats: stats}
	out.ledger = ledger.New(store, ledger.Options{Clock: w.clock.Now, Reconcile: func(ctx context.Context, e ledger.Entry) (ledger.Outcome, error) {
		stats.Reconciled++
		return out.reconcile(ctx, e)
	}})
	bot := &agent{w: w, verify: verify, out: out}
	fwd := forward.New(&http.Client{Transport: inProcessTransport{bot}}, w.clock.Now)
	gw, err := ingress.New(ingress.Options{Sources: []*ingress.Source{src}, Ledger: ledger.New(store, ledger.Options{Clock: w.clock.Now}),
		Forwarder: fwd, Clock: w.clock.Now})
	if err != nil {
		return err
	}
	send, err := newSender(w.clock, gatewayURL)
	if err != nil {
		return err
	}
	w.receive = func(ctx context.Context, ev *event) (bool, string, error) {
		req, err := send.request(ctx, ev)
		if err != nil {
			return false, "", err
		}
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		var ans struct{ Status, Reason string }
		_ = json.Unmarshal(rec.Body.Bytes(), &ans)
		switch {
		case rec.Code == http.StatusOK && ans.Status == "duplicate":
			stats.Repeats++
		case rec.Code/100 == 2:
			stats.Delivered++
		case rec.Code == http.StatusServiceUnavailable && ans.Reason == "in_flight":
			stats.InFlight++
		default:
			stats.Retried++
		}
		return rec.Code/100 == 2, fmt.Sprintf("the gateway answered %d %s", rec.Code, ans.Reason), nil
	}
	return nil
}

// run plays every conversation, one after the other.
func (w *world) run(ctx context.Context) error {
	for i := range w.cfg.Conversations {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.conversation(ctx, i); err != nil {
			return err
		}
		w.clock.Advance(conversationGap)
	}
	return nil
}

// conversation plays one conversation until the platform has nothing left
// to deliver. Conversation faults wait as hooks for their moment; the
// platform's retries wait in the queue.
func (w *world) conversation(ctx context.Context, i int) error {
	sc := newScenario(w.cfg.Seed, i)
	cs := &convState{dice: newDice(w.cfg.Seed, i, &w.faults)}
	w.convs[sc.conv] = cs
	w.queue = &queue{}
	var failed error
	deliver := func(ch *chain) {
		if failed == nil {
			failed = w.attempt(ctx, ch)
		}
	}

	first, err := newEvent(w.chat.customerSays(sc.conv), sc.conv, sc.text)
	if err != nil {
		return err
	}
	if sc.burst {
		cs.hooks.add(sc.burstAt, first.msg, func() {
			w.faults.CustomerBurst++
			second, err := newEvent(w.chat.customerSays(sc.conv), sc.conv, sc.burstText)
			if err != nil {
				failed = err
				return
			}
			deliver(&chain{ev: second})
		})
	}
	switch sc.duplicate {
	case duplicateWhileAnswering:
		cs.hooks.add(pointRead, first.msg, func() {
			w.faults.DuplicateDelivery++
			deliver(&chain{ev: first})
		})
	case duplicateLater:
		w.faults.DuplicateDelivery++
		w.queue.schedule(w.clock.Now().Add(sc.dupDelay), &chain{ev: first})
	}
	w.queue.schedule(w.clock.Now(), &chain{ev: first})
	for w.queue.Len() > 0 && failed == nil {
		next := w.queue.next()
		w.clock.AdvanceTo(next.at)
		deliver(next.ch)
	}
	return failed
}

// attempt makes one delivery attempt of a chain and, if it was not
// acknowledged, schedules the next one or gives up.
func (w *world) attempt(ctx context.Context, ch *chain) error {
	ch.attempts++
	ok, answer, err := w.receive(ctx, ch.ev)
	if err != nil || ok {
		return err
	}
	if ch.attempts > len(retrySchedule) {
		if _, known := w.why[ch.ev.msg]; !known {
			w.why[ch.ev.msg] = fmt.Sprintf("the platform gave up after %d attempts; the last time %s", ch.attempts, answer)
		}
		return nil
	}
	w.queue.schedule(w.clock.Now().Add(retrySchedule[ch.attempts-1]), ch)
	return nil
}

func (w *world) outcome() Outcome {
	t := w.chat.tally()
	o := Outcome{Faults: w.faults, Messages: t.Messages, Replies: t.Replies, Duplicates: t.Duplicates, Unanswered: t.Unanswered}
	for _, id := range t.UnansweredIDs {
		why := w.why[id]
		if why == "" {
			why = "no delivery of it led to a reply"
		}
		o.Missing = append(o.Missing, Missing{Message: id, Why: why})
	}
	return o
}
