package agentcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/examples/agent/fakechat"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	)
}

const forwardSecret = "whsec_Zm9yd2FyZC1zZWNyZXQtZm9yLXRoZS1hZ2VudA=="

func start(t *testing.T, args []string, getenv func(string) string) (Addrs, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan Addrs, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, args, getenv, func(a Addrs) { addrs <- a }) }()
	select {
	case a := <-addrs:
		return a, cancel, done
	case err := <-done:
		cancel()
		t.Fatalf("Run stopped: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("agent did not start")
	}
	return Addrs{}, cancel, done
}

func TestRunServesUntilCancelled(t *testing.T) {
	getenv := func(k string) string {
		if k == "FORWARD_SIGNING_SECRET" {
			return forwardSecret
		}
		return ""
	}
	for name, args := range map[string][]string{
		"chat provider": {"--listen", "127.0.0.1:0", "--chat", "http://127.0.0.1:9100"},
		"built-in chat": {"--listen", "127.0.0.1:0"},
	} {
		t.Run(name, func(t *testing.T) {
			a, cancel, done := start(t, args, getenv)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get("http://" + a.Listen + "/events")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("GET: %d", resp.StatusCode)
			}
			if name == "built-in chat" {
				resp, err := (&http.Client{Transport: tr}).Get(a.Chat + "/conversations/c1")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("demo chat GET: %d", resp.StatusCode)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run returned %v", err)
			}
		})
	}
}

func TestRunNeedsASigningSecret(t *testing.T) {
	for _, chat := range []string{"builtin", "http://127.0.0.1:9100"} {
		err := Run(context.Background(), []string{"--listen", "127.0.0.1:0", "--chat", chat}, func(string) string { return "" }, nil)
		if err == nil {
			t.Fatalf("--chat %s: started without a signing secret", chat)
		}
	}
}

// The --signing-secret flag is the secret when given, over the variable.
func TestSigningSecretFlag(t *testing.T) {
	_, cancel, done := start(t, []string{"--listen", "127.0.0.1:0", "--signing-secret", forwardSecret},
		func(k string) string { return map[string]string{"FORWARD_SIGNING_SECRET": "not a secret"}[k] })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The demo chat learns a customer message only from a correctly signed
// event, once however often the event comes, and always hands the request on.
func TestDemoChatLearnsSignedEventsOnce(t *testing.T) {
	d := &demoChat{chat: fakechat.New(nil), log: zap.NewNop()}
	seen := 0
	h, err := d.front(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen++ }), forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"type": "message.created", "conversation_id": "c1", "message_id": "evt_1", "text": "hi"})
	post := func(secret string) {
		wh, _ := svix.NewWebhook(secret)
		now := time.Now()
		sig, _ := wh.Sign("evt_1", now, body)
		r := httptest.NewRequest(http.MethodPost, "/events", bytes.NewReader(body))
		r.Header.Set("webhook-id", "evt_1")
		r.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		r.Header.Set("webhook-signature", sig)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	post("whsec_b3RoZXItc2VjcmV0LW5vdC10aGUtZm9yd2FyZC1vbmU=")
	if n := len(d.chat.RepliesPer()); n != 0 || seen != 1 {
		t.Fatalf("a wrongly signed event: %d customer messages recorded, %d handed on", n, seen)
	}
	post(forwardSecret)
	post(forwardSecret)
	if got := d.chat.RepliesPer(); len(got) != 1 || seen != 3 {
		t.Fatalf("signed event twice: customer messages %v, %d handed on", got, seen)
	}
}
