package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

const (
	// thinkTime is how long the agent takes to read a conversation and
	// write its answer.
	thinkTime = 2 * time.Second
	// naiveTries bounds the naive agent's blind resends of one reply.
	naiveTries = 3
	// resendPause is how long either agent waits before trying a send again.
	resendPause = time.Second
	// replyTTL is the pending TTL of a reply claim: well over chatTimeout,
	// so a live send is never taken for dead, and short enough that a crashed
	// worker's claim is reconciled by the platform's next retry but one.
	replyTTL = time.Minute
	// intentReply is the ledger intent of a customer-visible reply.
	intentReply = "reply"
	// maxSteps bounds one delivery's back-and-forth with the ledger.
	maxSteps = 8
)

// replier is how the agent gets its reply out: straight to the platform, or
// through the ledger.
type replier interface {
	reply(r *http.Request, cs *convState, in messageBody, conv string, answers []string) int
}

// agent is the support bot, an http.Handler. Both runs use it unchanged;
// only the replier and the signature it checks differ.
type agent struct {
	w      *world
	verify signatures.Scheme
	out    replier
}

func (a *agent) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(rw, "cannot read body", http.StatusBadRequest)
		return
	}
	sreq := &signatures.Request{Method: r.Method, URL: "http://" + r.Host + r.URL.RequestURI(), Header: r.Header, Body: body}
	if err := a.verify.Verify(sreq, a.w.clock.Now()); err != nil {
		http.Error(rw, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev eventBody
	if err := json.Unmarshal(body, &ev); err != nil || ev.Message.ID == "" {
		http.Error(rw, "not a message event", http.StatusBadRequest)
		return
	}
	cs := a.w.convs[ev.Conversation]
	if cs == nil {
		http.Error(rw, "unknown conversation", http.StatusBadRequest)
		return
	}
	a.w.clock.Advance(thinkTime)
	answers := a.w.chat.toAnswer(ev.Conversation, ev.Message.ID)
	cs.hooks.fire(pointRead, ev.Message.ID)
	rw.WriteHeader(a.out.reply(r, cs, ev.Message, ev.Conversation, answers))
}

// sendReply is the moment both agents share: the conversation's faults
// may barge in, the worker may die, the chat API may time out.
func (w *world) sendReply(cs *convState, msg, conv string, answers []string, key string) (string, error) {
	cs.hooks.fire(pointSend, msg)
	fault := cs.dice.sendFault()
	if fault == crashBeforeSend {
		// The worker process dies: nothing after this line runs, no claim
		// is settled, and the caller sees its connection drop.
		panic(http.ErrAbortHandler)
	}
	id, err := w.chat.send(conv, answers, key, fault)
	if fault == crashAfterSend {
		panic(http.ErrAbortHandler)
	}
	return id, err
}

// naive sends every reply straight to the platform and resends blindly
// when a send fails, as most webhook handlers do.
type naive struct{ w *world }

func (n naive) reply(_ *http.Request, cs *convState, in messageBody, conv string, answers []string) int {
	for try := 1; try <= naiveTries; try++ {
		if _, err := n.w.sendReply(cs, in.ID, conv, answers, ""); err == nil {
			return http.StatusOK
		}
		n.w.clock.Advance(resendPause)
	}
	return http.StatusInternalServerError
}

// gated sends replies through the ledger, fenced on the run the gateway
// forwarded.
type gated struct {
	w      *world
	ledger *ledger.Ledger
	stats  *Stats
}

// replyKey is the reply's business identity: the message it answers. It
// never depends on the wording or on which run writes it.
func replyKey(msg string) map[string]string { return map[string]string{"inReplyTo": msg} }

// summary tells other runs which messages a reply covers; conversation
// changed refusals hand it to them.
func summary(answers []string) string { return "answers " + strings.Join(answers, " ") }

func coveredBySummary(s string) []string {
	rest, ok := strings.CutPrefix(s, "answers ")
	if !ok {
		return nil
	}
	return strings.Fields(rest)
}

// reply answers through the ledger. The reply's key is the delivered
// message, its summary lists every message it answers, and it conflicts only
// with other replies (the gateway's own deliver entries on the conversation
// are not something an agent re-reads for).
func (g *gated) reply(r *http.Request, cs *convState, in messageBody, conv string, answers []string) int {
	ctx := r.Context()
	scope := r.Header.Get(forward.HeaderScope)
	runID := r.Header.Get(forward.HeaderRunID)
	token, err := strconv.ParseUint(r.Header.Get(forward.HeaderFencingToken), 10, 64)
	if scope == "" || runID == "" || err != nil {
		return http.StatusBadRequest
	}
	run := g.ledger.RunRef(scope, runID, token)
	runs := []*ledger.Run{run}
	done := func() int {
		// The run is finished: end it, so that a run that never wrote does
		// not go on fencing runs that begin after it.
		for _, finished := range runs {
			_ = finished.End(ctx, "answered")
		}
		return http.StatusOK
	}
	ambiguous := 0
	for step := 1; step <= maxSteps; step++ {
		opts := ledger.OnceOptions{Summary: summary(answers), Conflict: ledger.ConflictSameIntent, PendingTTL: replyTTL}
		res, err := run.Once(ctx, intentReply, replyKey(in.ID), g.effect(cs, in.ID, conv, answers), opts)
		if err != nil {
			return http.StatusServiceUnavailable // the store is down: let the platform retry
		}
		switch res.Status {
		case ledger.StatusExecuted, ledger.StatusReplayed:
			return done()
		case ledger.StatusInFlight:
			// Another attempt at this very reply is pending, a crashed
			// worker's most likely. Ask to be redelivered; by then it has
			// settled or reads as abandoned, and the reconciler decides.
			return http.StatusServiceUnavailable
		case ledger.StatusFailed:
			// Known not sent: try again.
			g.w.clock.Advance(resendPause)
		case ledger.StatusAmbiguous:
			// Maybe sent. The next Once asks the reconciler; if even it
			// cannot tell, leave it for a later delivery.
			if ambiguous++; ambiguous > 1 {
				return http.StatusServiceUnavailable
			}
		case ledger.StatusRefused:
			switch res.Reason {
			case ledger.ReasonConversationChanged:
				// Another run is answering, or has answered, part of what
				// this one was about to say. Re-read, leave out what the
				// conflicting replies cover, and try again: the refusal
				// recorded that this run has now seen them.
				g.stats.ConversationChanged++
				covered := map[string]bool{}
				for _, e := range res.Conflicts {
					for _, id := range coveredBySummary(e.Summary) {
						covered[id] = true
					}
				}
				if answers = g.reread(conv, in.ID, covered); len(answers) == 0 {
					return done()
				}
			case ledger.ReasonSuperseded:
				// A newer run owns the conversation. It normally answers
				// this message too; if it did not (it had left the message
				// to this run's reply, which then failed), carry on under a
				// fresh run whose view is current.
				g.stats.Superseded++
				covered, err := g.inHand(ctx, scope)
				if err != nil {
					return http.StatusServiceUnavailable
				}
				if answers = g.reread(conv, in.ID, covered); len(answers) == 0 {
					return done()
				}
				fresh, err := g.ledger.Begin(ctx, scope, ledger.RunOptions{RunID: fmt.Sprintf("%s~takeover%d", runID, step), Mode: ledger.ModeSupersede})
				if err != nil {
					return http.StatusServiceUnavailable
				}
				g.stats.Takeovers++
				run = fresh
				runs = append(runs, fresh)
			default:
				// Exhausted, ended, cancelled: the ledger will not let this
				// reply happen, and retrying cannot change that. A person has
				// to look; the report says which messages it leaves open.
				why := fmt.Sprintf("the ledger refused the reply that would have answered it (%s)", res.Reason)
				if res.Reason == ledger.ReasonExhausted {
					why = "its reply failed, known unsent, as often as the ledger allows (exhausted); a person has to look"
				}
				for _, id := range answers {
					if _, known := g.w.why[id]; !known {
						g.w.why[id] = why
					}
				}
				return done()
			}
		}
	}
	return http.StatusServiceUnavailable
}

// reread is the agent looking at the conversation again: what is still
// unanswered up to its message, less what other replies in hand cover. An
// empty answer means its own message is taken care of.
func (g *gated) reread(conv, msg string, covered map[string]bool) []string {
	if covered[msg] || g.w.chat.answered(conv, msg) {
		return nil
	}
	var out []string
	for _, id := range g.w.chat.toAnswer(conv, msg) {
		if !covered[id] {
			out = append(out, id)
		}
	}
	return out
}

// inHand lists the messages covered by replies that are pending or of
// unknown outcome in the ledger: their owners will settle them.
func (g *gated) inHand(ctx context.Context, scope string) (map[string]bool, error) {
	entries, err := g.ledger.Views().History(ctx, scope)
	if err != nil {
		return nil, err
	}
	covered := map[string]bool{}
	for _, e := range entries {
		if e.Intent == intentReply && (e.State == ledger.StatePending || e.State == ledger.StateAmbiguous) {
			for _, id := range coveredBySummary(e.Summary) {
				covered[id] = true
			}
		}
	}
	return covered, nil
}

// effect sends the reply once the ledger granted the claim. A connect
// timeout is known not to have sent anything; any other failure is
// ambiguous and left to the reconciler.
func (g *gated) effect(cs *convState, msg, conv string, answers []string) ledger.Effect {
	answers = slices.Clone(answers)
	return func(_ context.Context, call ledger.Call) (any, error) {
		id, err := g.w.sendReply(cs, msg, conv, answers, call.IdempotencyKey)
		if err != nil {
			var te timeoutError
			if errors.As(err, &te) && !te.afterSend {
				return nil, ledger.NotApplied(err)
			}
			return nil, err
		}
		return map[string]string{"reply": id}, nil
	}
}

// reconcile is the agent's answer to "did this reply happen?": it asks the
// platform for a reply carrying the entry's idempotency key.
func (g *gated) reconcile(_ context.Context, e ledger.Entry) (ledger.Outcome, error) {
	if g.w.chat.sentWithKey(e.IdempotencyKey()) {
		return ledger.OutcomeCommitted, nil
	}
	return ledger.OutcomeNotApplied, nil
}
