package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
)

// The burst scenario: customers type in bursts ("hi", "my order", "is
// late"), and the platform sends some webhooks twice. Each setup is played
// on its own simulated clock, with no send faults, and counts the agent's
// turns (each time it runs its model to compose a reply) next to the
// replies the customers got:
//
//   - without the gateway, every delivery is a turn and a reply, copies
//     included;
//   - inline (runs: supersede), every message is forwarded as it arrives,
//     so a burst of five costs five turns and five replies;
//   - queued with forward.debounce, the gateway holds the burst until the
//     conversation is quiet and forwards its newest message once, with
//     Replyonce-Covers: one turn, one reply answering all of it.
//
// The queued run drives the ledger's dispatch steps (Due,
// TakeDelivery, the real forwarder, FinishDelivery) itself, one sweep per
// 100 ms tick of simulated time, instead of running the dispatcher's
// goroutines, so that one seed prints one report.

// Burst scenario parameters.
const (
	DefaultBursts = 20
	pBurstCopy    = 0.2
	burstTick     = 100 * time.Millisecond
	// burstQuiet and burstMaxWait are the queued run's forward.debounce.
	burstQuiet   = 2 * time.Second
	burstMaxWait = 10 * time.Second
	streamBurst  = uint64(0xb0257000)
)

// BurstOutcome is one setup's result in the burst scenario.
type BurstOutcome struct {
	Messages, Replies, Duplicates, Unanswered, Turns int
}

// BurstReport is the burst scenario's result.
type BurstReport struct {
	Conversations, Messages, Copies int
	Without, Inline, Debounced      BurstOutcome
}

type burstArrival struct {
	at    time.Duration // after the conversation's start
	msg   int           // which message of the burst
	first bool          // the message is typed now; otherwise a copy of its webhook
}

// burstPlan is one conversation's burst, the same for every setup.
func burstPlan(seed uint64, i int) []burstArrival {
	r := rand.New(rand.NewPCG(seed, streamBurst^uint64(i)))
	n := 2 + r.IntN(4)
	var out []burstArrival
	at := time.Duration(0)
	for k := range n {
		if k > 0 {
			at += time.Duration(2+r.IntN(8)) * burstTick // 200 to 900 ms apart
		}
		out = append(out, burstArrival{at: at, msg: k, first: true})
		if r.Float64() < pBurstCopy {
			out = append(out, burstArrival{at: at + time.Second, msg: k})
		}
	}
	// Stable by time; a copy never precedes its message.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].at < out[j-1].at; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

var burstTexts = [...]string{"hi", "my order", "is late", "it was due Monday", "order A-1001"}

// burstWorld is one setup's run.
type burstWorld struct {
	clock *clock
	chat  *chat
	turns int
	// receive hands one delivery attempt to the agent or the gateway.
	receive func(ctx context.Context, ev *event) error
	// dispatch runs one sweep of the queued run; nil otherwise.
	dispatch func(ctx context.Context) error
	// waiting says whether the queued run still holds events of conv.
	waiting func(ctx context.Context, conv string) (bool, error)
}

// runBursts plays the scenario in all three setups.
func runBursts(ctx context.Context, seed uint64, n int) (BurstReport, error) {
	rep := BurstReport{Conversations: n}
	for i := range n {
		for _, a := range burstPlan(seed, i) {
			if a.first {
				rep.Messages++
			} else {
				rep.Copies++
			}
		}
	}
	for _, setup := range []struct {
		wire func(*burstWorld) error
		out  *BurstOutcome
	}{
		{(*burstWorld).naive, &rep.Without},
		{(*burstWorld).inline, &rep.Inline},
		{(*burstWorld).queued, &rep.Debounced},
	} {
		w := &burstWorld{clock: newClock(epoch())}
		w.chat = newChat(w.clock)
		if err := setup.wire(w); err != nil {
			return rep, err
		}
		for i := range n {
			if err := w.conversation(ctx, seed, i); err != nil {
				return rep, err
			}
			w.clock.Advance(conversationGap)
		}
		t := w.chat.tally()
		*setup.out = BurstOutcome{Messages: t.Messages, Replies: t.Replies, Duplicates: t.Duplicates, Unanswered: t.Unanswered, Turns: w.turns}
	}
	return rep, nil
}

// conversation plays one burst tick by tick until every arrival is in and
// nothing is held.
func (w *burstWorld) conversation(ctx context.Context, seed uint64, i int) error {
	conv := fmt.Sprintf("b%03d", i+1)
	plan := burstPlan(seed, i)
	start := w.clock.Now()
	events := map[int]*event{}
	next := 0
	for tick := 0; ; tick++ {
		w.clock.AdvanceTo(start.Add(time.Duration(tick) * burstTick))
		for next < len(plan) && start.Add(plan[next].at).Compare(w.clock.Now()) <= 0 {
			a := plan[next]
			next++
			if a.first {
				ev, err := newEvent(w.chat.customerSays(conv), conv, burstTexts[a.msg%len(burstTexts)])
				if err != nil {
					return err
				}
				events[a.msg] = ev
			}
			if err := w.receive(ctx, events[a.msg]); err != nil {
				return err
			}
		}
		if w.dispatch != nil {
			if err := w.dispatch(ctx); err != nil {
				return err
			}
		}
		if next < len(plan) {
			continue
		}
		if w.waiting == nil {
			return nil
		}
		held, err := w.waiting(ctx, conv)
		if err != nil || !held {
			return err
		}
		if tick > 10_000 {
			return fmt.Errorf("demo: burst %s never drained", conv)
		}
	}
}

// burstAgent answers a delivered message together with every earlier one
// still unanswered, one model turn per delivery that has something to
// answer. Behind the gateway it replies through the ledger, fenced on the
// forwarded run.
type burstAgent struct {
	w      *burstWorld
	ledger *ledger.Ledger // nil: straight to the chat API
}

func (a *burstAgent) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var body eventBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(rw, "not a chat event", http.StatusBadRequest)
		return
	}
	answers := a.w.chat.toAnswer(body.Conversation, body.Message.ID)
	if a.ledger != nil {
		// Behind the gateway the agent reads the conversation as it is
		// now: an answered message needs no turn.
		answers = answers[:0:0]
		for _, id := range a.w.chat.toAnswer(body.Conversation, body.Message.ID) {
			if !a.w.chat.answered(body.Conversation, id) {
				answers = append(answers, id)
			}
		}
	}
	if len(answers) == 0 {
		rw.WriteHeader(http.StatusOK)
		return
	}
	a.w.turns++
	if a.ledger == nil {
		_, _ = a.w.chat.send(body.Conversation, answers, "", sendOK)
		rw.WriteHeader(http.StatusOK)
		return
	}
	token, _ := strconv.ParseUint(r.Header.Get(forward.HeaderFencingToken), 10, 64)
	run := a.ledger.RunRef(r.Header.Get(forward.HeaderScope), r.Header.Get(forward.HeaderRunID), token)
	_, err := run.Once(r.Context(), "reply", map[string]any{"answers": answers}, func(_ context.Context, call ledger.Call) (any, error) {
		return a.w.chat.send(body.Conversation, answers, call.IdempotencyKey, sendOK)
	}, ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})
	if err != nil {
		rw.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	rw.WriteHeader(http.StatusOK)
}

// naive: the platform posts straight to the agent.
func (w *burstWorld) naive() error {
	send, err := newSender(w.clock, agentURL)
	if err != nil {
		return err
	}
	bot := &burstAgent{w: w}
	w.receive = func(ctx context.Context, ev *event) error {
		req, err := send.request(ctx, ev)
		if err != nil {
			return err
		}
		serveInProcess(bot, req)
		return nil
	}
	return nil
}

// through wires the platform to the real gateway with the given queue
// policy; it returns the pieces the queued run's dispatch needs.
func (w *burstWorld) through(q dispatch.Policy) (*ingress.Source, *ledger.Ledger, *forward.Forwarder, error) {
	store := memory.New(w.clock.Now)
	src, err := ingress.NewSource(ingress.SourceConfig{
		Name: "chat", Provider: "standard-webhooks",
		Signature: signatures.Config{Secrets: []string{providerSecret}},
		Scope:     []string{"{json:conversation}"},
		ContextAt: []string{"{json:message.created_at}"},
		Runs:      ledger.ModeSupersede,
		Forward:   ingress.ForwardConfig{Target: forward.Target{URL: agentURL, Timeout: forwardTimeout}, Queue: q},
	})
	if err != nil {
		return nil, nil, nil, err
	}
	bot := &burstAgent{w: w, ledger: ledger.New(store, ledger.Options{Clock: w.clock.Now})}
	fwd := forward.New(&http.Client{Transport: inProcessTransport{bot}}, w.clock.Now)
	l := ledger.New(store, ledger.Options{Clock: w.clock.Now})
	gw, err := ingress.New(ingress.Options{Sources: []*ingress.Source{src}, Ledger: l, Forwarder: fwd, Clock: w.clock.Now})
	if err != nil {
		return nil, nil, nil, err
	}
	send, err := newSender(w.clock, gatewayURL)
	if err != nil {
		return nil, nil, nil, err
	}
	w.receive = func(ctx context.Context, ev *event) error {
		req, err := send.request(ctx, ev)
		if err != nil {
			return err
		}
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			return fmt.Errorf("demo: the gateway answered %d to %s: %s", rec.Code, ev.msg, rec.Body.String())
		}
		return nil
	}
	return src, l, fwd, nil
}

func (w *burstWorld) inline() error {
	_, _, _, err := w.through(dispatch.Policy{Mode: dispatch.ModeInline})
	return err
}

func (w *burstWorld) queued() error {
	src, l, fwd, err := w.through(dispatch.Policy{Mode: dispatch.ModeQueued,
		Debounce: ledger.Debounce{Quiet: burstQuiet, MaxWait: burstMaxWait}})
	if err != nil {
		return err
	}
	w.dispatch = func(ctx context.Context) error {
		due, err := l.Queue().Due(ctx, ledger.DueQuery{Limit: 64})
		if err != nil {
			return err
		}
		for _, q := range due {
			t, err := l.Queue().TakeDelivery(ctx, q.Scope, q.EntryID, src.Queued().Lease())
			if err != nil {
				return err
			}
			if !t.OK {
				continue
			}
			ev, err := l.Queue().QueuedEventOf(ctx, t.Item)
			if err != nil {
				return err
			}
			out := fwd.Forward(ctx, src.Queued().ForwardRequest(ev, t))
			fin := ledger.Finish{Taken: t, Status: ledger.DeliveryDelivered, Record: ledger.AttemptRecord{AgentStatus: out.Status}}
			if out.Kind != forward.Delivered {
				fin.Status, fin.NextAt = ledger.DeliveryQueued, w.clock.Now().Add(5*time.Second)
			}
			if _, err := l.Queue().FinishDelivery(ctx, fin); err != nil {
				return err
			}
		}
		return nil
	}
	w.waiting = func(ctx context.Context, conv string) (bool, error) {
		items, err := l.Queue().QueueItems(ctx, conv)
		if err != nil {
			return false, err
		}
		for _, q := range items {
			if q.Status == ledger.DeliveryQueued || q.Status == ledger.DeliveryDelivering {
				return true, nil
			}
		}
		return false, nil
	}
	return nil
}
