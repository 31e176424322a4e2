package agent_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/replyonce/gateway/examples/agent/agent"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

const secret = "whsec_Zm9yd2FyZC1zZWNyZXQtZm9yLXRoZS1hZ2VudA=="

// memChat is an in-memory Chat.
type memChat struct {
	mu   sync.Mutex
	conv agent.Conversation
	sent int
}

func (c *memChat) Conversation(context.Context, string) (agent.Conversation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return agent.Conversation{ID: c.conv.ID, Messages: append([]agent.Message(nil), c.conv.Messages...)}, nil
}

func (c *memChat) Reply(_ context.Context, _ string, answers []string, text, _ string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent++
	id := "r" + strconv.Itoa(c.sent)
	c.conv.Messages = append(c.conv.Messages, agent.Message{ID: id, From: "agent", Text: text, Answers: answers})
	return id, nil
}

type fixture struct {
	l     *ledger.Ledger
	chat  *memChat
	agent *agent.Agent
	now   time.Time
	run   *ledger.Run
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{now: time.Now(), chat: &memChat{conv: agent.Conversation{ID: "c1",
		Messages: []agent.Message{{ID: "m1", From: "customer", Text: "hi"}}}}}
	f.l = ledger.New(memory.New(nil), ledger.Options{})
	a, err := agent.New(agent.Config{Ledger: ledgerapi.InProcess(f.l), Chat: f.chat, SigningSecret: secret,
		Clock: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.agent = a
	// The gateway begins the run before it forwards.
	if f.run, err = f.l.Begin(context.Background(), "c1", ledger.RunOptions{RunID: "chat:evt_m1"}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) request(t *testing.T, body string, token uint64, signAt time.Time) *http.Request {
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := wh.Sign("evt_m1", signAt, []byte(body))
	r := httptest.NewRequest(http.MethodPost, "/events", bytes.NewReader([]byte(body)))
	r.Header.Set(forward.HeaderWebhookID, "evt_m1")
	r.Header.Set(forward.HeaderWebhookTimestamp, strconv.FormatInt(signAt.Unix(), 10))
	r.Header.Set(forward.HeaderWebhookSignature, sig)
	r.Header.Set(forward.HeaderScope, "c1")
	r.Header.Set(forward.HeaderRunID, "chat:evt_m1")
	r.Header.Set(forward.HeaderFencingToken, strconv.FormatUint(token, 10))
	r.Header.Set(forward.HeaderDelivery, "1")
	return r
}

func (f *fixture) serve(r *http.Request) int {
	w := httptest.NewRecorder()
	f.agent.ServeHTTP(w, r)
	return w.Code
}

const body = `{"type":"message.created","conversation_id":"c1"}`

func TestVerifiesTheGatewaySignature(t *testing.T) {
	f := newFixture(t)
	tampered := f.request(t, body, f.run.Token, f.now)
	tampered.Body = http.NoBody
	stale := f.request(t, body, f.run.Token, f.now.Add(-10*time.Minute))
	unsigned := f.request(t, body, f.run.Token, f.now)
	unsigned.Header.Del(forward.HeaderWebhookSignature)
	noScope := f.request(t, body, f.run.Token, f.now)
	noScope.Header.Del(forward.HeaderScope)
	unknownRun := f.request(t, body, 1, f.now)
	unknownRun.Header.Set(forward.HeaderRunID, "chat:ghost")
	for name, c := range map[string]struct {
		r    *http.Request
		want int
	}{
		"tampered body": {tampered, 401}, "stale timestamp": {stale, 401}, "unsigned": {unsigned, 401},
		"no scope header": {noScope, 400}, "unknown run": {unknownRun, 400},
	} {
		if got := f.serve(c.r); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
	if f.chat.sent != 0 {
		t.Fatalf("a rejected request replied %d times", f.chat.sent)
	}
	if got := f.serve(f.request(t, body, f.run.Token, f.now)); got != 200 || f.chat.sent != 1 {
		t.Fatalf("a good request: %d, %d replies", got, f.chat.sent)
	}
}

func TestStaleDeliveryCannotReplyInProcess(t *testing.T) {
	f := newFixture(t)
	stale := f.run.Token
	// The gateway redelivers: delivery 2 takes the run over.
	fresh, err := f.l.Begin(context.Background(), "c1", ledger.RunOptions{RunID: "chat:evt_m1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.serve(f.request(t, body, stale, f.now)); got != 200 || f.chat.sent != 0 {
		t.Fatalf("stale delivery: %d, %d replies", got, f.chat.sent)
	}
	if got := f.serve(f.request(t, body, fresh.Token, f.now)); got != 200 || f.chat.sent != 1 {
		t.Fatalf("current delivery: %d, %d replies", got, f.chat.sent)
	}
	if got := f.serve(f.request(t, body, fresh.Token, f.now)); got != 200 || f.chat.sent != 1 {
		t.Fatalf("repeat: %d, %d replies", got, f.chat.sent)
	}
}

// A debounced burst: five customer messages, one delivery covering all of
// them (Replyonce-Covers) → one reply that answers all five.
func TestBurstGetsOneReply(t *testing.T) {
	f := newFixture(t)
	f.chat.conv.Messages = nil
	var ids []string
	for i := 1; i <= 5; i++ {
		id := "m" + strconv.Itoa(i)
		ids = append(ids, "evt_"+id)
		f.chat.conv.Messages = append(f.chat.conv.Messages, agent.Message{ID: id, From: "customer", Text: "part " + strconv.Itoa(i)})
	}
	r := f.request(t, body, f.run.Token, f.now)
	r.Header.Set(forward.HeaderCovers, forward.FormatCovers(5, ids))
	w := httptest.NewRecorder()
	f.agent.ServeHTTP(w, r)
	if w.Code != 200 || f.chat.sent != 1 {
		t.Fatalf("burst: %d, %d replies; want one reply", w.Code, f.chat.sent)
	}
	reply := f.chat.conv.Messages[len(f.chat.conv.Messages)-1]
	if len(reply.Answers) != 5 || !bytes.Contains(w.Body.Bytes(), []byte("a burst of 5 events")) {
		t.Fatalf("reply answers %v; agent said %s", reply.Answers, w.Body.String())
	}
	// A cancellation notice is acknowledged and changes nothing.
	n := f.request(t, `{"type":"replyonce.cancel"}`, f.run.Token, f.now)
	n.Header.Set(forward.HeaderNotice, "cancel")
	if got := f.serve(n); got != http.StatusNoContent || f.chat.sent != 1 {
		t.Fatalf("notice: %d, %d replies", got, f.chat.sent)
	}
	bad := f.request(t, body, f.run.Token, f.now)
	bad.Header.Set(forward.HeaderCovers, "many")
	if got := f.serve(bad); got != http.StatusBadRequest {
		t.Fatalf("malformed Replyonce-Covers: %d, want 400", got)
	}
}
