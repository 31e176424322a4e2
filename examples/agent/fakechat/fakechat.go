package fakechat

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Message is one message in a conversation: a customer's, or an agent
// reply that answers some of them.
type Message struct {
	ID             string    `json:"id"`
	From           string    `json:"from"` // customer | agent
	Text           string    `json:"text"`
	SentAt         time.Time `json:"sent_at"`
	Answers        []string  `json:"answers,omitempty"`         // agent replies: the customer messages answered
	IdempotencyKey string    `json:"idempotency_key,omitempty"` // agent replies: as sent, not honoured
}

// Conversation is what GET /conversations/{id} returns.
type Conversation struct {
	ID       string    `json:"id"`
	Messages []Message `json:"messages"`
}

// ReplyRequest is the body of POST /conversations/{id}/replies.
type ReplyRequest struct {
	Answers []string `json:"answers"`
	Text    string   `json:"text"`
}

// Chat is the fake provider. Use Handler to serve it.
type Chat struct {
	now func() time.Time
	// BeforeReply, when set, runs before a reply is stored, outside the
	// lock; tests use it to hold a reply "mid-answer". Set it before
	// serving.
	BeforeReply func(conversation string, answers []string)
	// OnReply, when set, runs after a reply is stored, outside the lock
	// (the agent's built-in trial mode logs each reply with it). Set it
	// before serving.
	OnReply func(conversation string, reply Message)

	mu    sync.Mutex
	convs map[string]*Conversation
	seq   int
}

// New returns an empty chat. A nil clock uses time.Now.
func New(clock func() time.Time) *Chat {
	if clock == nil {
		clock = time.Now
	}
	return &Chat{now: clock, convs: map[string]*Conversation{}}
}

// CustomerSays adds a customer message and returns it.
func (c *Chat) CustomerSays(conversation, text string) Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	m := Message{ID: "m" + strconv.Itoa(c.seq), From: "customer", Text: text, SentAt: c.now().UTC()}
	conv := c.conv(conversation)
	conv.Messages = append(conv.Messages, m)
	return m
}

// CustomerSaid adds the customer message with the given id unless the
// conversation already holds it, and reports whether it added it. A real
// provider holds the message before it sends a webhook about it; this lets a
// stand-in learn it from the webhook instead.
func (c *Chat) CustomerSaid(conversation, id, text string) (Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	conv := c.conv(conversation)
	for _, m := range conv.Messages {
		if m.ID == id {
			return m, false
		}
	}
	m := Message{ID: id, From: "customer", Text: text, SentAt: c.now().UTC()}
	conv.Messages = append(conv.Messages, m)
	return m, true
}

func (c *Chat) conv(id string) *Conversation {
	conv := c.convs[id]
	if conv == nil {
		conv = &Conversation{ID: id}
		c.convs[id] = conv
	}
	return conv
}

// RepliesPer counts, for every customer message, the agent replies that
// answer it. Exactly one each is the goal.
func (c *Chat) RepliesPer() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, conv := range c.convs {
		for _, m := range conv.Messages {
			if m.From == "customer" {
				out[m.ID] += 0
			}
			for _, a := range m.Answers {
				out[a]++
			}
		}
	}
	return out
}

// Replies returns every agent reply, in order.
func (c *Chat) Replies() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Message
	for _, conv := range c.convs {
		for _, m := range conv.Messages {
			if m.From == "agent" {
				out = append(out, m)
			}
		}
	}
	return out
}

// Handler serves GET /conversations/{id} and POST /conversations/{id}/replies.
func (c *Chat) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /conversations/{id}", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		conv := c.conv(r.PathValue("id"))
		snapshot := Conversation{ID: conv.ID, Messages: slices.Clone(conv.Messages)}
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, snapshot)
	})
	mux.HandleFunc("POST /conversations/{id}/replies", func(w http.ResponseWriter, r *http.Request) {
		var req ReplyRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || len(req.Answers) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "a reply needs answers"})
			return
		}
		id := r.PathValue("id")
		if c.BeforeReply != nil {
			c.BeforeReply(id, req.Answers)
		}
		c.mu.Lock()
		c.seq++
		m := Message{ID: "r" + strconv.Itoa(c.seq), From: "agent", Text: req.Text, SentAt: c.now().UTC(),
			Answers: req.Answers, IdempotencyKey: r.Header.Get("Idempotency-Key")}
		conv := c.conv(id)
		conv.Messages = append(conv.Messages, m)
		c.mu.Unlock()
		if c.OnReply != nil {
			c.OnReply(id, m)
		}
		writeJSON(w, http.StatusCreated, m)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
