package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testEventRecordsWhereverKept: a small queued event's record and its
// attempt records ride in its scope document, so its accept and its
// settles write no side record (issue #29); a large event, an item past a
// scope's few that carry theirs, a long answer and attempts past the
// first few go to blobs. Every one of them reads back byte for byte, in
// order, whichever way it was kept.
func testEventRecordsWhereverKept(t *testing.T, newStore NewStore) {
	w := &watchStore{Store: newStore(t)}
	e := setup(t, func(*testing.T) ledger.Store { return w }, ledger.Options{})
	body := func(event string, size int) []byte {
		// Even events are text (kept as a JSON string), the others hold
		// bytes no JSON string keeps as they are (kept as base64).
		b := []byte{0xff, 0x00, '\n', '"', '\\'}
		if strings.HasSuffix(event, "2") || strings.HasSuffix(event, "4") {
			b = []byte("{\"text\":\"h\u00e9llo \\\"quoted\\\" <b>&</b> \u2028\n")
		}
		b = append(b, event...)
		return append(b, bytes.Repeat([]byte("x"), max(size-len(b), 0))...)
	}
	enq := func(scope, event string, size int) ledger.Enqueued {
		t.Helper()
		return must(e.l.Queue().Enqueue(e.ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "src", EventID: event, Scope: scope, ContentType: "application/octet-stream",
				Header: map[string][]string{"X-Event": {event}}, ReceivedAt: e.clock.Now(), Body: body(event, size)},
			Run:    ledger.RunOptions{RunID: "src:" + event, Mode: ledger.ModeIndependent},
			Claim:  ledger.ClaimRequest{Key: queueKey(scope, event), Conflict: ledger.ConflictNone, PendingTTL: testLease},
			MaxAge: 72 * time.Hour,
		}))
	}
	readBack := func(scope, event string, size int) {
		t.Helper()
		for _, q := range must(e.l.Queue().QueueItems(e.ctx, scope)) {
			if q.EventID != event {
				continue
			}
			ev := must(e.l.Queue().QueuedEventOf(e.ctx, q))
			if !bytes.Equal(ev.Body, body(event, size)) || ev.Header["X-Event"][0] != event || ev.ContentType != "application/octet-stream" {
				t.Fatalf("event %s read back as %q %v %q", event, ev.Body, ev.Header, ev.ContentType)
			}
			return
		}
		t.Fatalf("no item for %s", event)
	}

	// Four small events of one scope: no side record.
	for i := 1; i <= 4; i++ {
		enq("conv", fmt.Sprintf("ev-%d", i), 1024)
	}
	if got := w.takeWritten(); len(got) != 0 {
		t.Fatalf("accepting small events wrote side records %v", got)
	}
	// The fifth of the scope, and a large event: a blob each.
	enq("conv", "ev-5", 1024)
	if got := w.takeWritten(); len(got) != 1 {
		t.Fatalf("the fifth event of a scope wrote %v, want its blob", got)
	}
	enq("large", "ev-large", 5<<10)
	if got := w.takeWritten(); len(got) != 1 {
		t.Fatalf("a 5 KiB event wrote %v, want its blob", got)
	}
	for i := 1; i <= 5; i++ {
		readBack("conv", fmt.Sprintf("ev-%d", i), 1024)
	}
	readBack("large", "ev-large", 5<<10)

	// Five attempts of ev-1: the first three small records ride in the
	// item, the long answer and the fifth are blobs.
	answers := []string{"busy", "still busy", string(bytes.Repeat([]byte("a"), 600)), "down", "ok"}
	var blobsWritten []int
	for n, answer := range answers {
		var item ledger.QueueItem
		for _, q := range must(e.l.Queue().QueueItems(e.ctx, "conv")) {
			if q.EventID == "ev-1" {
				item = q
			}
		}
		tk := must(e.l.Queue().TakeDelivery(e.ctx, "conv", item.EntryID, testLease))
		if !tk.OK || tk.Item.Attempts != n+1 {
			t.Fatalf("take %d: %+v", n+1, tk)
		}
		if got := w.takeWritten(); len(got) != 0 {
			t.Fatalf("take %d wrote side records %v", n+1, got)
		}
		f := ledger.Finish{Taken: tk, Status: ledger.DeliveryQueued, NextAt: e.clock.Now().Add(time.Second),
			Record: ledger.AttemptRecord{AgentStatus: 500 + n, Answer: []byte(answer)}}
		if n == len(answers)-1 {
			f = ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered, Value: map[string]any{"outcome": "delivered"},
				Record: ledger.AttemptRecord{AgentStatus: 200, Answer: []byte(answer)}}
		}
		must(e.l.Queue().FinishDelivery(e.ctx, f))
		if got := w.takeWritten(); len(got) != 0 {
			blobsWritten = append(blobsWritten, n+1)
		}
		e.clock.Advance(2 * time.Second)
	}
	if fmt.Sprint(blobsWritten) != "[3 5]" {
		t.Fatalf("settles that wrote a side record: %v, want [3 5] (the long answer, and the fourth record kept)", blobsWritten)
	}
	var item ledger.QueueItem
	for _, q := range must(e.l.Queue().QueueItems(e.ctx, "conv")) {
		if q.EventID == "ev-1" {
			item = q
		}
	}
	recs := must(e.l.Queue().AttemptsOf(e.ctx, item))
	if len(recs) != len(answers) {
		t.Fatalf("%d attempt records, want %d: %+v", len(recs), len(answers), recs)
	}
	for i, r := range recs {
		if r.N != i+1 || string(r.Answer) != answers[i] {
			t.Fatalf("record %d: n %d answer %q, want n %d answer %q", i, r.N, r.Answer, i+1, answers[i])
		}
	}
	readBack("conv", "ev-1", 1024)
}
