package demo

import (
	"fmt"
	"strconv"
	"time"
)

// Latencies of the simulated chat API.
const (
	sendLatency = 300 * time.Millisecond
	// chatTimeout is how long the agent's HTTP client waits for the chat API
	// before giving up.
	chatTimeout = 10 * time.Second
)

// chat is the simulated support platform: conversations, the customer
// messages in them, and the replies the agent sent. It is the ground truth
// the report counts from.
type chat struct {
	clock *clock
	// order keeps conversations in creation order, so every tally walks
	// them the same way.
	order []*conversation
	convs map[string]*conversation
	// byKey finds a sent reply by the idempotency key it carried.
	byKey   map[string]*reply
	replies int
}

type conversation struct {
	id       string
	messages []*message
	replies  []*reply
}

type message struct {
	id      string
	index   int
	at      time.Time
	answers int // replies that answered it
}

type reply struct {
	id      string
	answers []string
	key     string
}

func newChat(c *clock) *chat {
	return &chat{clock: c, convs: map[string]*conversation{}, byKey: map[string]*reply{}}
}

func (c *chat) conversation(id string) *conversation {
	conv := c.convs[id]
	if conv == nil {
		conv = &conversation{id: id}
		c.convs[id] = conv
		c.order = append(c.order, conv)
	}
	return conv
}

// customerSays adds a customer message to a conversation, now.
func (c *chat) customerSays(convID string) *message {
	conv := c.conversation(convID)
	m := &message{id: convID + "-m" + strconv.Itoa(len(conv.messages)+1), index: len(conv.messages), at: c.clock.Now()}
	conv.messages = append(conv.messages, m)
	return m
}

func (c *chat) message(convID, msgID string) *message {
	conv := c.convs[convID]
	if conv == nil {
		return nil
	}
	for _, m := range conv.messages {
		if m.id == msgID {
			return m
		}
	}
	return nil
}

// toAnswer is what the agent reads before replying to msg: the delivered
// message itself, and every earlier message of the conversation that no
// reply has answered yet. The delivered message is always included: to an
// agent a webhook means "a new message to answer".
func (c *chat) toAnswer(convID, msgID string) []string {
	conv := c.convs[convID]
	if conv == nil {
		return nil
	}
	var out []string
	for _, m := range conv.messages {
		if m.id == msgID {
			return append(out, m.id)
		}
		if m.answers == 0 {
			out = append(out, m.id)
		}
	}
	return out
}

// answered reports whether some reply answered msgID.
func (c *chat) answered(convID, msgID string) bool {
	m := c.message(convID, msgID)
	return m != nil && m.answers > 0
}

// sendFault is what goes wrong with one call to the chat API.
type sendFault int

const (
	sendOK sendFault = iota
	crashBeforeSend
	crashAfterSend
	timeoutBeforeSend
	timeoutAfterSend
)

// timeoutError is the agent's HTTP client giving up on the chat API. Before
// send it is a connect timeout: the request never left, so it is known not
// to have happened. After send the request was written and the answer never
// came: the platform may well have posted the reply.
type timeoutError struct{ afterSend bool }

func (e timeoutError) Error() string {
	if e.afterSend {
		return "chat API: timed out waiting for the response"
	}
	return "chat API: timed out connecting; the request was not sent"
}

// send posts a reply answering the given messages. key is the reply's
// idempotency key, kept with the reply so that a reconciler can look it up;
// like many chat APIs, this one stores it but does not deduplicate on it.
func (c *chat) send(convID string, answers []string, key string, fault sendFault) (string, error) {
	if fault == timeoutBeforeSend {
		c.clock.Advance(chatTimeout)
		return "", timeoutError{}
	}
	c.clock.Advance(sendLatency)
	conv := c.conversation(convID)
	c.replies++
	r := &reply{id: fmt.Sprintf("reply_%d", c.replies), answers: append([]string(nil), answers...), key: key}
	conv.replies = append(conv.replies, r)
	for _, id := range answers {
		if m := c.message(convID, id); m != nil {
			m.answers++
		}
	}
	if key != "" {
		c.byKey[key] = r
	}
	if fault == timeoutAfterSend {
		c.clock.Advance(chatTimeout - sendLatency)
		return "", timeoutError{afterSend: true}
	}
	return r.id, nil
}

// sentWithKey is the reconciler's question: did a reply with this
// idempotency key reach the conversation?
func (c *chat) sentWithKey(key string) bool { return c.byKey[key] != nil }

// tally is one run's outcome as the customers saw it.
type tally struct {
	Messages, Replies, Duplicates, Unanswered int
	// UnansweredIDs lists the messages nobody answered, in order.
	UnansweredIDs []string
}

func (c *chat) tally() tally {
	var t tally
	for _, conv := range c.order {
		t.Replies += len(conv.replies)
		for _, m := range conv.messages {
			t.Messages++
			switch {
			case m.answers == 0:
				t.Unanswered++
				t.UnansweredIDs = append(t.UnansweredIDs, m.id)
			case m.answers > 1:
				t.Duplicates += m.answers - 1
			}
		}
	}
	return t
}
