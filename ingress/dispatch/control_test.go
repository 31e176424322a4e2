package dispatch_test

import (
	"context"
	"net/http"
	"testing"

	"go.uber.org/zap/zapcore"

	"github.com/replyonce/gateway/stores/storetest/backends"
)

// A corrupt paused-sources record, written straight into the store (as a
// disk fault or a hand edit would leave it), stops no dispatch, on every
// store: the sweep logs it at error and delivers, and the next pause or
// resume writes a fresh record.
func TestCorruptControlRecordLeavesDispatchRunning(t *testing.T) {
	for _, b := range backends.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			store, _ := b.Open(t)
			h := newHarnessOn(t, queuedSource(), nil, store)
			ctx := context.Background()
			// "paused-sources" is the ledger's name for the record.
			if err := store.TransactControl(ctx, "paused-sources", func([]byte) ([]byte, error) { return []byte("\x00{not json"), nil }); err != nil {
				t.Fatal(err)
			}
			if status, ans := h.post(t, "corrupt-1"); status != http.StatusAccepted {
				t.Fatalf("post: %d %v", status, ans)
			}
			h.sweep(t)
			h.sweep(t)
			if n := len(h.agent.requests("corrupt-1")); n != 1 {
				t.Fatalf("the agent got the event %d times, want 1", n)
			}
			logged := h.logs.FilterMessageSnippet("paused sources record is corrupt").All()
			if len(logged) != 1 || logged[0].Level != zapcore.ErrorLevel {
				t.Fatalf("corrupt record logged %d times (%v), want once at error", len(logged), logged)
			}
			if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
				t.Fatal(err)
			}
			if set, err := h.ledger.Sources().PausedSources(ctx); err != nil || !set["github"] || len(set) != 1 {
				t.Fatalf("after a pause over the corrupt record: %v, %v", set, err)
			}
		})
	}
}
