package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testControlRecords: control records are read and written atomically
// by name, an error or a nil record writes nothing, and they never meet a
// scope of any name: a scope named like a control record (or like the old
// reserved scope of paused sources) is another record.
func testControlRecords(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	s := e.store
	if rec, err := s.ReadControl(e.ctx, "paused-sources"); err != nil || rec != nil {
		t.Fatalf("absent control record: %q, %v", rec, err)
	}
	noErr(t, s.TransactControl(e.ctx, "paused-sources", func(cur []byte) ([]byte, error) {
		if cur != nil {
			t.Errorf("first write saw %q", cur)
		}
		return []byte(`{"gh":true}`), nil
	}))
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{"gh":true}` {
		t.Fatalf("read back %q", rec)
	}
	boom := errors.New("refused")
	if err := s.TransactControl(e.ctx, "paused-sources", func(cur []byte) ([]byte, error) {
		if string(cur) != `{"gh":true}` {
			t.Errorf("second write saw %q", cur)
		}
		return []byte(`{"x":1}`), boom
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error came back as %v", err)
	}
	noErr(t, s.TransactControl(e.ctx, "paused-sources", func([]byte) ([]byte, error) { return nil, nil }))
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{"gh":true}` {
		t.Fatalf("after a refused and an empty write: %q", rec)
	}

	// Scopes named like the record, however spelled, are documents of
	// their own; writing them changes no control record and the other way
	// round.
	for _, scope := range []string{"paused-sources", "control:paused-sources", "replyonce:control:paused-sources", ":control:paused-sources"} {
		noErr(t, s.Transact(e.ctx, scope, func([]byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{"scope":` + strconv.Quote(scope) + `}`), ReceivedAt: start}, nil
		}))
	}
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{"gh":true}` {
		t.Fatalf("scopes named like the control record changed it: %q", rec)
	}
	noErr(t, s.TransactControl(e.ctx, "paused-sources", func([]byte) ([]byte, error) { return []byte(`{}`), nil }))
	for _, scope := range []string{"paused-sources", "control:paused-sources", "replyonce:control:paused-sources"} {
		if doc := must(s.Read(e.ctx, scope)); !bytes.Contains(doc, []byte(strconv.Quote(scope))) {
			t.Fatalf("scope %q after a control write: %q", scope, doc)
		}
	}
	// Control records are in no scope listing: the four scopes are all
	// there is.
	var listed []string
	for _, at := range must(s.ScopesReceived(e.ctx, ledger.ScopeAt{}, 100)) {
		listed = append(listed, at.Scope)
	}
	slices.Sort(listed)
	if want := []string{":control:paused-sources", "control:paused-sources", "paused-sources", "replyonce:control:paused-sources"}; !slices.Equal(listed, want) {
		t.Fatalf("scopes listed: %q, want %q", listed, want)
	}
	// They do not expire with time.
	e.clock.Advance(400 * 24 * time.Hour)
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{}` {
		t.Fatalf("a year on: %q", rec)
	}

	// Concurrent writers of one record, from two store handles where the
	// store has them: no increment is lost.
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := s.TransactControl(e.ctx, "counter", func(cur []byte) ([]byte, error) {
				c := 0
				if cur != nil {
					var err error
					if c, err = strconv.Atoi(string(cur)); err != nil {
						return nil, err
					}
				}
				return []byte(strconv.Itoa(c + 1)), nil
			})
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if rec := must(s.ReadControl(e.ctx, "counter")); string(rec) != strconv.Itoa(n) {
		t.Fatalf("%d increments left %q", n, rec)
	}
}

// testPausedSourcesRecord: the paused sources live in a control record.
// A gateway upgraded in place still knows the sources an earlier release
// paused in the old reserved scope, and moves them into the record on the
// first read or change; from then on that scope is never read. A corrupt record,
// or a corrupt old scope, reads as nothing paused with ErrCorruptControl,
// stops no dispatch, and the next pause or resume writes a fresh one.
func testPausedSourcesRecord(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	const legacy = "replyonce:control:paused-sources"
	writeScope := func(doc string) {
		t.Helper()
		noErr(t, e.store.Transact(e.ctx, legacy, func([]byte) (*ledger.Write, error) { return &ledger.Write{Doc: []byte(doc)}, nil }))
	}
	paused := func() string {
		t.Helper()
		set, err := e.l.Sources().PausedSources(e.ctx)
		noErr(t, err)
		return fmt.Sprint(set)
	}
	writeScope(`{"gh":true,"old":true}`)
	if got := paused(); got != "map[gh:true old:true]" {
		t.Fatalf("paused by an earlier release: %s", got)
	}
	if rec := must(e.store.ReadControl(e.ctx, "paused-sources")); string(rec) != `{"gh":true,"old":true}` {
		t.Fatalf("the first read left the record %q, want the old scope's set in it", rec)
	}
	noErr(t, e.l.Sources().SetSourcePaused(e.ctx, "src", true))
	if got := paused(); got != "map[gh:true old:true src:true]" {
		t.Fatalf("after the first pause since the upgrade: %s", got)
	}
	// The old scope is not read any more.
	writeScope(`{"evil":true}`)
	noErr(t, e.l.Sources().SetSourcePaused(e.ctx, "old", false))
	if got := paused(); got != "map[gh:true src:true]" {
		t.Fatalf("after a resume and a write to the old scope: %s", got)
	}

	// A corrupt record stops nothing.
	enqueue(t, e, "corrupt-control", "e1", false)
	noErr(t, e.store.TransactControl(e.ctx, "paused-sources", func([]byte) ([]byte, error) { return []byte(`{"gh":tru`), nil }))
	set, err := e.l.Sources().PausedSources(e.ctx)
	if !errors.Is(err, ledger.ErrCorruptControl) || set == nil || len(set) != 0 {
		t.Fatalf("corrupt record: %v, %v; want an empty set and ErrCorruptControl", set, err)
	}
	if due := must(e.l.Queue().Due(e.ctx, ledger.DueQuery{Limit: 10})); len(due) != 1 || due[0].EventID != "e1" {
		t.Fatalf("due deliveries with a corrupt record: %+v", due)
	}
	// Resuming a source that the corrupt record cannot say is paused
	// still rewrites it.
	noErr(t, e.l.Sources().SetSourcePaused(e.ctx, "gh", false))
	if got := paused(); got != "map[]" {
		t.Fatalf("after a resume over a corrupt record: %s", got)
	}
	noErr(t, e.l.Sources().SetSourcePaused(e.ctx, "gh", true))
	if got := paused(); got != "map[gh:true]" {
		t.Fatalf("after a pause: %s", got)
	}

	// An old scope that holds something else (a webhook's document, as
	// a release without reserved scopes let anyone write there) counts as
	// nothing paused, and the first pause starts the record afresh.
	e2 := setup(t, newStore, ledger.Options{})
	e = e2
	// On a store with neither, the first read writes an empty record,
	// so that a dispatcher's sweep reads one record, not two.
	if got := paused(); got != "map[]" {
		t.Fatalf("a new store: %s", got)
	}
	if rec := must(e.store.ReadControl(e.ctx, "paused-sources")); string(rec) != `{}` {
		t.Fatalf("the first read on a new store left the record %q, want {}", rec)
	}
	e = setup(t, newStore, ledger.Options{})
	writeScope(`{"v":3,"seq":1,"runs":{"x":{}}}`)
	if set, err := e.l.Sources().PausedSources(e.ctx); !errors.Is(err, ledger.ErrCorruptControl) || len(set) != 0 {
		t.Fatalf("old scope holding a document: %v, %v", set, err)
	}
	noErr(t, e.l.Sources().SetSourcePaused(e.ctx, "a", true))
	if got := paused(); got != "map[a:true]" {
		t.Fatalf("after a pause over a corrupt old scope: %s", got)
	}
}

// testVerificationCounts: the requests refused for their signature are
// counted per source and minute in a control record every process adds
// to, atomically; a new minute starts a new count, and a late write for
// an older minute changes nothing.
func testVerificationCounts(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	m0 := start.Truncate(time.Minute)
	rec := func(source string, minute time.Time, n int) int {
		t.Helper()
		return must(e.l.Sources().RecordVerificationFailures(e.ctx, source, minute, n))
	}
	if got := rec("gh", m0.Add(5*time.Second), 2); got != 2 {
		t.Fatalf("first count: %d, want 2", got)
	}
	if got := rec("gh", m0.Add(50*time.Second), 3); got != 5 {
		t.Fatalf("same minute: %d, want 5", got)
	}
	if got := rec("stripe", m0, 1); got != 1 {
		t.Fatalf("another source: %d, want 1", got)
	}
	if got := rec("gh", m0.Add(time.Minute), 1); got != 1 {
		t.Fatalf("the next minute: %d, want a new count of 1", got)
	}
	if got := rec("gh", m0, 4); got != 4 {
		t.Fatalf("a late write for the older minute: %d, want its own 4", got)
	}
	if got := rec("gh", m0.Add(time.Minute), 1); got != 2 {
		t.Fatalf("after a late write: %d, want 2 (the late one not added)", got)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.l.Sources().RecordVerificationFailures(e.ctx, "race", m0, 1); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := rec("race", m0, 1); got != 17 {
		t.Fatalf("16 concurrent writes and one more: %d, want 17", got)
	}
	if _, err := e.l.Sources().RecordVerificationFailures(e.ctx, "gh", m0, 0); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("a count of 0: %v, want ErrInvalid", err)
	}
}

// testAgentIncidents: a source's agent incident is shared by every
// process on the store. Failures open it once, its end is seen by one
// process, and failures of attempts that started before the agent last
// answered (stragglers, on any process) open no new one; a failure that
// started after does.
func testAgentIncidents(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	other := ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1})
	down := e.clock.Now()
	h := must(e.l.Sources().RecordAgentFailures(e.ctx, "src", 2, "refused", down))
	if !h.Failing || !h.Since.Equal(down) || h.Failures != 2 {
		t.Fatalf("after two failures: %+v", h)
	}
	if h = must(other.Sources().RecordAgentFailures(e.ctx, "src", 1, "refused", down)); h.Failures != 3 || !h.Since.Equal(down) {
		t.Fatalf("another process's failure joins the incident: %+v", h)
	}
	e.clock.Advance(time.Second)
	back := e.clock.Now()
	was, ended, err := other.Sources().EndAgentIncident(e.ctx, "src")
	if err != nil || !ended || was.Failures != 3 {
		t.Fatalf("end: %+v %v %v", was, ended, err)
	}
	if _, ended, _ := e.l.Sources().EndAgentIncident(e.ctx, "src"); ended {
		t.Fatal("the incident ended twice")
	}
	e.clock.Advance(time.Second)
	if h = must(e.l.Sources().RecordAgentFailures(e.ctx, "src", 4, "refused", back.Add(-time.Millisecond))); h.Failing {
		t.Fatalf("stragglers opened a new incident: %+v", h)
	}
	if hs := must(other.Sources().AgentHealths(e.ctx)); hs["src"].Failing {
		t.Fatalf("stragglers are stored as failing: %+v", hs["src"])
	}
	if h = must(e.l.Sources().RecordAgentFailures(e.ctx, "src", 1, "refused", back.Add(time.Millisecond))); !h.Failing || h.Failures != 1 || !h.Since.Equal(e.clock.Now()) {
		t.Fatalf("a failure after the recovery: %+v, want a new incident", h)
	}
}
