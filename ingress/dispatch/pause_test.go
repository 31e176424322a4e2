package dispatch_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// Once PauseNow returns (the admin API calls it after recording a pause,
// before answering), this process starts no delivery of the source, with
// no sweep in between; resume delivers each event once.
func TestPauseNowStopsThisProcessAtOnce(t *testing.T) {
	h := newHarness(t, queuedSource())
	ctx := context.Background()
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
		t.Fatal(err)
	}
	h.d.PauseNow("github", true)
	if status, ans := h.post(t, "p-1"); status != http.StatusAccepted {
		t.Fatalf("a paused source must keep accepting: %d %v", status, ans)
	}
	settle(t, h.d)
	if n := len(h.agent.requests("p-1")); n != 0 {
		t.Fatalf("%d forwards right after the pause, want 0", n)
	}
	h.sweep(t)
	if n := len(h.agent.requests("p-1")); n != 0 {
		t.Fatalf("%d forwards after a sweep while paused, want 0", n)
	}
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", false); err != nil {
		t.Fatal(err)
	}
	h.d.PauseNow("github", false)
	for range 3 {
		h.sweep(t)
	}
	if q := h.item(t, "p-1"); q.Status != ledger.DeliveryDelivered || len(h.agent.requests("p-1")) != 1 {
		t.Fatalf("after resume: %s, %d forwards; want delivered once", q.Status, len(h.agent.requests("p-1")))
	}
}

// A pause recorded by another process: this dispatcher says it has
// stopped the source (its pause-acks entry) only from the sweep that
// applied it, and from then on an event accepted here is not handed over
// nor delivered.
func TestAckPausedOnlyOnceStopped(t *testing.T) {
	h := newHarness(t, queuedSource())
	ctx := context.Background()
	h.sweep(t)
	listed := func() bool {
		acks, err := h.ledger.Sources().PauseAcks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(acks[h.d.Instance()].Paused, "github")
	}
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
		t.Fatal(err)
	}
	if listed() {
		t.Fatal("the entry lists the source before any sweep applied the pause")
	}
	h.sweep(t)
	if !listed() {
		t.Fatal("the sweep that applied the pause did not say so")
	}
	if status, ans := h.post(t, "a-1"); status != http.StatusAccepted {
		t.Fatalf("a paused source must keep accepting: %d %v", status, ans)
	}
	settle(t, h.d)
	h.sweep(t)
	if n := len(h.agent.requests("a-1")); n != 0 {
		t.Fatalf("%d forwards after this process said it stopped the source, want 0", n)
	}
}

// pausedReads counts the reads of the paused sources record.
type pausedReads struct {
	ledger.Store
	n atomic.Int64
}

func (s *pausedReads) ReadControl(ctx context.Context, name string) ([]byte, error) {
	if name == "paused-sources" {
		s.n.Add(1)
	}
	return s.Store.ReadControl(ctx, name)
}

// The sweeps that accepts and freed places start between two polls use
// the paused sources as last read (in the steady state of queued delivery
// there is one about every tenth event); the poll, a change of pause in
// this process, and a copy a poll old read the record again.
func TestPausedSourcesReadOncePerPoll(t *testing.T) {
	h := newHarness(t, queuedSource())
	ctx := context.Background()
	store := &pausedReads{Store: h.store}
	h.poll = time.Hour
	d := h.newDispatcherOn(t, store, forward.New(nil, h.clock.Now))
	acked := func() []string {
		acks, err := h.ledger.Sources().PauseAcks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return acks[d.Instance()].Paused
	}
	freed := func() {
		d.Notify()
		if _, err := d.SweepFreed(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := store.n.Load(); n != 1 {
		t.Fatalf("the poll's sweep read the paused sources %d times, want 1", n)
	}
	// Another process pauses the source: the sweeps between polls go by
	// the copy, and say so (the acknowledgement lists what was applied).
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		freed()
	}
	if n := store.n.Load(); n != 1 {
		t.Fatalf("5 sweeps between polls read the paused sources %d times more, want none", n-1)
	}
	if got := acked(); len(got) != 0 {
		t.Fatalf("acknowledged %v before reading the pause", got)
	}
	// The poll reads it and applies it.
	if _, err := d.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := acked(); !slices.Equal(got, []string{"github"}) || store.n.Load() != 2 {
		t.Fatalf("after the poll: acknowledged %v after %d reads, want [github] after 2", got, store.n.Load())
	}
	// A resume through this process (the admin API records it, then calls
	// PauseNow) is read at the next sweep, not at the next poll: the copy
	// in hand would keep the source paused.
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", false); err != nil {
		t.Fatal(err)
	}
	d.PauseNow("github", false)
	if _, err := d.SweepFreed(ctx); err != nil {
		t.Fatal(err)
	}
	if got := acked(); len(got) != 0 || store.n.Load() != 3 {
		t.Fatalf("after the resume and a sweep: acknowledged %v after %d reads, want none after 3", got, store.n.Load())
	}
	// A pause through this process: the sweep must not undo it from a
	// copy that predates it.
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
		t.Fatal(err)
	}
	d.PauseNow("github", true)
	freed()
	if got := acked(); !slices.Equal(got, []string{"github"}) {
		t.Fatalf("after this process paused the source and a sweep: acknowledged %v, want [github]", got)
	}
}

// A busy dispatcher, whose poll timer never fires because sweeps keep
// resetting it, still reads the paused sources once the copy is a poll
// old.
func TestPausedSourcesCopyExpiresAfterAPoll(t *testing.T) {
	h := newHarness(t, queuedSource())
	ctx := context.Background()
	store := &pausedReads{Store: h.store}
	h.poll = 10 * time.Millisecond
	d := h.newDispatcherOn(t, store, forward.New(nil, h.clock.Now))
	if _, err := d.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * h.poll)
	d.Notify()
	if _, err := d.SweepFreed(ctx); err != nil {
		t.Fatal(err)
	}
	if n := store.n.Load(); n != 2 {
		t.Fatalf("a sweep after a copy a poll old read the paused sources %d times in all, want 2", n)
	}
}
