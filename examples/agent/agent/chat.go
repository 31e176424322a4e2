package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// Message is one message of a conversation as the chat provider shows it.
type Message struct {
	ID      string    `json:"id"`
	From    string    `json:"from"` // customer | agent
	Text    string    `json:"text"`
	SentAt  time.Time `json:"sent_at"`
	Answers []string  `json:"answers,omitempty"`
}

// Conversation is the provider's view of one conversation.
type Conversation struct {
	ID       string    `json:"id"`
	Messages []Message `json:"messages"`
}

// Unanswered lists the customer messages no agent reply answers yet, in
// order.
func (c Conversation) Unanswered() []string {
	answered := map[string]bool{}
	for _, m := range c.Messages {
		for _, a := range m.Answers {
			answered[a] = true
		}
	}
	var out []string
	for _, m := range c.Messages {
		if m.From == "customer" && !answered[m.ID] {
			out = append(out, m.ID)
		}
	}
	return out
}

// Chat is the chat provider the agent reads and writes.
type Chat interface {
	Conversation(ctx context.Context, id string) (Conversation, error)
	// Reply posts a reply answering the given customer messages. An error
	// wrapping ledger.ErrNotApplied means the provider certainly did not
	// post it.
	Reply(ctx context.Context, conversation string, answers []string, text, idempotencyKey string) (messageID string, err error)
}

// HTTPChat is a Chat over the fake provider's HTTP API
// (examples/agent/fakechat).
type HTTPChat struct {
	base string
	hc   *http.Client
}

// NewHTTPChat returns a client for the chat at baseURL.
func NewHTTPChat(baseURL string, hc *http.Client) *HTTPChat {
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	return &HTTPChat{base: strings.TrimRight(baseURL, "/"), hc: hc}
}

// Conversation reads a conversation.
func (c *HTTPChat) Conversation(ctx context.Context, id string) (Conversation, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/conversations/"+url.PathEscape(id), nil)
	if err != nil {
		return Conversation{}, fmt.Errorf("chat: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Conversation{}, fmt.Errorf("chat: read conversation: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return Conversation{}, fmt.Errorf("chat: read conversation: status %d", resp.StatusCode)
	}
	var conv Conversation
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&conv); err != nil {
		return Conversation{}, fmt.Errorf("chat: read conversation: %w", err)
	}
	return conv, nil
}

// Reply posts a reply. A 4xx means the provider refused it (not applied);
// a transport error or a 5xx leaves it unknown.
func (c *HTTPChat) Reply(ctx context.Context, conversation string, answers []string, text, idempotencyKey string) (string, error) {
	body, _ := json.Marshal(map[string]any{"answers": answers, "text": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/conversations/"+url.PathEscape(conversation)+"/replies", bytes.NewReader(body))
	if err != nil {
		return "", ledger.NotApplied(fmt.Errorf("chat: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("chat: post reply: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return "", ledger.NotApplied(fmt.Errorf("chat: post reply: status %d", resp.StatusCode))
	case resp.StatusCode/100 != 2:
		return "", fmt.Errorf("chat: post reply: status %d", resp.StatusCode)
	}
	var m Message
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return "", fmt.Errorf("chat: post reply: posted, but the answer was unreadable: %w", err)
	}
	return m.ID, nil
}
