package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

const contentLease = 2 * time.Minute

func contentClaim(id string) ledger.ContentClaim {
	return ledger.ContentClaim{Source: "gh", Digest: "d1", EventID: id, RunID: "gh:" + id, Scope: "gh:" + id, Lease: contentLease}
}

// record is what the gateway does with a held event: its run and deliver
// claim, on its own scope.
func recordEvent(t *testing.T, e *env, id string) {
	t.Helper()
	_, c, err := e.l.BeginClaim(e.ctx, ledger.RunOptions{RunID: "gh:" + id, Mode: ledger.ModeIndependent},
		ledger.ClaimRequest{Key: ledger.Key{Scope: "gh:" + id, Intent: "deliver", Payload: id}, Conflict: ledger.ConflictNone})
	noErr(t, err)
	if c.Status != ledger.StatusClaimed {
		t.Fatalf("record %s: %+v", id, c)
	}
}

func wantContent(t *testing.T, e *env, id string, status ledger.ContentStatus, by string) ledger.ContentHold {
	t.Helper()
	h := must(e.l.ClaimContent(e.ctx, contentClaim(id)))
	if h.Status != status || h.By != by {
		t.Fatalf("content claim by %s: %+v, want %s by %q", id, h, status, by)
	}
	return h
}

// testContentClaims: the signed content of an event is held, then
// recorded, for its event id; another id is a replay once it is recorded,
// in flight while it is held, and takes it over only once the hold has
// run out and the holder's run is nowhere; the holder's own redelivery
// goes on. A crash between the two writes neither loses the event nor
// lets a replay through.
func testContentClaims(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: 24 * time.Hour})
	h := wantContent(t, e, "x", ledger.ContentHeld, "")
	if !h.RecordBy.Equal(e.clock.Now().Add(contentLease / 2)) {
		t.Fatalf("record by %v, want half the lease from now", h.RecordBy)
	}
	wantContent(t, e, "y", ledger.ContentInFlight, "x")
	recordEvent(t, e, "x")
	noErr(t, e.l.ConfirmContent(e.ctx, "gh", "d1", "x"))
	wantContent(t, e, "y", ledger.ContentReplay, "x")
	// The provider's own redelivery: held, nothing to confirm.
	if h := wantContent(t, e, "x", ledger.ContentHeld, ""); !h.RecordBy.IsZero() {
		t.Fatalf("redelivery of a recorded event: %+v", h)
	}
	// Confirming for another id changes nothing.
	noErr(t, e.l.ConfirmContent(e.ctx, "gh", "d1", "y"))
	wantContent(t, e, "y", ledger.ContentReplay, "x")
	// Other content, other source: their own records.
	other := contentClaim("y")
	other.Digest = "d2"
	if h := must(e.l.ClaimContent(e.ctx, other)); h.Status != ledger.ContentHeld {
		t.Fatalf("other content: %+v", h)
	}
	other = contentClaim("y")
	other.Source = "shop"
	if h := must(e.l.ClaimContent(e.ctx, other)); h.Status != ledger.ContentHeld {
		t.Fatalf("other source: %+v", h)
	}
	// Past the retention the content is free again.
	e.clock.Advance(25 * time.Hour)
	wantContent(t, e, "z", ledger.ContentHeld, "")

	// Crash after the hold, before the event was recorded: the holder's
	// retry goes on; once the hold runs out another id takes it over.
	e = setup(t, newStore, ledger.Options{})
	wantContent(t, e, "a", ledger.ContentHeld, "")
	wantContent(t, e, "a", ledger.ContentHeld, "") // a's retry renews its hold
	e.clock.Advance(contentLease - time.Second)
	wantContent(t, e, "b", ledger.ContentInFlight, "a")
	e.clock.Advance(2 * time.Second)
	wantContent(t, e, "b", ledger.ContentHeld, "")
	wantContent(t, e, "a", ledger.ContentInFlight, "b")

	// Crash after the event was recorded, before the confirmation: the
	// next id finds the holder's run and is a replay.
	e = setup(t, newStore, ledger.Options{})
	wantContent(t, e, "c", ledger.ContentHeld, "")
	recordEvent(t, e, "c")
	e.clock.Advance(contentLease + time.Second)
	wantContent(t, e, "d", ledger.ContentReplay, "c")
	wantContent(t, e, "d", ledger.ContentReplay, "c")

	// Many ids at once, from two ledgers on the store (two gateway
	// processes): exactly one holds the content.
	e = setup(t, newStore, ledger.Options{})
	ls := []*ledger.Ledger{e.l, ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})}
	var mu sync.Mutex
	held := map[string]int{}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			h, err := ls[i%2].ClaimContent(e.ctx, contentClaim(fmt.Sprintf("r%d", i)))
			if err != nil {
				t.Errorf("claim r%d: %v", i, err)
				return
			}
			mu.Lock()
			held[string(h.Status)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if held[string(ledger.ContentHeld)] != 1 || held[string(ledger.ContentInFlight)] != 31 {
		t.Fatalf("32 ids at once: %v, want one held and 31 in flight", held)
	}
}
