package ledger

import (
	"strings"
	"testing"
	"time"
)

// TestSpilledItemsDocumentIsFormat4: an older build must refuse a document
// whose finished items left it (it would take a spilled event for a new
// one); one that spilled entries alone stays format 2, and this build
// reads format 4 back.
func TestSpilledItemsDocumentIsFormat4(t *testing.T) {
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
		want := map[bool]string{false: `"format":2`, true: `"format":4`}[withItems]
		if err != nil || !strings.Contains(string(w.Doc), want) {
			t.Fatalf("items %v: %.200s, %v; want %s", withItems, w.Doc, err, want)
		}
		if withItems {
			if len(d.Queue) != keepSettled || !w.ReceivedAt.Equal(now.Add((spillAt-1)*time.Second)) {
				t.Fatalf("kept %d items, received index at %v", len(d.Queue), w.ReceivedAt)
			}
			if _, err := decodeDocument("s", w.Doc, now); err != nil {
				t.Fatalf("format 4 does not read back: %v", err)
			}
		}
	}
}
