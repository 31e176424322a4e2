package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// IntentReply is the ledger intent of a customer-visible reply.
const IntentReply = "reply"

// Event is what the chat provider's webhook says; the agent needs only the
// conversation, because it re-reads the conversation instead of trusting a
// payload that may be stale by the time it arrives.
type Event struct {
	Type           string `json:"type"`
	ConversationID string `json:"conversation_id"`
}

// Config wires an Agent. Ledger, Chat and SigningSecret are required
// (SigningSecret may be empty only with AllowUnsigned, for local trials).
type Config struct {
	Ledger ledgerapi.Ledger
	Chat   Chat
	// SigningSecret is the gateway's forward.signing_secret ("whsec_...").
	SigningSecret string
	AllowUnsigned bool
	// Tolerance bounds the age of the webhook-timestamp (default 5 min).
	Tolerance time.Duration
	// Budget bounds the work for one event, waits included (default 5 s).
	// Keep it below the gateway's forward timeout, so the gateway hears
	// the answer instead of timing out and redelivering.
	Budget time.Duration
	// Poll is how often the agent looks again at another run's pending
	// reply (default 50 ms).
	Poll   time.Duration
	Clock  func() time.Time
	Logger *zap.Logger
}

// Agent answers forwarded chat events with exactly one reply per customer
// message. It is an http.Handler for the gateway's forward.url.
type Agent struct {
	cfg Config
	wh  *svix.Webhook
	log *zap.Logger
}

// New checks cfg and returns the agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Ledger == nil || cfg.Chat == nil {
		return nil, errors.New("agent: a ledger and a chat are required")
	}
	a := &Agent{cfg: cfg, log: cfg.Logger}
	if cfg.SigningSecret == "" && !cfg.AllowUnsigned {
		return nil, errors.New("agent: a signing secret is required (the gateway's forward.signing_secret)")
	}
	if cfg.SigningSecret != "" {
		wh, err := svix.NewWebhook(cfg.SigningSecret)
		if err != nil {
			return nil, fmt.Errorf("agent: signing secret: %w", err)
		}
		a.wh = wh
	}
	if a.cfg.Tolerance <= 0 {
		a.cfg.Tolerance = 5 * time.Minute
	}
	if a.cfg.Budget <= 0 {
		a.cfg.Budget = 5 * time.Second
	}
	if a.cfg.Poll <= 0 {
		a.cfg.Poll = 50 * time.Millisecond
	}
	if a.cfg.Clock == nil {
		a.cfg.Clock = time.Now
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	return a, nil
}

// Delivery is one forwarded event, as the gateway's headers describe it.
type Delivery struct {
	Scope, RunID string
	Token        uint64
	Delivery     int
	Event        Event
	// Covers is how many events this delivery stands for when the
	// gateway debounced a burst (forward.debounce; Replyonce-Covers), 1
	// otherwise; CoveredIDs lists their event ids, oldest first. The agent
	// needs neither to answer the burst (it reads the conversation and
	// answers every unanswered message in one reply); it reports them.
	Covers     int
	CoveredIDs []string
}

// Outcome is what handling one delivery came to.
type Outcome struct {
	Status int    // the answer to the gateway
	What   string // for the log and the response body
}

// maxRounds bounds how often one delivery re-reads and decides again.
const maxRounds = 5

// ServeHTTP verifies, parses and handles one forwarded event. Its status
// tells the gateway what to do: 2xx done (replied, nothing to reply, or a
// newer delivery owns the work), 401/400 never again, 503 try again later.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := a.verify(body, r.Header); err != nil {
		a.log.Warn("forwarded event rejected", zap.Error(err))
		http.Error(w, "signature verification failed", http.StatusUnauthorized)
		return
	}
	if r.Header.Get(forward.HeaderNotice) == "cancel" {
		// forward.cancel: notify. A newer message superseded a run this
		// agent may be working on. Nothing to do: the ledger refuses that
		// run's reply anyway, and the newer run answers for the
		// conversation. A busier agent would stop its model call here.
		a.log.Info("cancellation notice", zap.String("scope", r.Header.Get(forward.HeaderScope)),
			zap.String("run_id", r.Header.Get(forward.HeaderRunID)))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	d, err := parseDelivery(r.Header, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The work outlives the gateway's connection: if the gateway times out
	// and hangs up mid-send, the reply still finishes and is settled, so
	// the redelivery finds it done instead of ambiguous.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.cfg.Budget)
	defer cancel()
	out := a.Handle(ctx, d)
	a.log.Info("event handled", zap.String("scope", d.Scope), zap.String("run_id", d.RunID),
		zap.Int("delivery", d.Delivery), zap.Int("covers", d.Covers), zap.Int("status", out.Status), zap.String("outcome", out.What))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(out.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"outcome": out.What})
}

// verify checks the gateway's Standard Webhooks signature, judging the
// timestamp on the agent's own clock.
func (a *Agent) verify(body []byte, h http.Header) error {
	if a.wh == nil {
		return nil
	}
	if err := a.wh.VerifyIgnoringTimestamp(body, h); err != nil {
		return fmt.Errorf("agent: signature: %w", err)
	}
	ts, err := strconv.ParseInt(h.Get(forward.HeaderWebhookTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("agent: webhook-timestamp: %w", err)
	}
	if age := a.cfg.Clock().Sub(time.Unix(ts, 0)); age > a.cfg.Tolerance || age < -a.cfg.Tolerance {
		return fmt.Errorf("agent: webhook-timestamp is %s away from now", age.Round(time.Second))
	}
	return nil
}

func parseDelivery(h http.Header, body []byte) (Delivery, error) {
	d := Delivery{Scope: h.Get(forward.HeaderScope), RunID: h.Get(forward.HeaderRunID)}
	if d.Scope == "" || d.RunID == "" {
		return d, errors.New("missing Replyonce-Scope or Replyonce-Run-Id: is this from the gateway?")
	}
	var err error
	if d.Token, err = strconv.ParseUint(h.Get(forward.HeaderFencingToken), 10, 64); err != nil || d.Token == 0 {
		return d, errors.New("missing or malformed Replyonce-Fencing-Token")
	}
	d.Delivery, _ = strconv.Atoi(h.Get(forward.HeaderDelivery))
	d.Covers = 1
	if v := h.Get(forward.HeaderCovers); v != "" {
		if d.Covers, d.CoveredIDs, err = forward.ParseCovers(v); err != nil {
			return d, err
		}
	}
	if err := json.Unmarshal(body, &d.Event); err != nil || d.Event.ConversationID == "" {
		return d, errors.New("body is not a chat event with a conversation_id")
	}
	return d, nil
}

// Handle does the work for one delivery: read the conversation, decide
// which customer messages still need an answer, and send one reply for
// them through the ledger, fenced on the delivery's run and token.
//
// The gateway already began the run when it claimed the delivery, so the
// agent takes a handle on that run with the forwarded token (RunRef) rather
// than beginning it again: a Begin here would be a new delivery that fences
// the gateway's own, and a stale redelivery would fence a fresh one. With
// the forwarded token, a later delivery of the same event, or a run for a
// newer message, makes this delivery's writes refusable.
func (a *Agent) Handle(ctx context.Context, d Delivery) Outcome {
	run := a.cfg.Ledger.RunRef(d.Scope, d.RunID, d.Token)
	alive, err := run.Heartbeat(ctx)
	switch {
	case errors.Is(err, ledger.ErrUnknownRun):
		return Outcome{http.StatusBadRequest, "unknown run: not begun by the gateway"}
	case err != nil:
		return Outcome{http.StatusServiceUnavailable, "ledger: " + err.Error()}
	case !alive:
		return Outcome{http.StatusOK, "run no longer writable (superseded, ended or cancelled): nothing for this delivery to do"}
	}

	for range maxRounds {
		conv, err := a.cfg.Chat.Conversation(ctx, d.Event.ConversationID)
		if err != nil {
			return Outcome{http.StatusServiceUnavailable, err.Error()}
		}
		answers := conv.Unanswered()
		if len(answers) == 0 {
			return Outcome{http.StatusOK, "nothing to answer"}
		}
		text := compose(conv, answers)
		res, err := run.Once(ctx, IntentReply, map[string]any{"answers": answers},
			func(ctx context.Context, call ledger.Call) (any, error) {
				id, err := a.cfg.Chat.Reply(ctx, d.Event.ConversationID, answers, text, call.IdempotencyKey)
				if err != nil {
					return nil, err
				}
				return map[string]string{"message_id": id}, nil
			},
			// Replies conflict with replies: the gateway's own deliver
			// records on the scope are not conversation content.
			ledger.OnceOptions{Summary: text, Conflict: ledger.ConflictSameIntent, Wait: a.waitLeft(ctx)})
		if err != nil {
			return Outcome{http.StatusServiceUnavailable, "ledger: " + err.Error()}
		}
		switch {
		case res.OK():
			if err := run.End(ctx, "answered"); err != nil {
				a.log.Warn("could not end the run", zap.Error(err))
			}
			what := fmt.Sprintf("%s reply to %s", res.Status, strings.Join(answers, ","))
			if d.Covers > 1 {
				what += fmt.Sprintf(" (one delivery for a burst of %d events)", d.Covers)
			}
			return Outcome{http.StatusOK, what}
		case res.Status == ledger.StatusRefused && res.Reason == ledger.ReasonConversationChanged:
			// Another run's reply is pending or landed since this run's
			// context. Let pending ones finish, then read again and decide
			// again; the refusal acknowledged them, so the next claim
			// goes through unless something new happened.
			if err := a.awaitSettled(ctx, d.Scope, res.Conflicts); err != nil {
				return Outcome{http.StatusServiceUnavailable, err.Error()}
			}
			continue
		case res.Status == ledger.StatusRefused && (res.Reason == ledger.ReasonSuperseded ||
			res.Reason == ledger.ReasonRunEnded || res.Reason == ledger.ReasonRunCancelled):
			return Outcome{http.StatusOK, "refused " + string(res.Reason) + ": not this delivery's to answer"}
		case res.Status == ledger.StatusAmbiguous:
			// Never repeated blindly: an operator resolves it
			// (gateway ledger ambiguous / resolve).
			return Outcome{http.StatusOK, "reply outcome unknown; left for an operator"}
		case res.Status == ledger.StatusRefused && res.Reason == ledger.ReasonExhausted:
			return Outcome{http.StatusOK, "reply failed too often; giving up"}
		default:
			// in_flight past the wait, or failed (known not sent): the
			// gateway redelivers later.
			return Outcome{http.StatusServiceUnavailable, "reply " + string(res.Status)}
		}
	}
	return Outcome{http.StatusServiceUnavailable, "the conversation kept changing; try again later"}
}

// waitLeft is how long Once may wait for an in-flight attempt of the same
// reply: most of what is left of the budget.
func (a *Agent) waitLeft(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return a.cfg.Budget / 2
	}
	return max(time.Until(dl)-100*time.Millisecond, 0)
}

// awaitSettled waits until none of the conflicting entries is pending.
func (a *Agent) awaitSettled(ctx context.Context, scope string, conflicts []ledger.Entry) error {
	pending := map[string]bool{}
	for _, e := range conflicts {
		if e.State == ledger.StatePending {
			pending[e.ID] = true
		}
	}
	for len(pending) > 0 {
		t := time.NewTimer(a.cfg.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("another run's reply is still pending: %w", ctx.Err())
		case <-t.C:
		}
		hist, err := a.cfg.Ledger.History(ctx, scope)
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		still := map[string]bool{}
		for _, e := range hist {
			if pending[e.ID] && e.State == ledger.StatePending {
				still[e.ID] = true
			}
		}
		pending = still
	}
	return nil
}

// compose writes the reply. A real agent would ask a model; this one is
// deterministic so tests can read it.
func compose(conv Conversation, answers []string) string {
	var quoted []string
	want := map[string]bool{}
	for _, id := range answers {
		want[id] = true
	}
	for _, m := range conv.Messages {
		if want[m.ID] {
			quoted = append(quoted, strconv.Quote(m.Text))
		}
	}
	return "Thanks, we got " + strings.Join(quoted, " and ") + "; a person will follow up."
}
