package ledger

import (
	"fmt"
	"testing"
	"time"
)

// Answers that name one of several candidates must not depend on the
// order Go walks a map in (which changes from run to run): the newer run a
// superseded one names is the newest, and a refused claim lists the
// writes it did not see in history order. Each case builds the document
// many times over, so a walk-order answer shows.
func TestAnswersDoNotDependOnMapOrder(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	t.Run("newest superseding run", func(t *testing.T) {
		for range 50 {
			d := newDocument("s", now)
			old := &runState{ID: "old", Mode: ModeSupersede, ContextAt: now}
			d.Runs[old.ID] = old
			for i, id := range []string{"b", "c", "a", "d"} {
				ctx := now.Add(time.Duration(1+i%2) * time.Second) // "c" and "d" are the newest
				d.Runs[id] = &runState{ID: id, Mode: ModeSupersede, ContextAt: ctx}
			}
			if n := newerRun(d, old); n == nil || n.ID != "c" {
				t.Fatalf("superseded by %v, want the newest run with the least id, c", n)
			}
		}
	})
	t.Run("conflicts in history order", func(t *testing.T) {
		for range 50 {
			d := newDocument("s", now)
			r := &runState{ID: "mine", SeenSeq: 0}
			d.Runs[r.ID] = r
			want := ""
			for i := range 8 {
				e := &Entry{ID: fmt.Sprintf("e%d", 7-i), State: StateCommitted, LandedSeq: uint64(i + 1),
					ClaimedAt: now.Add(time.Duration(i) * time.Second)}
				d.Entries[e.ID] = e
				want += e.ID + " "
			}
			got := ""
			for _, e := range conflicts(d, r, claimInput{key: resolvedKey{id: "new"}, conflict: ConflictAny}, now) {
				got += e.ID + " "
			}
			if got != want {
				t.Fatalf("conflicts %q, want %q", got, want)
			}
		}
	})
}
