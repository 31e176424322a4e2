package ledgerapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// Delivered events are listed without a scope, newest first across every
// scope, paged by cursor with none twice and none left out, and mixed with
// the other statuses when no status is asked for.
func TestDeliveredListedWithoutScopeNewestFirst(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for i := 1; i <= 9; i++ {
		id := fmt.Sprintf("e%d", i)
		e.enqueue(t, "gh", id)
		if i%3 != 0 { // e3, e6, e9 stay queued
			scope := "gh:" + id
			q, err := e.ledger.Queue().FindDelivery(ctx, scope, "gh", id)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := e.ledger.Queue().TakeDelivery(ctx, scope, q.EntryID, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.ledger.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}); err != nil {
				t.Fatal(err)
			}
		}
		e.clock.Advance(time.Second)
	}
	pages := func(req ledgerapi.PageRequest) string {
		t.Helper()
		var out []string
		for range 10 {
			p, err := e.client.DeliveriesPage(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ids(p.Deliveries))
			if p.Next == "" {
				return strings.Join(out, "|")
			}
			req.Cursor = p.Next
		}
		t.Fatal("paging never ended")
		return ""
	}
	if got := pages(ledgerapi.PageRequest{DeliveryFilter: ledgerapi.DeliveryFilter{Status: "delivered"}, Size: 2}); got != "e8,e7|e5,e4|e2,e1" {
		t.Fatalf("delivered, pages of 2: %q", got)
	}
	if got := pages(ledgerapi.PageRequest{Size: 4}); got != "e9,e8,e7,e6|e5,e4,e3,e2|e1" {
		t.Fatalf("every status, pages of 4: %q", got)
	}
	// The CLI's listing (oldest first) finds them too.
	list, err := e.client.Deliveries(ctx, ledgerapi.DeliveryFilter{Status: "delivered"})
	if err != nil || ids(list) != "e1,e2,e4,e5,e7,e8" {
		t.Fatalf("events list --status delivered: %q %v", ids(list), err)
	}
	// A cursor from the per-scope listing is not taken for one of the walk.
	if status, body := e.call(t, "GET", "/v1/deliveries?page=2&cursor=cjF8eA", bearer, ""); status != 400 || errorCode(body) != ledgerapi.CodeInvalidRequest {
		t.Fatalf("malformed walk cursor: %d %v", status, body)
	}
}
