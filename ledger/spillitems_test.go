package ledger

import (
	"strings"
	"testing"
	"time"
)

// TestSpilledDocumentIsFormat10: an older build must refuse a document
// whose finished items left it (it would take a spilled event for a new
// one: format 4 and later) or whose listings it would not read (format
// 10), and this build reads it back, with or without items.
func TestSpilledDocumentIsFormat10(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, withItems := range []bool{false, true} {
		d := newDocument("s", now)
		for i := range spillAt {
			id := "e" + string(rune('a'+i))
			d.Entries[id] = &Entry{ID: id, Scope: "s", Intent: "deliver", State: StateCommitted, Attempt: 1,
				ClaimedAt: now, SettledAt: now, LandedSeq: uint64(i + 1)}
			if withItems {
				d.Queue[id] = &QueueItem{EntryID: id, Scope: "s", Source: "src", EventID: id, Status: DeliveryDelivered,
					ReceivedAt: now.Add(time.Duration(i) * time.Second), FinishedAt: now}
			}
		}
		var blobs blobSet
		if err := d.spill(now, Options{}, false, &blobs); err != nil {
			t.Fatal(err)
		}
		w, err := d.finish(now, time.Hour, &blobs)
		if err != nil || !strings.Contains(string(w.Doc), `"format":10`) {
			t.Fatalf("items %v: %.200s, %v; want format 10", withItems, w.Doc, err)
		}
		back, err := decodeDocument("s", w.Doc, now)
		if err != nil || len(back.Spilled) != 1 || back.Spilled[0] != d.Spilled[0] {
			t.Fatalf("items %v: format 10 reads back as %+v, %v; want %+v", withItems, back, err, d.Spilled)
		}
		if withItems {
			if len(d.Queue) != keepSettled || !w.ReceivedAt.Equal(now.Add((spillAt-1)*time.Second)) {
				t.Fatalf("kept %d items, received index at %v", len(d.Queue), w.ReceivedAt)
			}
		}
	}
}
