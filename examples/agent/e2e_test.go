package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/replyonce/gateway/examples/agent/agent"
	"github.com/replyonce/gateway/examples/agent/fakechat"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	)
}

const (
	providerSecret = "whsec_cHJvdmlkZXItc2VjcmV0LWZvci10aGUtZTJl"
	forwardSecret  = "whsec_Zm9yd2FyZC1zZWNyZXQtZm9yLXRoZS1hZ2VudA=="
	adminToken     = "admin-token-e2e"
)

// stack is provider → gateway → agent → chat, all in this process: the
// gateway is built from the same packages `gateway serve` wires (ingress,
// ledger, forward) with the ledger API mounted as on its admin listener.
type stack struct {
	chat    *fakechat.Chat
	ledger  *ledger.Ledger
	gateway *httptest.Server
	signer  signatures.Signer
	faults  *faults
	spy     *spy
	client  *http.Client
}

func newStack(t *testing.T) *stack { return newStackWith(t, 5*time.Second) }

// newStackWith builds the stack with the gateway's forward timeout.
func newStackWith(t *testing.T, forwardTimeout time.Duration) *stack {
	t.Helper()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	s := &stack{chat: fakechat.New(nil), faults: &faults{answers: map[string][]int{}}, spy: &spy{}}
	chatSrv := httptest.NewServer(s.chat.Handler())
	t.Cleanup(chatSrv.Close)

	s.ledger = ledger.New(memory.New(nil), ledger.Options{})
	admin := httptest.NewServer(ledgerapi.NewHandler(s.ledger, adminToken, log.Named("ledgerapi")))
	t.Cleanup(admin.Close)

	api, err := ledgerapi.NewClient(admin.URL, adminToken, admin.Client())
	if err != nil {
		t.Fatal(err)
	}
	s.spy.Ledger = ledgerapi.Remote(api)
	a, err := agent.New(agent.Config{Ledger: s.spy, Chat: agent.NewHTTPChat(chatSrv.URL, chatSrv.Client()),
		SigningSecret: forwardSecret, Budget: 3 * time.Second, Poll: 10 * time.Millisecond, Logger: log.Named("agent")})
	if err != nil {
		t.Fatal(err)
	}
	s.faults.next = a
	agentSrv := httptest.NewServer(s.faults)
	t.Cleanup(agentSrv.Close)

	src, err := ingress.NewSource(ingress.SourceConfig{
		Name: "chat", Provider: "standard-webhooks",
		Signature: signatures.Config{Secrets: []string{providerSecret}},
		Scope:     []string{"{json:conversation_id}"},
		ContextAt: []string{"{json:sent_at}"},
		Runs:      ledger.ModeSupersede,
		// Inline: this gateway runs no dispatcher.
		Forward: ingress.ForwardConfig{Target: forward.Target{URL: agentSrv.URL + "/events", Timeout: forwardTimeout, SigningSecret: forwardSecret}, Queue: dispatch.Policy{Mode: dispatch.ModeInline}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := ingress.New(ingress.Options{Sources: []*ingress.Source{src}, Ledger: s.ledger,
		Forwarder: forward.New(nil, nil), Logger: log.Named("gateway")})
	if err != nil {
		t.Fatal(err)
	}
	s.gateway = httptest.NewServer(gw)
	t.Cleanup(func() { s.gateway.Close(); gw.Wait() })

	if s.signer, err = signatures.NewSigner("standard-webhooks", signatures.Config{Secrets: []string{providerSecret}}); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	s.client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	return s
}

// event is the provider's webhook for one customer message.
func (s *stack) event(t *testing.T, conv string, m fakechat.Message) ([]byte, http.Header) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"type": "message.created", "conversation_id": conv, "message_id": m.ID,
		"sent_at": m.SentAt.Format(time.RFC3339Nano)})
	req := &signatures.Request{Method: http.MethodPost, Header: http.Header{
		"Content-Type": {"application/json"}, "Webhook-Id": {"evt_" + m.ID}}, Body: body}
	if err := s.signer.Sign(req, time.Now()); err != nil {
		t.Fatal(err)
	}
	return body, req.Header
}

// post is one delivery attempt by the provider.
func (s *stack) post(t *testing.T, body []byte, h http.Header) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, s.gateway.URL+"/hooks/chat", bytes.NewReader(body))
	req.Header = h.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		t.Errorf("provider post: %v", err)
		return 0, ""
	}
	defer resp.Body.Close()
	var answer struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer.Status
}

// deliver retries like a provider until the gateway answers 2xx, and
// returns the statuses it heard. A provider retries for hours; the test
// gives it a minute, so a slow machine is not mistaken for a lost event.
func (s *stack) deliver(t *testing.T, body []byte, h http.Header) []string {
	var heard []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		status, what := s.post(t, body, h)
		heard = append(heard, fmt.Sprintf("%d %s", status, what))
		if status >= 200 && status < 300 {
			return heard
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Errorf("the gateway never accepted the event: %v", heard)
	return heard
}

// faults sits in front of the agent and can answer a delivery with 500,
// before or after the agent did its work.
type faults struct {
	next http.Handler
	mu   sync.Mutex
	// plan maps a message id to what to do with its deliveries in turn:
	// "before" (500 without calling the agent), "after" (call the agent,
	// then answer 500 as if the process died before acknowledging).
	plan    map[string][]string
	answers map[string][]int // message id → status per delivery
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev struct {
		MessageID string `json:"message_id"`
	}
	_ = json.Unmarshal(body, &ev)
	f.mu.Lock()
	var step string
	if p := f.plan[ev.MessageID]; len(p) > 0 {
		step, f.plan[ev.MessageID] = p[0], p[1:]
	}
	f.mu.Unlock()

	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	if step != "before" {
		f.next.ServeHTTP(rec, r)
	}
	status := rec.Code
	if step != "" {
		status = http.StatusInternalServerError
	}
	f.mu.Lock()
	f.answers[ev.MessageID] = append(f.answers[ev.MessageID], status)
	f.mu.Unlock()
	w.WriteHeader(status)
	_, _ = w.Write(rec.Body.Bytes())
}

func (f *faults) setPlan(msg string, steps ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.plan == nil {
		f.plan = map[string][]string{}
	}
	f.plan[msg] = steps
}

func (f *faults) statuses(msg string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.answers[msg]...)
}

// spy watches the agent's ledger results, so a test can act at the moment
// a run is told the conversation changed.
type spy struct {
	ledgerapi.Ledger
	mu      sync.Mutex
	changed map[string]chan struct{} // run id → closed on conversation_changed
	log     []string
}

func (s *spy) onChanged(runID string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = map[string]chan struct{}{}
	}
	if s.changed[runID] == nil {
		s.changed[runID] = make(chan struct{})
	}
	return s.changed[runID]
}

func (s *spy) RunRef(scope, runID string, token uint64) ledgerapi.RunHandle {
	return &spyRun{RunHandle: s.Ledger.RunRef(scope, runID, token), spy: s, runID: runID, token: token}
}

type spyRun struct {
	ledgerapi.RunHandle
	spy   *spy
	runID string
	token uint64
}

func (r *spyRun) Once(ctx context.Context, intent string, payload any, effect ledger.Effect, opts ...ledger.OnceOptions) (ledger.Result, error) {
	res, err := r.RunHandle.Once(ctx, intent, payload, effect, opts...)
	p, _ := json.Marshal(payload)
	r.spy.mu.Lock()
	defer r.spy.mu.Unlock()
	r.spy.log = append(r.spy.log, fmt.Sprintf("%s@%d %s %s: %s %s", r.runID, r.token, intent, p, res.Status, res.Reason))
	if res.Reason == ledger.ReasonConversationChanged {
		if r.spy.changed == nil {
			r.spy.changed = map[string]chan struct{}{}
		}
		ch := r.spy.changed[r.runID]
		if ch == nil {
			ch = make(chan struct{})
			r.spy.changed[r.runID] = ch
		}
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	return res, err
}

func (s *spy) decisions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// exactlyOne fails unless every customer message has exactly one reply.
func exactlyOne(t *testing.T, s *stack, want int) {
	t.Helper()
	counts := s.chat.RepliesPer()
	if len(counts) != want {
		t.Errorf("%d customer messages, want %d: %v", len(counts), want, counts)
	}
	for msg, n := range counts {
		if n != 1 {
			t.Errorf("customer message %s has %d replies, want exactly 1", msg, n)
		}
	}
	if t.Failed() {
		for _, r := range s.chat.Replies() {
			t.Logf("reply %s answers %v: %s", r.ID, r.Answers, r.Text)
		}
		for _, d := range s.spy.decisions() {
			t.Logf("decision %s", d)
		}
	}
}

func TestDuplicateDeliveriesReplyOnce(t *testing.T) {
	s := newStack(t)
	m := s.chat.CustomerSays("conv-dup", "Where is my order?")
	body, h := s.event(t, "conv-dup", m)

	// The provider fires the same event four times at once, then once more
	// after everything settled.
	var wg sync.WaitGroup
	heard := make([][]string, 4)
	for i := range heard {
		wg.Go(func() { heard[i] = s.deliver(t, body, h) })
	}
	wg.Wait()
	status, what := s.post(t, body, h)
	if status != http.StatusOK || what != "duplicate" {
		t.Errorf("late duplicate: %d %s", status, what)
	}
	delivered := 0
	for _, hs := range heard {
		if hs[len(hs)-1] == "200 delivered" {
			delivered++
		}
	}
	if delivered != 1 {
		t.Errorf("%d deliveries answered delivered, want 1: %v", delivered, heard)
	}
	exactlyOne(t, s, 1)
	if got := s.faults.statuses(m.ID); len(got) != 1 {
		t.Errorf("the agent saw %d deliveries, want 1 (the gateway absorbs duplicates): %v", len(got), got)
	}
}

func TestRedeliveryAfterAgentFailureRepliesOnce(t *testing.T) {
	s := newStack(t)
	// conv-a: the agent replies, then answers 500 as if it crashed before
	// acknowledging; the gateway redelivers under the same run id.
	// conv-b: the agent answers 500 before doing anything.
	ma := s.chat.CustomerSays("conv-a", "Refund please")
	mb := s.chat.CustomerSays("conv-b", "Cancel my plan")
	s.faults.setPlan(ma.ID, "after")
	s.faults.setPlan(mb.ID, "before")

	var wg sync.WaitGroup
	for _, c := range []struct {
		conv string
		m    fakechat.Message
	}{{"conv-a", ma}, {"conv-b", mb}} {
		body, h := s.event(t, c.conv, c.m)
		wg.Go(func() {
			heard := s.deliver(t, body, h)
			if len(heard) < 2 || heard[0] != "503 " {
				t.Errorf("%s: the provider heard %v, want a 503 then a 2xx", c.conv, heard)
			}
		})
	}
	wg.Wait()
	exactlyOne(t, s, 2)
	// conv-b's redelivery reaches the agent; conv-a's does not: the agent
	// had ended that run after replying, so the gateway answers the
	// provider's retry as a duplicate without forwarding it again.
	want := map[string][]int{ma.ID: {500}, mb.ID: {500, 200}}
	for id, w := range want {
		if got := s.faults.statuses(id); !slices.Equal(got, w) {
			t.Errorf("agent answers for %s: %v, want %v", id, got, w)
		}
	}
	// The gateway's ledger shows the deliver entries: in conv-b the second
	// attempt went out as delivery 2 of the run and committed; in conv-a
	// the one attempt stays failed under the ended run, which can no
	// longer write.
	for _, conv := range []string{"conv-a", "conv-b"} {
		hist, _ := s.ledger.Views().History(context.Background(), conv)
		var deliver, reply int
		for _, e := range hist {
			switch e.Intent {
			case ingress.IntentDeliver:
				deliver++
				wantState := map[string]ledger.State{"conv-a": ledger.StateFailed, "conv-b": ledger.StateCommitted}[conv]
				wantAttempt := map[string]int{"conv-a": 1, "conv-b": 2}[conv]
				if e.State != wantState || e.Delivery != wantAttempt || e.Attempt != wantAttempt {
					t.Errorf("%s deliver entry: %+v", conv, e)
				}
			case agent.IntentReply:
				reply++
				if e.State != ledger.StateCommitted {
					t.Errorf("%s reply entry: %+v", conv, e)
				}
			}
		}
		if deliver != 1 || reply != 1 {
			t.Errorf("%s: %d deliver and %d reply entries", conv, deliver, reply)
		}
	}
}

// A customer's second message arrives while the agent is still sending its
// reply to the first. The newer run is told the conversation changed,
// waits for the first reply to land, reads again, and answers only the
// second message.
func TestSecondMessageMidAnswer(t *testing.T) {
	s := newStack(t)
	conv := "conv-mid"
	replying := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	s.chat.BeforeReply = func(c string, answers []string) {
		if c != conv {
			return
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(replying)
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
	}

	m1 := s.chat.CustomerSays(conv, "My card was charged twice")
	var wg sync.WaitGroup
	body1, h1 := s.event(t, conv, m1)
	wg.Go(func() { s.deliver(t, body1, h1) })
	select {
	case <-replying:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never started its first reply")
	}

	time.Sleep(2 * time.Millisecond) // a later sent_at: the second run is newer
	m2 := s.chat.CustomerSays(conv, "Also, I want to change my address")
	body2, h2 := s.event(t, conv, m2)
	run2 := "chat:evt_" + m2.ID
	changed := s.spy.onChanged(run2)
	wg.Go(func() { s.deliver(t, body2, h2) })
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Error("the second run was never told the conversation changed")
	}
	close(release)
	wg.Wait()

	exactlyOne(t, s, 2)
	replies := s.chat.Replies()
	if len(replies) != 2 || fmt.Sprint(replies[0].Answers) != "["+m1.ID+"]" || fmt.Sprint(replies[1].Answers) != "["+m2.ID+"]" {
		t.Errorf("replies: %+v", replies)
	}
	for _, r := range replies {
		if len(r.IdempotencyKey) < 4 || r.IdempotencyKey[:3] != "ro_" {
			t.Errorf("reply %s sent without the ledger's idempotency key: %q", r.ID, r.IdempotencyKey)
		}
	}
}

// A mix of everything on many conversations at once.
func TestBusyEndToEnd(t *testing.T) {
	s := newStack(t)
	const convs = 8
	var wg sync.WaitGroup
	total := 0
	for c := range convs {
		conv := "conv-busy-" + strconv.Itoa(c)
		var msgs []fakechat.Message
		for range 3 {
			msgs = append(msgs, s.chat.CustomerSays(conv, "hello"))
			time.Sleep(time.Millisecond)
		}
		total += len(msgs)
		if c%2 == 0 {
			s.faults.setPlan(msgs[0].ID, "after")
		}
		if c%3 == 0 {
			s.faults.setPlan(msgs[1].ID, "before")
		}
		for _, m := range msgs {
			body, h := s.event(t, conv, m)
			for range 2 { // every event delivered twice, concurrently
				wg.Go(func() { s.deliver(t, body, h) })
			}
		}
	}
	wg.Wait()
	exactlyOne(t, s, total)
}

// The agent is slower than the gateway's forward timeout: the gateway gives
// up on delivery 1 and redelivers while delivery 1 is still sending. The
// redelivery finds the reply in flight, waits for it, and replays it.
func TestRedeliveryWhileTheFirstDeliveryIsStillSending(t *testing.T) {
	s := newStackWith(t, 400*time.Millisecond)
	conv := "conv-slow"
	var once sync.Once
	s.chat.BeforeReply = func(c string, _ []string) {
		once.Do(func() { time.Sleep(700 * time.Millisecond) })
	}
	m := s.chat.CustomerSays(conv, "Is anyone there?")
	body, h := s.event(t, conv, m)
	heard := s.deliver(t, body, h)
	if len(heard) < 2 || heard[0] != "503 " || heard[len(heard)-1] != "200 delivered" {
		t.Errorf("the provider heard %v, want a 503 (gateway timeout) and finally 200 delivered", heard)
	}
	// Wait for the first delivery's handler, which outlives the gateway's
	// request, to settle its reply and answer (it answers after the
	// settle, so the reply alone may be seen first).
	deadline := time.Now().Add(5 * time.Second)
	var reply ledger.Entry
	for time.Now().Before(deadline) {
		hist, _ := s.ledger.Views().History(context.Background(), conv)
		for _, e := range hist {
			if e.Intent == agent.IntentReply {
				reply = e
			}
		}
		if reply.State == ledger.StateCommitted && len(s.faults.statuses(m.ID)) >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if reply.State != ledger.StateCommitted || reply.Delivery != 1 || reply.Attempt != 1 {
		t.Errorf("reply entry: %+v, want committed by delivery 1 in one attempt", reply)
	}
	exactlyOne(t, s, 1)
	decisions := s.spy.decisions()
	replayed := false
	for _, d := range decisions {
		replayed = replayed || strings.Contains(d, ": replayed")
	}
	if len(s.faults.statuses(m.ID)) < 2 || !replayed {
		t.Errorf("want a redelivery that replayed the reply; agent answers %v, decisions %v", s.faults.statuses(m.ID), decisions)
	}
}
