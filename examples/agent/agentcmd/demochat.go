package agentcmd

// The built-in demo chat (--chat builtin) is a local-trial convenience, not
// part of the agent: it lets `go run ./examples/agent` answer events sent
// with `gateway send` without a chat provider.
//
// A real chat platform already holds the customer message it sends a
// webhook about, and the agent reads it from there. `gateway send` only
// sends the webhook, so the demo chat learns the message from the event
// itself ({"conversation_id", "message_id", "text"}) just before the agent
// handles it. The agent's own logic is the same as against any provider: it
// verifies, reads the conversation over HTTP and replies through the ledger.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/examples/agent/fakechat"
)

// demoChat is a fakechat served on a loopback port of its own.
type demoChat struct {
	chat *fakechat.Chat
	url  string
	srv  *http.Server
	done chan error
	log  *zap.Logger
}

func startDemoChat(log *zap.Logger) (*demoChat, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo chat: %w", err)
	}
	d := &demoChat{chat: fakechat.New(nil), url: "http://" + ln.Addr().String(), done: make(chan error, 1),
		log: log.Named("demo-chat")}
	d.chat.OnReply = func(conv string, m fakechat.Message) {
		d.log.Info("demo chat: reply received", zap.String("conversation", conv),
			zap.Strings("answers", m.Answers), zap.String("text", m.Text))
	}
	d.srv = &http.Server{Handler: d.chat.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { d.done <- d.srv.Serve(ln) }()
	d.log.Warn("built-in demo chat for local trials: it learns each customer message from the forwarded event; "+
		"pass --chat URL to use a chat provider", zap.String("url", d.url))
	return d, nil
}

func (d *demoChat) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
	<-d.done
}

// front records the event's customer message in the demo chat, when the
// event is signed with the gateway's forward secret, and hands the request
// on to the agent unchanged.
func (d *demoChat) front(next http.Handler, secret string) (http.Handler, error) {
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("demo chat: signing secret: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
			if err != nil {
				http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			// Unsigned or forged requests teach the chat nothing; the agent
			// rejects them itself.
			if wh.Verify(body, r.Header) == nil {
				d.learn(body)
			}
		}
		next.ServeHTTP(w, r)
	}), nil
}

func (d *demoChat) learn(body []byte) {
	var ev struct {
		ConversationID string `json:"conversation_id"`
		MessageID      string `json:"message_id"`
		Text           string `json:"text"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ConversationID == "" || ev.MessageID == "" {
		d.log.Info("demo chat: the event names no customer message (conversation_id, message_id, text); nothing recorded")
		return
	}
	if _, added := d.chat.CustomerSaid(ev.ConversationID, ev.MessageID, ev.Text); added {
		d.log.Info("demo chat: customer message recorded from the event", zap.String("conversation", ev.ConversationID),
			zap.String("message_id", ev.MessageID), zap.String("text", ev.Text))
	}
}
