package ledgerapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// Recent conversations: the scopes that received an event, newest first,
// one line each, for the console's Conversations page. A page walks the
// received index and reads only the scopes it lists (and those a filter
// skips, at most limit of them), never every scope.

// ConversationJSON is one conversation (scope) in the recent list.
type ConversationJSON struct {
	Scope string `json:"scope"`
	// Last is the newest event the scope holds (of the source asked
	// for, with one), and LastAt when it was received.
	Last   DeliveryItemJSON `json:"last"`
	LastAt time.Time        `json:"last_at"`
	// Events is how many events the scope holds (of the source, with
	// one); Waiting how many of them are queued or being delivered.
	Events  int `json:"events"`
	Waiting int `json:"waiting"`
	// Runs is how many runs the scope holds; LiveRuns how many of them
	// may still write.
	Runs     int `json:"runs"`
	LiveRuns int `json:"live_runs"`
}

// ConversationsPageJSON answers GET /v1/conversations.
type ConversationsPageJSON struct {
	Conversations []ConversationJSON `json:"conversations"`
	// Next continues after the last scope read; empty when the index is
	// exhausted.
	Next string `json:"next,omitempty"`
	// Scanned is how many scopes of the index the page went through
	// (a scope the prefix rules out is not read); Partial says the limit
	// on them stopped it before it filled up (Next goes on).
	Scanned int  `json:"scanned"`
	Partial bool `json:"partial,omitempty"`
}

// ConversationsRequest asks for one page of recent conversations.
type ConversationsRequest struct {
	Prefix string // only scopes starting with it
	Source string // only scopes holding an event of this source
	Size   int    // conversations per page; default 50, at most 500
	Limit  int    // scopes of the index one page goes through at most; default 1000
	Cursor string // from the previous page's Next
}

const conversationsCursorTag = "c1"

func conversationsCursor(at ledger.ScopeAt) string {
	return base64.RawURLEncoding.EncodeToString([]byte(conversationsCursorTag + "|" + at.At.UTC().Format(time.RFC3339Nano) + "|" + at.Scope))
}

func parseConversationsCursor(s string) (ledger.ScopeAt, error) {
	bad := fmt.Errorf("%w: cursor %q is not one this API gave", ledger.ErrInvalid, s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ledger.ScopeAt{}, bad
	}
	parts := strings.SplitN(string(b), "|", 3)
	if len(parts) != 3 || parts[0] != conversationsCursorTag {
		return ledger.ScopeAt{}, bad
	}
	at, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return ledger.ScopeAt{}, bad
	}
	return ledger.ScopeAt{Scope: parts[2], At: at}, nil
}

func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s must be an integer from %d to %d", ledger.ErrInvalid, name, lo, hi)
	}
	return n, nil
}

// conversationOf summarizes one scope; ok is false when it holds no event
// of source (or none at all: the index may name a scope whose events have
// expired since).
func conversationOf(c ledger.Conversation, source string) (ConversationJSON, bool) {
	out := ConversationJSON{Scope: c.Scope, Runs: len(c.Runs)}
	for _, r := range c.Runs {
		if r.Fenced == "" {
			out.LiveRuns++
		}
	}
	var last *ledger.QueueItem
	for i := range c.Queue {
		q := &c.Queue[i]
		if source != "" && q.Source != source {
			continue
		}
		out.Events++
		if q.Status == ledger.DeliveryQueued || q.Status == ledger.DeliveryDelivering {
			out.Waiting++
		}
		if last == nil || q.ReceivedAt.After(last.ReceivedAt) || q.ReceivedAt.Equal(last.ReceivedAt) && q.EntryID > last.EntryID {
			last = q
		}
	}
	if last == nil {
		return out, false
	}
	out.Last, out.LastAt = itemJSON(*last), utc(last.ReceivedAt)
	return out, true
}

// conversations serves GET /v1/conversations.
func (s *server) conversations(r *http.Request) (any, error) {
	q := r.URL.Query()
	size, err := intParam(q, "page", 50, 1, maxPage)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(q, "limit", 1000, 1, 10000)
	if err != nil {
		return nil, err
	}
	var pos ledger.ScopeAt
	if v := q.Get("cursor"); v != "" {
		if pos, err = parseConversationsCursor(v); err != nil {
			return nil, err
		}
	}
	prefix, source := q.Get("prefix"), q.Get("source")
	if err := checkName("prefix", prefix); err != nil {
		return nil, err
	}
	out := ConversationsPageJSON{Conversations: []ConversationJSON{}}
	// more says whether the index goes on after pos, so that the last
	// page has no Next rather than leading to an empty one.
	more := func(rest int) (bool, error) {
		if rest > 0 {
			return true, nil
		}
		next, err := s.l.Views().ScopesReceived(r.Context(), pos, 1)
		return len(next) > 0, err
	}
	for out.Scanned < limit {
		batch, err := s.l.Views().ScopesReceived(r.Context(), pos, min(64, limit-out.Scanned))
		if err != nil {
			return nil, err
		}
		if len(batch) == 0 {
			return out, nil
		}
		for i, at := range batch {
			pos = at
			out.Scanned++
			if strings.HasPrefix(at.Scope, prefix) { // other scopes are skipped unread
				c, err := s.l.Views().Conversation(r.Context(), at.Scope)
				if err != nil {
					return nil, err
				}
				if sum, ok := conversationOf(c, source); ok {
					out.Conversations = append(out.Conversations, sum)
				}
			}
			if len(out.Conversations) == size || out.Scanned == limit {
				goesOn, err := more(len(batch) - i - 1)
				if err != nil {
					return nil, err
				}
				if goesOn {
					out.Next, out.Partial = conversationsCursor(pos), len(out.Conversations) < size
				}
				return out, nil
			}
		}
	}
	return out, nil
}

// Conversations lists one page of recent conversations, newest first.
func (c *Client) Conversations(ctx context.Context, req ConversationsRequest) (ConversationsPageJSON, error) {
	q := url.Values{}
	for k, v := range map[string]string{"prefix": req.Prefix, "source": req.Source, "cursor": req.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if req.Size > 0 {
		q.Set("page", strconv.Itoa(min(req.Size, maxPage)))
	}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	var out ConversationsPageJSON
	err := c.do(ctx, http.MethodGet, "/v1/conversations?"+q.Encode(), nil, &out)
	return out, err
}
