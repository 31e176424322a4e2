package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

// bytesStore counts what the writes through it send: documents and side
// records, names included.
type bytesStore struct {
	ledger.Store
	written   atomic.Int64
	docLen    atomic.Int64
	listReads atomic.Int64
}

// ReadBlob counts the reads of listings records.
func (s *bytesStore) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	if strings.HasPrefix(name, "ls:") {
		s.listReads.Add(1)
	}
	return s.Store.ReadBlob(ctx, scope, name)
}

func (s *bytesStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	var n, doc int64
	err := s.Store.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
		w, err := fn(cur)
		n, doc = 0, 0
		if w != nil && err == nil {
			n, doc = int64(len(w.Doc)), int64(len(w.Doc))
			for name, b := range w.Blobs {
				n += int64(len(name) + len(b))
			}
		}
		return w, err
	})
	if err == nil {
		s.written.Add(n)
		if doc > 0 {
			s.docLen.Store(doc)
		}
	}
	return err
}

// grow settles effects on scope, one Once each, one second apart.
func grow(t *testing.T, l *ledger.Ledger, clock *storetest.Clock, scope string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := l.Once(context.Background(), ledger.Key{Scope: scope, Intent: "note", Payload: i},
			func(context.Context, ledger.Call) (any, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
}

// A scope grown one effect at a time to thousands within retention writes
// per effect what it wrote after a few dozen: the listings of what its
// history moved out leave the document for a record of their own, written
// once per few listings added (issue #34: bytes moved per step independent
// of the scope's size).
func TestLongScopeWritesWhatAShortOneWrites(t *testing.T) {
	clock := storetest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	st := &bytesStore{Store: memory.New(clock.Now)}
	l := ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour, ReplayCache: -1})
	perEffect := func(from, to int) (float64, int64) {
		st.written.Store(0)
		grow(t, l, clock, "long", from, to)
		return float64(st.written.Load()) / float64(to-from), st.docLen.Load()
	}
	grow(t, l, clock, "long", 0, 200)
	short, shortDoc := perEffect(200, 400)
	grow(t, l, clock, "long", 400, 4000)
	long, longDoc := perEffect(4000, 4200)
	ownReads := st.listReads.Load()
	lists, err := ledger.ReadListings(context.Background(), st, "long")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bytes per effect %.0f after 200 effects, %.0f after 4,000 (%.3f); document %d and %d bytes; %d chunk and %d page listings, %d landing chunks and %d pages, record %s",
		short, long, long/short, shortDoc, longDoc, len(lists.Chunks), len(lists.Pages), lists.LandChunks, lists.LandPages, lists.Record)
	if len(lists.Pages) == 0 || lists.Record == "" {
		t.Fatalf("after 4,200 effects the scope lists no spill page or no listings record: the case tests nothing")
	}
	if long > short*1.05 {
		t.Errorf("an effect writes %.0f bytes after 4,000 effects, %.0f after 200: more than 1.05 times", long, short)
	}
	if longDoc > shortDoc+300 {
		t.Errorf("the document is %d bytes after 4,200 effects, %d after 400", longDoc, shortDoc)
	}
	// The one ledger writing the scope remembers the records it wrote.
	if ownReads != 0 {
		t.Errorf("the ledger read its own listings records %d times", ownReads)
	}
}

// A step that needs the listings record and changes none of its listings
// (a run whose context predates the history it maps) leaves the record as
// it is: it is not written again.
func TestListingsRecordReadIsNotRewritten(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	st := &bytesStore{Store: memory.New(clock.Now)}
	l := ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour})
	began := clock.Now()
	clock.Advance(time.Second)
	name := longScope(t, l, st, clock, "long", 600)
	fresh := ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour})
	st.listReads.Store(0)
	run, err := fresh.Begin(ctx, "long", ledger.RunOptions{RunID: "old", Mode: ledger.ModeIndependent, ContextAt: began})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.listReads.Load(); n != 1 {
		t.Fatalf("a run begun before the history read the listings record %d times, want once", n)
	}
	lists, err := ledger.ReadListings(ctx, st, "long")
	if err != nil || lists.Record != name {
		t.Fatalf("after the run began the document names %q (%v), want %s as before", lists.Record, err, name)
	}
	// It sees every effect as a change.
	c, err := run.Claim(ctx, "reply", "r", ledger.OnceOptions{Conflict: ledger.ConflictAny})
	if err != nil || c.Status != ledger.StatusRefused || len(c.Conflicts) == 0 {
		t.Fatalf("a claim of the old run: %v with %d conflicts (%v); want refused", c.Status, len(c.Conflicts), err)
	}
}

// longScope grows a scope until its listings moved into a record, and
// returns the record's name.
func longScope(t *testing.T, l *ledger.Ledger, st ledger.Store, clock *storetest.Clock, scope string, effects int) string {
	t.Helper()
	grow(t, l, clock, scope, 0, effects)
	lists, err := ledger.ReadListings(context.Background(), st, scope)
	if err != nil {
		t.Fatal(err)
	}
	if lists.Record == "" {
		t.Fatalf("%d effects and no listings record", effects)
	}
	return lists.Record
}

// A listings record that is not the one the document names, as a store
// holds it, is corruption: what needs it fails with ErrCorrupt naming it,
// and nothing is written.
func TestListingsRecordCorruptIsErrCorrupt(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	st := memory.New(clock.Now)
	l := ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour})
	began := clock.Now()
	clock.Advance(time.Second)
	name := longScope(t, l, st, clock, "long", 600)
	var doc []byte
	if err := st.Transact(ctx, "long", func(cur []byte) (*ledger.Write, error) {
		doc = cur
		return &ledger.Write{Doc: cur, TTL: time.Hour, Blobs: map[string][]byte{name: []byte(`{"spilled":[]}`)}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	fresh := ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour})
	if _, err := fresh.Views().History(ctx, "long"); !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), name) {
		t.Errorf("history over a corrupt listings record: %v; want ErrCorrupt naming %s", err, name)
	}
	// A run whose context predates the whole history maps it through
	// the landings the record lists.
	run, err := fresh.Begin(ctx, "long", ledger.RunOptions{RunID: "old", Mode: ledger.ModeIndependent, ContextAt: began})
	if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), name) {
		t.Errorf("a run begun before the history over a corrupt listings record: %v, %v; want ErrCorrupt naming %s", run, err, name)
	}
	after, err := st.Read(ctx, "long")
	if err != nil || string(after) != string(doc) {
		t.Errorf("the document changed: %v", err)
	}
}

// A ledger that remembers other bytes under the name of the listings
// record in force (a record of an earlier scope of the same name, which
// its store deleted, and which grew again to the same record number)
// reads the record in force: the checksum tells them apart.
func TestListingsRecordRememberedFromAnEarlierScope(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	st := memory.New(clock.Now)
	l := ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour, ReplayCache: -1})
	name := longScope(t, l, st, clock, "long", 600)
	rec, err := st.ReadBlob(ctx, "long", name)
	if err != nil || rec == nil {
		t.Fatalf("record %s: %v", name, err)
	}
	// The earlier scope's record: the same, but for its newest chunk.
	var lists map[string][]int64
	if err := json.Unmarshal(rec, &lists); err != nil {
		t.Fatal(err)
	}
	switch {
	case len(lists["spilled"]) > 0:
		lists["spilled"] = lists["spilled"][:len(lists["spilled"])-11]
	case len(lists["spillPages"]) > 0:
		lists["spillPages"] = lists["spillPages"][:len(lists["spillPages"])-14]
	default:
		t.Fatalf("record %s lists no spilled chunk: %s", name, rec)
	}
	earlier, err := json.Marshal(lists)
	if err != nil {
		t.Fatal(err)
	}
	ledger.RememberListings(l, "long", name, earlier)
	h, err := l.Views().History(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 600 {
		t.Fatalf("the ledger that remembers the earlier record lists %d entries for 600 effects", len(h))
	}
}

// Two ledgers (two gateway processes) taking turns on one long scope
// each move its listings on from the record the other wrote: every effect
// runs once and the history lists each once.
func TestListingsRecordTwoLedgersTakeTurns(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	st := memory.New(clock.Now)
	ls := []*ledger.Ledger{
		ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour, ReplayCache: -1}),
		ledger.New(st, ledger.Options{Clock: clock.Now, Retention: 24 * time.Hour, ReplayCache: -1}),
	}
	var ran atomic.Int64
	const effects = 900
	for round := range 2 {
		for i := range effects {
			l := ls[(i/7+round)%2]
			res, err := l.Once(ctx, ledger.Key{Scope: "long", Intent: "note", Payload: i},
				func(context.Context, ledger.Call) (any, error) { ran.Add(1); return i, nil })
			if err != nil {
				t.Fatal(err)
			}
			if want := []ledger.Status{ledger.StatusExecuted, ledger.StatusReplayed}[round]; res.Status != want {
				t.Fatalf("round %d, effect %d: %s, want %s", round, i, res.Status, want)
			}
			clock.Advance(time.Second)
		}
	}
	if n := ran.Load(); n != effects {
		t.Errorf("%d effects ran for %d keys", n, effects)
	}
	lists, err := ledger.ReadListings(ctx, st, "long")
	if err != nil || lists.Record == "" {
		t.Fatalf("no listings record after %d effects: %v", effects, err)
	}
	for _, l := range ls {
		h, err := l.Views().History(ctx, "long")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range h {
			if seen[e.ID] {
				t.Fatalf("history lists %s twice", e.ID)
			}
			seen[e.ID] = true
		}
		if len(h) != effects {
			t.Errorf("history lists %d entries for %d effects", len(h), effects)
		}
	}
}
