package ledgerapi_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

// countingStore counts the scope documents read.
type countingStore struct {
	*memory.Store
	reads atomic.Int32
}

func (s *countingStore) Read(ctx context.Context, scope string) ([]byte, error) {
	s.reads.Add(1)
	return s.Store.Read(ctx, scope)
}

// Recent conversations are listed newest first by their newest event, a
// page at a time with a cursor that neither repeats nor skips one, with
// their waiting events and runs; the prefix and source filters narrow the
// list, and a page reads only the scopes it goes through.
func TestConversationsNewestFirst(t *testing.T) {
	clk := newClock()
	cs := &countingStore{Store: memory.New(clk.Now)}
	e := newEnv(t, cs)
	e.clock = clk
	ctx := context.Background()
	enqueue := func(scope, source, id string) {
		t.Helper()
		_, err := e.ledger.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: source, EventID: id, Scope: scope, Body: []byte(`{}`), ReceivedAt: clk.Now()},
			Run:   ledger.RunOptions{RunID: source + ":" + id, Mode: ledger.ModeIndependent},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": source, "eventId": id}}, PendingTTL: time.Minute},
		})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	enqueue("chat:a", "slack", "m1")
	enqueue("chat:b", "slack", "m2")
	enqueue("gh:x", "gh", "g1")
	enqueue("chat:a", "slack", "m3") // chat:a is the newest again
	enqueue("chat:c", "gh", "g2")
	// m1 delivered: chat:a holds two events, one of them waiting.
	q, err := e.ledger.Queue().FindDelivery(ctx, "chat:a", "slack", "m1")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := e.ledger.Queue().TakeDelivery(ctx, "chat:a", q.EntryID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ledger.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}); err != nil {
		t.Fatal(err)
	}

	list := func(req ledgerapi.ConversationsRequest) string {
		t.Helper()
		var pages []string
		for range 10 {
			p, err := e.client.Conversations(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var line []string
			for _, c := range p.Conversations {
				line = append(line, c.Scope+"="+c.Last.EventID)
			}
			pages = append(pages, strings.Join(line, ","))
			if p.Next == "" {
				return strings.Join(pages, "|")
			}
			req.Cursor = p.Next
		}
		t.Fatal("paging never ended")
		return ""
	}
	if got := list(ledgerapi.ConversationsRequest{Size: 2}); got != "chat:c=g2,chat:a=m3|gh:x=g1,chat:b=m2" {
		t.Fatalf("pages of 2: %q", got)
	}
	if got := list(ledgerapi.ConversationsRequest{Prefix: "chat:"}); got != "chat:c=g2,chat:a=m3,chat:b=m2" {
		t.Fatalf("prefix chat: %q", got)
	}
	if got := list(ledgerapi.ConversationsRequest{Source: "gh"}); got != "chat:c=g2,gh:x=g1" {
		t.Fatalf("source gh: %q", got)
	}
	p, err := e.client.Conversations(ctx, ledgerapi.ConversationsRequest{Prefix: "chat:a"})
	if err != nil || len(p.Conversations) != 1 {
		t.Fatalf("chat:a: %+v %v", p, err)
	}
	if c := p.Conversations[0]; c.Events != 2 || c.Waiting != 1 || c.Runs != 2 || c.Last.Status != "queued" || !c.LastAt.Equal(c.Last.ReceivedAt) {
		t.Fatalf("chat:a: %+v", c)
	}
	// The prefix rules scopes out without reading them: one read for
	// chat:a, none for the four others.
	before := cs.reads.Load()
	if _, err := e.client.Conversations(ctx, ledgerapi.ConversationsRequest{Prefix: "chat:a"}); err != nil {
		t.Fatal(err)
	}
	if n := cs.reads.Load() - before; n != 1 {
		t.Fatalf("a prefix matching one scope read %d documents, want 1", n)
	}
	// limit bounds the index entries a page goes through; next goes on.
	p, err = e.client.Conversations(ctx, ledgerapi.ConversationsRequest{Prefix: "chat:b", Limit: 2})
	if err != nil || len(p.Conversations) != 0 || !p.Partial || p.Scanned != 2 || p.Next == "" {
		t.Fatalf("limit 2: %+v %v", p, err)
	}
	if got := list(ledgerapi.ConversationsRequest{Prefix: "chat:b", Limit: 2, Cursor: p.Next}); got != "chat:b=m2" {
		t.Fatalf("after the partial page: %q", got)
	}
	if status, body := e.call(t, "GET", "/v1/conversations?cursor=eA", bearer, ""); status != 400 || errorCode(body) != ledgerapi.CodeInvalidRequest {
		t.Fatalf("malformed cursor: %d %v", status, body)
	}
}
