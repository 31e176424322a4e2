package ledgerapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// enqueue records a queued event on its own scope.
func (e *env) enqueue(t *testing.T, source, id string) {
	t.Helper()
	scope := source + ":" + id
	_, err := e.ledger.Queue().Enqueue(context.Background(), ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: source, EventID: id, Scope: scope, Body: []byte(`{}`), ReceivedAt: e.clock.Now()},
		Run:   ledger.RunOptions{RunID: scope, Mode: ledger.ModeIndependent},
		Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": source, "eventId": id}}, PendingTTL: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func ids(ds []ledgerapi.DeliveryItemJSON) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.EventID)
	}
	return strings.Join(out, ",")
}

// A page lists the newest first, and its cursor continues exactly where
// it stopped, with no event twice and none left out.
func TestDeliveriesPageNewestFirstWithCursor(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	start := e.clock.Now()
	for i := 1; i <= 7; i++ {
		e.enqueue(t, "gh", fmt.Sprintf("e%d", i))
		e.clock.Advance(time.Second)
	}
	e.enqueue(t, "other", "x1")
	var pages []string
	req := ledgerapi.PageRequest{DeliveryFilter: ledgerapi.DeliveryFilter{Source: "gh"}, Size: 3}
	for {
		p, err := e.client.DeliveriesPage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(p.Deliveries))
		if p.Next == "" {
			break
		}
		req.Cursor = p.Next
	}
	if got := strings.Join(pages, "|"); got != "e7,e6,e5|e4,e3,e2|e1" {
		t.Fatalf("pages %q, want e7,e6,e5|e4,e3,e2|e1", got)
	}
	p, err := e.client.DeliveriesPage(ctx, ledgerapi.PageRequest{EventID: "e3"})
	if err != nil || ids(p.Deliveries) != "e3" {
		t.Fatalf("by event id: %q %v", ids(p.Deliveries), err)
	}
	p, err = e.client.DeliveriesPage(ctx, ledgerapi.PageRequest{DeliveryFilter: ledgerapi.DeliveryFilter{Source: "gh", Since: start.Add(2 * time.Second)},
		Until: start.Add(5 * time.Second)})
	if err != nil || ids(p.Deliveries) != "e5,e4,e3" {
		t.Fatalf("since/until: %q %v", ids(p.Deliveries), err)
	}
	for _, q := range []string{"page=0", "page=501", "page=x", "page=3&cursor=garbage", "page=3&until=yesterday", "page=3&status=lost"} {
		if status, body := e.call(t, "GET", "/v1/deliveries?"+q, bearer, ""); status != 400 || errorCode(body) != ledgerapi.CodeInvalidRequest {
			t.Errorf("%s: %d %v, want 400 invalid_request", q, status, body)
		}
	}
}

// The timeline shows each run with its token and whether it may still
// write, the entries, the deliveries, and the refusals this process gave.
func TestTimelineShowsRunsEntriesAndRefusals(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	scope := "conv/1 with spaces"
	t0 := e.clock.Now()
	oldRun, err := e.client.Begin(ctx, scope, ledger.RunOptions{RunID: "old", Mode: ledger.ModeSupersede, ContextAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	newRun, err := e.client.Begin(ctx, scope, ledger.RunOptions{RunID: "new", Mode: ledger.ModeSupersede, ContextAt: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newRun.Once(ctx, "reply", "hi", func(context.Context, ledger.Call) (any, error) { return "ok", nil }, ledger.OnceOptions{Summary: "say hi"}); err != nil {
		t.Fatal(err)
	}
	refused, err := oldRun.Claim(ctx, "reply", "hello", ledger.OnceOptions{Summary: "say hello"})
	if err != nil || refused.Reason != ledger.ReasonSuperseded {
		t.Fatalf("old run's claim: %+v %v", refused.Result, err)
	}
	tl, err := e.client.Timeline(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Runs) != 2 || tl.Runs[0].RunID != "old" || tl.Runs[0].Fenced != "superseded" || tl.Runs[1].RunID != "new" || tl.Runs[1].Fenced != "" ||
		tl.Runs[0].Token >= tl.Runs[1].Token || tl.Token != tl.Runs[1].Token {
		t.Fatalf("runs %+v (token %d)", tl.Runs, tl.Token)
	}
	if len(tl.Entries) != 1 || tl.Entries[0].State != "committed" || tl.Entries[0].Summary != "say hi" {
		t.Fatalf("entries %+v", tl.Entries)
	}
	if len(tl.Refusals) != 1 || tl.Refusals[0].Reason != "superseded" || tl.Refusals[0].Summary != "say hello" || tl.Refusals[0].RunID != "old" ||
		tl.Refusals[0].Token != tl.Runs[0].Token || !tl.Refusals[0].At.Equal(e.clock.Now()) {
		t.Fatalf("refusals %+v", tl.Refusals)
	}
	status, body := e.call(t, "GET", "/v1/scopes/"+url.PathEscape(scope)+"/timeline", "", "")
	if status != 401 {
		t.Fatalf("timeline without the token: %d %v", status, body)
	}
}

// The refusal log is bounded: old scopes go first, and a scope keeps its
// last refusals only.
func TestRefusalLogIsBounded(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	run, err := e.client.Begin(ctx, "busy", ledger.RunOptions{RunID: "r", Mode: ledger.ModeSupersede})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.End(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		c, err := run.Claim(ctx, "reply", i, ledger.OnceOptions{})
		if err != nil || c.Reason != ledger.ReasonRunEnded {
			t.Fatalf("claim %d: %+v %v", i, c.Result, err)
		}
	}
	tl, err := e.client.Timeline(ctx, "busy")
	if err != nil || len(tl.Refusals) != 50 {
		t.Fatalf("refusals kept: %d %v, want the last 50", len(tl.Refusals), err)
	}
}

// An operator's resolve records who and when; a bad name changes nothing.
func TestResolveRecordsWho(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c, err := e.client.Claim(ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "s", Intent: "refund", Payload: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Settle(ctx, ledger.ClaimRef{Scope: "s", EntryID: c.EntryID, Attempt: c.Attempt}, ledger.OutcomeUnknown, nil, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"scope":"s","entry_id":"` + c.EntryID + `","outcome":"committed","who":"` + strings.Repeat("x", 65) + `"}`,
		`{"scope":"s","entry_id":"` + c.EntryID + `","outcome":"committed","who":"tab\there"}`,
		`{"scope":"s","intent":"refund","payload":1,"outcome":"committed","who":"alice"}`,
		`{"scope":"s","entry_id":"` + c.EntryID + `","outcome":"committed","who":"alice","by":"reconciler","attempt":1}`,
	} {
		if status, body := e.call(t, "POST", "/v1/entries/resolve", bearer, bad); status != 400 {
			t.Errorf("%s: %d %v, want 400", bad, status, body)
		}
	}
	if es, _ := e.client.Ambiguous(ctx, 10); len(es) != 1 {
		t.Fatalf("a refused resolve changed the entry: %+v", es)
	}
	e.clock.Advance(time.Minute)
	got, err := e.client.Resolve(ctx, ledger.Resolution{Scope: "s", EntryID: c.EntryID, Outcome: ledger.OutcomeNotApplied, Who: "Alice Ops"})
	if err != nil || got.ResolvedBy != "operator:Alice Ops" || got.State != ledger.StateFailed || !got.SettledAt.Equal(e.clock.Now()) {
		t.Fatalf("resolve: %+v %v", got, err)
	}
}
