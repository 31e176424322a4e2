package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testReceivedIndex: ScopesReceived lists scopes by their last write's
// ReceivedAt, newest first (ties by scope, descending), and a cursor taken
// from any answer continues without gaps or repeats.
func testReceivedIndex(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	write := func(scope string, at time.Time, ttl time.Duration) {
		t.Helper()
		noErr(t, s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{}`), TTL: ttl, ReceivedAt: at}, nil
		}))
	}
	// Whole seconds survive every store's precision (Redis keeps ms,
	// Postgres µs); tie-a and tie-b share one time.
	write("r1", start.Add(1*time.Second), time.Hour)
	write("r3", start.Add(3*time.Second), time.Hour)
	write("tie-a", start.Add(2*time.Second), time.Hour)
	write("tie-b", start.Add(2*time.Second), time.Hour)
	write("r4", start.Add(4*time.Second), time.Hour)
	write("none", time.Time{}, time.Hour)
	names := func(got []ledger.ScopeAt) string {
		var out []string
		for _, a := range got {
			out = append(out, a.Scope)
		}
		return strings.Join(out, " ")
	}
	all := must(s.ScopesReceived(ctx, ledger.ScopeAt{}, 10))
	if got := names(all); got != "r4 r3 tie-b tie-a r1" {
		t.Fatalf("scopes received: %q, want newest first, ties by scope descending", got)
	}
	if !all[0].At.Equal(start.Add(4*time.Second)) || !all[2].At.Equal(start.Add(2*time.Second)) {
		t.Fatalf("index times: %v, %v", all[0].At, all[2].At)
	}
	// Pages of one and of two, each continued from its last scope.
	for _, size := range []int{1, 2} {
		var pos ledger.ScopeAt
		var seen []string
		for range 10 {
			page := must(s.ScopesReceived(ctx, pos, size))
			if len(page) > size {
				t.Fatalf("page of %d holds %d", size, len(page))
			}
			if len(page) == 0 {
				break
			}
			seen = append(seen, names(page))
			pos = page[len(page)-1]
		}
		if got := strings.Join(seen, " "); got != "r4 r3 tie-b tie-a r1" {
			t.Fatalf("paged by %d: %q", size, got)
		}
	}
	// A cursor between the tied scopes, and one at a time with no scope
	// (everything strictly older).
	if got := names(must(s.ScopesReceived(ctx, ledger.ScopeAt{Scope: "tie-b", At: start.Add(2 * time.Second)}, 10))); got != "tie-a r1" {
		t.Fatalf("after tie-b: %q", got)
	}
	if got := names(must(s.ScopesReceived(ctx, ledger.ScopeAt{At: start.Add(3 * time.Second)}, 10))); got != "tie-b tie-a r1" {
		t.Fatalf("before 3 s: %q", got)
	}
	// A scope that receives a newer event moves to the top; one whose
	// events are all gone leaves; one whose document expires leaves.
	write("r1", start.Add(5*time.Second), time.Hour)
	write("r3", time.Time{}, time.Hour)
	write("tie-a", start.Add(2*time.Second), time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if got := names(must(s.ScopesReceived(ctx, ledger.ScopeAt{}, 10))); got != "r1 r4 tie-b" {
		t.Fatalf("after moves, removal and expiry: %q, want r1 r4 tie-b", got)
	}
	if got := must(s.ScopesDue(ctx, start.Add(time.Hour), 10)); len(got) != 0 {
		t.Fatalf("receipt times leaked into the due index: %v", got)
	}
	if got := must(s.ScopesToReview(ctx, start.Add(time.Hour), 10)); len(got) != 0 {
		t.Fatalf("receipt times leaked into the review index: %v", got)
	}
}

// testRecentDeliveries: every queued event, delivered ones included, is
// listed newest first across scopes, filtered and paged by cursor without
// gaps or repeats, and retention takes finished ones out of the listing.
func testRecentDeliveries(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: 24 * time.Hour})
	finish := func(scope string, status ledger.DeliveryStatus) {
		t.Helper()
		q := must(e.l.Queue().QueueItems(e.ctx, scope))[0]
		tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, q.EntryID, testLease))
		must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: status}))
	}
	// Eight events on eight scopes, a second apart; every other one
	// delivered, one dead.
	for i := range 8 {
		scope, ev := fmt.Sprintf("recent-%d", i), fmt.Sprintf("ev%d", i)
		enqueue(t, e, scope, ev, false)
		switch {
		case i == 5:
			finish(scope, ledger.DeliveryDead)
		case i%2 == 0:
			finish(scope, ledger.DeliveryDelivered)
		}
		e.clock.Advance(time.Second)
	}
	list := func(f ledger.DeliveryFilter, size int) string {
		t.Helper()
		var out []string
		var after *ledger.DeliveryCursor
		for range 20 {
			p := must(e.l.Views().RecentDeliveries(e.ctx, f, after, size))
			if len(p.Items) > size || len(p.Items) == 0 && after != nil {
				t.Fatalf("page of %d holds %d", size, len(p.Items))
			}
			for _, q := range p.Items {
				out = append(out, q.EventID)
			}
			if p.Next == nil {
				return strings.Join(out, " ")
			}
			after = p.Next
		}
		t.Fatal("listing never ended")
		return ""
	}
	for _, size := range []int{1, 3, 50} {
		if got := list(ledger.DeliveryFilter{}, size); got != "ev7 ev6 ev5 ev4 ev3 ev2 ev1 ev0" {
			t.Fatalf("all, pages of %d: %q", size, got)
		}
		if got := list(ledger.DeliveryFilter{Status: ledger.DeliveryDelivered}, size); got != "ev6 ev4 ev2 ev0" {
			t.Fatalf("delivered without a scope, pages of %d: %q", size, got)
		}
	}
	if got := list(ledger.DeliveryFilter{Status: ledger.DeliveryDead}, 2); got != "ev5" {
		t.Fatalf("dead: %q", got)
	}
	if got := list(ledger.DeliveryFilter{Since: start.Add(3 * time.Second), Until: start.Add(6 * time.Second)}, 2); got != "ev5 ev4 ev3" {
		t.Fatalf("since 3 s until 6 s: %q", got)
	}
	if got := list(ledger.DeliveryFilter{EventID: "ev2"}, 2); got != "ev2" {
		t.Fatalf("by event id: %q", got)
	}
	if got := list(ledger.DeliveryFilter{Source: "other"}, 2); got != "" {
		t.Fatalf("another source: %q", got)
	}
	// A bound on scopes read ends a page early with a cursor that goes on.
	p := must(e.l.Views().RecentDeliveries(e.ctx, ledger.DeliveryFilter{Status: ledger.DeliveryDelivered, Limit: 3}, nil, 10))
	if len(p.Items) != 1 || p.Items[0].EventID != "ev6" || !p.Partial || p.Next == nil || p.Scanned != 3 {
		t.Fatalf("bounded page: %d items, partial %v, scanned %d", len(p.Items), p.Partial, p.Scanned)
	}
	// A new event on an old scope moves the scope (with its events) to
	// the top.
	enqueue(t, e, "recent-0", "late", false)
	if got := list(ledger.DeliveryFilter{}, 3); got != "late ev0 ev7 ev6 ev5 ev4 ev3 ev2 ev1" {
		t.Fatalf("after a new event on recent-0: %q", got)
	}
	// One retention after they finished, delivered events go from the
	// listing; waiting and dead ones stay.
	e.clock.Advance(24*time.Hour + time.Minute)
	for i := range 8 {
		enqueue(t, e, fmt.Sprintf("recent-%d", i), "prune", false) // any write prunes
		e.clock.Advance(time.Millisecond)
	}
	var left []string
	for _, q := range must(e.l.Queue().ListDeliveries(e.ctx, ledger.DeliveryFilter{})) {
		if q.EventID != "prune" {
			left = append(left, q.EventID)
		}
	}
	if got := strings.Join(left, " "); got != "ev1 ev3 ev5 ev7 late" {
		t.Fatalf("after retention: %q, want the undelivered ones", got)
	}
}
