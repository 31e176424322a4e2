package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

// countingStore counts the calls that reach the store and can fail them
// all, as an outage would.
type countingStore struct {
	ledger.Store
	calls atomic.Int64
	down  atomic.Bool
}

var errDown = errors.New("store is down")

func (s *countingStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	s.calls.Add(1)
	if s.down.Load() {
		return errDown
	}
	return s.Store.Transact(ctx, scope, fn)
}

func (s *countingStore) Read(ctx context.Context, scope string) ([]byte, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.Read(ctx, scope)
}

type replayEnv struct {
	clock *storetest.Clock
	store *countingStore
	ctx   context.Context
}

func newReplayEnv() *replayEnv {
	clock := storetest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	return &replayEnv{clock: clock, store: &countingStore{Store: memory.New(clock.Now)}, ctx: context.Background()}
}

func (e *replayEnv) ledger(opts ledger.Options) *ledger.Ledger {
	opts.Clock = e.clock.Now
	return ledger.New(e.store, opts)
}

// deliver is what the gateway asks for an event.
func deliver(eventID string) (ledger.RunOptions, ledger.ClaimRequest) {
	return ledger.RunOptions{RunID: "conv:" + eventID, Mode: ledger.ModeIndependent},
		ledger.ClaimRequest{Key: ledger.Key{Scope: "conv:" + eventID, Intent: "deliver", Payload: map[string]string{"eventId": eventID}},
			Conflict: ledger.ConflictNone, Redeliverable: true, PendingTTL: 20 * time.Second}
}

// settle claims the event and settles it with outcome, as a first delivery.
func (e *replayEnv) settle(t *testing.T, l *ledger.Ledger, eventID string, outcome ledger.Outcome) ledger.Claim {
	t.Helper()
	ro, req := deliver(eventID)
	_, c, err := l.BeginClaim(e.ctx, ro, req)
	if err != nil || !c.Acquired() {
		t.Fatalf("first delivery of %s: %+v, %v", eventID, c, err)
	}
	var value any
	if outcome == ledger.OutcomeCommitted {
		value = map[string]any{"outcome": "delivered", "event": eventID}
	}
	if _, err := l.Settle(e.ctx, c.Ref(), outcome, value, nil); err != nil {
		t.Fatalf("settle %s: %v", eventID, err)
	}
	return c
}

// redeliver sends the event again and reports how many store calls that took.
func (e *replayEnv) redeliver(t *testing.T, l *ledger.Ledger, eventID string) (ledger.Claim, int64, error) {
	t.Helper()
	ro, req := deliver(eventID)
	before := e.store.calls.Load()
	_, c, err := l.BeginClaim(e.ctx, ro, req)
	return c, e.store.calls.Load() - before, err
}

func TestRedeliveryOfAnEventThisProcessSettledNeedsNoStore(t *testing.T) {
	e := newReplayEnv()
	var events []string
	var mu sync.Mutex
	l := e.ledger(ledger.Options{Observe: func(ev ledger.Event) {
		mu.Lock()
		events = append(events, ev.Type)
		mu.Unlock()
	}})
	first := e.settle(t, l, "evt_1", ledger.OutcomeCommitted)

	// The store is down: only an answer from memory can succeed.
	e.store.down.Store(true)
	c, calls, err := e.redeliver(t, l, "evt_1")
	if err != nil {
		t.Fatalf("redelivery while the store is down: %v", err)
	}
	if calls != 0 {
		t.Errorf("redelivery made %d store calls, want 0", calls)
	}
	if c.Status != ledger.StatusReplayed || c.EntryID != first.EntryID || c.Attempt != first.Attempt {
		t.Errorf("redelivery: %s entry %s attempt %d; want replayed %s attempt %d", c.Status, c.EntryID, c.Attempt, first.EntryID, first.Attempt)
	}
	if string(c.Value) != `{"event":"evt_1","outcome":"delivered"}` {
		t.Errorf("redelivery value %s, want the settled one", c.Value)
	}
	if c.Entry == nil || c.Entry.State != ledger.StateCommitted {
		t.Fatalf("redelivery entry %+v, want the committed entry", c.Entry)
	}
	// The caller's copy is its own.
	c.Entry.State = ledger.StatePending
	if again, _, err := e.redeliver(t, l, "evt_1"); err != nil || again.Entry.State != ledger.StateCommitted {
		t.Errorf("after the caller changed its copy: %+v, %v", again.Entry, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := events[len(events)-1]; got != string(ledger.StatusReplayed) {
		t.Errorf("last observed event %q, want replayed", got)
	}

	// A new event still needs the store, and gets its error.
	e.store.down.Store(true)
	if _, calls, err := e.redeliver(t, l, "evt_2"); !errors.Is(err, errDown) || calls != 1 {
		t.Errorf("new event while the store is down: %d calls, %v; want the store's error", calls, err)
	}
}

func TestAgentClaimOfACommittedWriteNeedsNoStore(t *testing.T) {
	e := newReplayEnv()
	l := e.ledger(ledger.Options{})
	key := ledger.Key{Scope: "conv:1", Intent: "reply", Payload: map[string]any{"text": "hello"}}
	r, err := l.Once(e.ctx, key, func(context.Context, ledger.Call) (any, error) { return "sent", nil })
	if err != nil || r.Status != ledger.StatusExecuted {
		t.Fatalf("first Once: %+v, %v", r, err)
	}
	e.store.down.Store(true)
	before := e.store.calls.Load()
	c, err := l.Claim(e.ctx, ledger.ClaimRequest{Key: key})
	if err != nil || c.Status != ledger.StatusReplayed || string(c.Value) != `"sent"` {
		t.Fatalf("claim of a committed write while the store is down: %+v, %v", c, err)
	}
	if n := e.store.calls.Load() - before; n != 0 {
		t.Errorf("%d store calls, want 0", n)
	}
}

func TestAnotherProcessLearnsFromTheStoreFirst(t *testing.T) {
	e := newReplayEnv()
	a, b := e.ledger(ledger.Options{}), e.ledger(ledger.Options{})
	e.settle(t, a, "evt_1", ledger.OutcomeCommitted)

	c, calls, err := e.redeliver(t, b, "evt_1")
	if err != nil || c.Status != ledger.StatusReplayed || calls != 1 {
		t.Fatalf("redelivery to the other process: %s, %d calls, %v; want replayed from the store", c.Status, calls, err)
	}
	c, calls, err = e.redeliver(t, b, "evt_1")
	if err != nil || c.Status != ledger.StatusReplayed || calls != 0 {
		t.Fatalf("its second redelivery: %s, %d calls, %v; want replayed from memory", c.Status, calls, err)
	}
}

// Near the end of retention a remembered entry is no longer used: the store
// decides, and once the entry is gone the event is delivered again, as it
// would be without the memory.
func TestRememberedEntriesStopBeforeRetentionEnds(t *testing.T) {
	e := newReplayEnv()
	const retention = 2 * time.Hour
	l := e.ledger(ledger.Options{Retention: retention})
	e.settle(t, l, "evt_1", ledger.OutcomeCommitted)

	e.clock.Advance(retention - 11*time.Minute)
	if c, calls, err := e.redeliver(t, l, "evt_1"); err != nil || c.Status != ledger.StatusReplayed || calls != 0 {
		t.Fatalf("well within retention: %s, %d calls, %v; want replayed from memory", c.Status, calls, err)
	}
	e.clock.Advance(2 * time.Minute) // within the margin before retention ends
	if c, calls, err := e.redeliver(t, l, "evt_1"); err != nil || c.Status != ledger.StatusReplayed || calls != 1 {
		t.Fatalf("near the end of retention: %s, %d calls, %v; want replayed by the store", c.Status, calls, err)
	}
	e.clock.Advance(10 * time.Minute) // past retention: the store has forgotten it
	if c, calls, err := e.redeliver(t, l, "evt_1"); err != nil || !c.Acquired() || calls != 1 {
		t.Fatalf("past retention: %s, %d calls, %v; want claimed anew by the store", c.Status, calls, err)
	}
}

func TestOnlyCommittedEntriesAreRemembered(t *testing.T) {
	e := newReplayEnv()
	l := e.ledger(ledger.Options{})

	// Not applied: the next delivery must be able to claim a new attempt.
	first := e.settle(t, l, "evt_1", ledger.OutcomeNotApplied)
	if c, calls, err := e.redeliver(t, l, "evt_1"); err != nil || !c.Acquired() || c.Attempt != first.Attempt+1 || calls != 1 {
		t.Fatalf("after not applied: %s attempt %d, %d calls, %v; want attempt %d claimed through the store", c.Status, c.Attempt, calls, err, first.Attempt+1)
	}

	// A settle that failed in the store is not known to have landed.
	ro, req := deliver("evt_2")
	_, c, err := l.BeginClaim(e.ctx, ro, req)
	if err != nil || !c.Acquired() {
		t.Fatal(c, err)
	}
	e.store.down.Store(true)
	if _, err := l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, "done", nil); !errors.Is(err, errDown) {
		t.Fatalf("settle while the store is down: %v", err)
	}
	e.store.down.Store(false)
	if c, calls, err := e.redeliver(t, l, "evt_2"); err != nil || c.Status != ledger.StatusInFlight || calls != 1 {
		t.Fatalf("after a failed settle: %s, %d calls, %v; want in flight, from the store", c.Status, calls, err)
	}
}

func TestReplayCacheCanBeTurnedOff(t *testing.T) {
	e := newReplayEnv()
	l := e.ledger(ledger.Options{ReplayCache: -1})
	e.settle(t, l, "evt_1", ledger.OutcomeCommitted)
	if c, calls, err := e.redeliver(t, l, "evt_1"); err != nil || c.Status != ledger.StatusReplayed || calls != 1 {
		t.Fatalf("with the memory off: %s, %d calls, %v; want replayed from the store", c.Status, calls, err)
	}
}

func TestReplayCacheIsBounded(t *testing.T) {
	e := newReplayEnv()
	l := e.ledger(ledger.Options{ReplayCache: 4})
	for i := range 10 {
		e.settle(t, l, fmt.Sprint("evt_", i), ledger.OutcomeCommitted)
	}
	if n := ledger.ReplayCacheLen(l); n > 4 {
		t.Errorf("%d entries remembered, want at most 4", n)
	}
	// The latest are remembered, the earliest went back to the store.
	if _, calls, _ := e.redeliver(t, l, "evt_9"); calls != 0 {
		t.Errorf("latest event: %d store calls, want 0", calls)
	}
	if c, calls, err := e.redeliver(t, l, "evt_0"); err != nil || c.Status != ledger.StatusReplayed || calls != 1 {
		t.Errorf("earliest event: %s, %d calls, %v; want replayed from the store", c.Status, calls, err)
	}
}

// Many goroutines deliver, settle and redeliver their own events at once:
// every redelivery is answered with its own event's value.
func TestReplayCacheUnderConcurrency(t *testing.T) {
	e := newReplayEnv()
	l := e.ledger(ledger.Options{ReplayCache: 64}) // small, so generations turn over meanwhile
	const workers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("evt_%d_%d", w, i)
				ro, req := deliver(id)
				_, c, err := l.BeginClaim(e.ctx, ro, req)
				if err != nil || !c.Acquired() {
					errs <- fmt.Errorf("%s: %+v %v", id, c, err)
					return
				}
				if _, err := l.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, id, nil); err != nil {
					errs <- err
					return
				}
				for range 3 {
					_, c, err := l.BeginClaim(e.ctx, ro, req)
					if err != nil || c.Status != ledger.StatusReplayed || string(c.Value) != `"`+id+`"` {
						errs <- fmt.Errorf("redelivery of %s: %s %s %v", id, c.Status, c.Value, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReplayedValueIsTheStoredOneNotTheCallersBuffer pins that what a
// process replays from memory is what the store holds: a copy in its
// compact form, untouched when the caller reuses the buffer it settled
// with, and the same bytes another instance reads from the store.
func TestReplayedValueIsTheStoredOneNotTheCallersBuffer(t *testing.T) {
	e := newReplayEnv()
	settler := e.ledger(ledger.Options{})
	other := e.ledger(ledger.Options{ReplayCache: -1})
	ro, req := deliver("evt_buf")
	_, c, err := settler.BeginClaim(e.ctx, ro, req)
	if err != nil || !c.Acquired() {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	buf := []byte(`{ "reply" : "a<b",  "n": 1 }`)
	settled, err := settler.Settle(e.ctx, c.Ref(), ledger.OutcomeCommitted, json.RawMessage(buf), nil)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, `{ "reply" : "XXX",  "n": 2 }`) // the caller reuses its buffer
	// and scribbles over the value Settle handed back
	for i := range settled.Value {
		settled.Value[i] = 'X'
	}

	_, fromStore, err := other.BeginClaim(e.ctx, ro, req)
	if err != nil || fromStore.Status != ledger.StatusReplayed {
		t.Fatalf("replay from the store: %+v, %v", fromStore, err)
	}
	fromMemory, calls, err := e.redeliver(t, settler, "evt_buf")
	if err != nil || fromMemory.Status != ledger.StatusReplayed || calls != 0 {
		t.Fatalf("replay from memory: %+v after %d store calls, %v", fromMemory, calls, err)
	}
	const want = `{"reply":"a\u003cb","n":1}`
	if string(fromStore.Value) != want {
		t.Errorf("the store replays %s, want %s", fromStore.Value, want)
	}
	if string(fromMemory.Value) != string(fromStore.Value) {
		t.Errorf("memory replays %s, the store %s: two instances would answer differently", fromMemory.Value, fromStore.Value)
	}
	// A caller that changes what it was handed changes nothing for the next.
	fromMemory.Value[2] = 'X'
	again, _, _ := e.redeliver(t, settler, "evt_buf")
	if string(again.Value) != want {
		t.Errorf("after a caller changed its replayed value, memory replays %s", again.Value)
	}
}
