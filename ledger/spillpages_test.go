package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// pagedDeliveries is enough effects on one scope for its page listings to
// fold into a page of pages (16 pages of 8 chunks of 16, with room to
// spare); every deliveryEvery-th is an inline delivery, whose item spills
// with it.
const (
	pagedDeliveries = 8800
	deliveryEvery   = 16
)

// TestPagesOfPages: a conversation long enough that the pages listing its
// spilled chunks fold into pages of pages keeps a bounded document, and
// every reader finds every effect and delivery through the levels:
// History, history pages walked to the end, the item lists, the
// newest-first listing, a lookup and a duplicate of the oldest; retention
// then deletes every page record, those under a page of pages too.
func TestPagesOfPages(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memory.New(clock)
	l := ledger.New(st, ledger.Options{Clock: clock, Retention: 24 * time.Hour, ReplayCache: -1})
	const scope = "paged"
	key := func(ev string) ledger.Key {
		return ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "src", "eventId": ev}}
	}
	var deliveries []string
	for i := range pagedDeliveries {
		ev := fmt.Sprintf("ev-%05d", i)
		now = now.Add(time.Second)
		if i%deliveryEvery != 0 {
			if _, err := l.Once(ctx, ledger.Key{Scope: scope, Intent: "reply", Payload: map[string]string{"eventId": ev}},
				func(context.Context, ledger.Call) (any, error) { return "sent", nil }); err != nil {
				t.Fatal(err)
			}
			continue
		}
		deliveries = append(deliveries, ev)
		c, err := l.Claim(ctx, ledger.ClaimRequest{Key: key(ev), Conflict: ledger.ConflictNone, PendingTTL: time.Minute, Redeliverable: true})
		if err != nil || !c.Acquired() {
			t.Fatalf("claim %s: %v %v", ev, c.Status, err)
		}
		if _, err := l.SettleInline(ctx, c.Ref(), ledger.OutcomeCommitted, "ok", nil, ledger.InlineRecord{
			Event:  ledger.QueuedEvent{Source: "src", EventID: ev, Scope: scope, ReceivedAt: now},
			Status: ledger.DeliveryDelivered}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := st.Read(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := ledger.ReadListings(ctx, st, scope)
	if err != nil {
		t.Fatal(err)
	}
	spilled, spillPages := lists.Chunks, lists.Pages
	levels := map[int]int{}
	for _, p := range spillPages {
		levels[p.Level]++
	}
	// So many listings move into a record of their own (format 11).
	if lists.Format != 11 || lists.Record == "" || levels[1] == 0 {
		t.Fatalf("format %d, listings record %q, pages by level %v", lists.Format, lists.Record, levels)
	}
	// Every level, and the chunk listing, lists at most a page's worth
	// (8): each listing is bytes every step of the scope moves.
	for level, n := range levels {
		if n > 8 {
			t.Fatalf("the document lists %d pages of level %d", n, level)
		}
	}
	if len(spilled) > 8 {
		t.Fatalf("the document lists %d spilled chunks", len(spilled))
	}
	t.Logf("document of %d effects: %d bytes, pages by level %v", pagedDeliveries, len(raw), levels)

	// Every page record, those a page of pages lists included.
	var pageRecords []string
	var walk func(n uint64, level int)
	walk = func(n uint64, level int) {
		name := fmt.Sprintf("sp:%d", n)
		pageRecords = append(pageRecords, name)
		if level == 0 {
			return
		}
		b, err := st.ReadBlob(ctx, scope, name)
		if err != nil || b == nil {
			t.Fatalf("page %s: %v", name, err)
		}
		inner, err := ledger.SpillPageRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range inner {
			walk(p.N, p.Level)
		}
	}
	for _, p := range spillPages {
		walk(p.N, p.Level)
	}

	want := func(i int) string { return fmt.Sprintf("ev-%05d", i) }
	eventOf := func(e ledger.Entry) string {
		var p map[string]string
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p["eventId"]
	}
	h, err := l.Views().History(ctx, scope)
	if err != nil || len(h) != pagedDeliveries {
		t.Fatalf("History: %d entries, %v", len(h), err)
	}
	for i, e := range h {
		if got := eventOf(e); got != want(i) {
			t.Fatalf("History[%d] is %s, want %s", i, got, want(i))
		}
	}
	next, seen := "", 0
	for {
		p, err := l.Views().HistoryPage(ctx, ledger.HistoryQuery{Scope: scope, Limit: 500, Before: next})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			if got := eventOf(e); got != want(pagedDeliveries-1-seen) {
				t.Fatalf("history page entry %d is %s, want %s", seen, got, want(pagedDeliveries-1-seen))
			}
			seen++
		}
		if next = p.Next; next == "" {
			break
		}
	}
	if seen != pagedDeliveries {
		t.Fatalf("history pages listed %d entries", seen)
	}
	items, err := l.Queue().QueueItems(ctx, scope)
	if err != nil || len(items) != len(deliveries) || items[0].EventID != want(0) {
		t.Fatalf("QueueItems: %d, %v", len(items), err)
	}
	var after *ledger.DeliveryCursor
	listed := 0
	for {
		p, err := l.Views().RecentDeliveries(ctx, ledger.DeliveryFilter{}, after, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range p.Items {
			if q.EventID != deliveries[len(deliveries)-1-listed] {
				t.Fatalf("newest-first item %d is %s", listed, q.EventID)
			}
			listed++
		}
		if after = p.Next; after == nil {
			break
		}
	}
	if listed != len(deliveries) {
		t.Fatalf("RecentDeliveries listed %d", listed)
	}
	if q, err := l.Queue().FindDelivery(ctx, scope, "src", want(0)); err != nil || q.Status != ledger.DeliveryDelivered {
		t.Fatalf("the oldest delivery: %+v, %v", q, err)
	}
	if c, err := l.Claim(ctx, ledger.ClaimRequest{Key: key(want(0)), Conflict: ledger.ConflictNone}); err != nil || c.Status != ledger.StatusReplayed {
		t.Fatalf("a duplicate of the oldest delivery: %v %v", c.Status, err)
	}

	// The conversation goes on; once the old deliveries are past retention
	// a write retires them, page records at every level with the chunks
	// under them, while the document lives on.
	now = now.Add(20 * time.Hour)
	for i := range 3 {
		if _, err := l.Once(ctx, ledger.Key{Scope: scope, Intent: "reply", Payload: i},
			func(context.Context, ledger.Call) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(5 * time.Hour)
	if _, err := l.Once(ctx, ledger.Key{Scope: scope, Intent: "reply", Payload: "late"},
		func(context.Context, ledger.Call) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	left, err := st.ReadBlobs(ctx, scope, pageRecords)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range left {
		if b != nil {
			t.Fatalf("page record %s outlived retention", pageRecords[i])
		}
	}
	raw, err = st.Read(ctx, scope)
	if err != nil || raw == nil || bytes.Contains(raw, []byte(`"spillPages"`)) || strings.Contains(string(raw), want(pagedDeliveries-1)) {
		t.Fatalf("after retention: %.300s, %v", raw, err)
	}
	if h, err := l.Views().History(ctx, scope); err != nil || len(h) != 4 {
		t.Fatalf("History after retention: %d entries, %v", len(h), err)
	}
}
