package storetest

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
)

// NewStore returns a fresh, empty store, isolated from every other store
// the suite asks for. It registers its own cleanup with t.
type NewStore func(t *testing.T) ledger.Store

// Start is where the suite's clocks begin.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	store ledger.Store
	clock *Clock
	l     *ledger.Ledger
	ctx   context.Context
}

func setup(t *testing.T, newStore NewStore, opts ledger.Options) *env {
	t.Helper()
	clock := NewClock(start)
	opts.Clock = clock.Now
	if opts.ReplayCache == 0 {
		// The suite is about the store: every claim must reach it, also
		// those the ledger could answer from its memory of committed
		// entries (tested in package ledger).
		opts.ReplayCache = -1
	}
	store := newStore(t)
	return &env{t: t, store: store, clock: clock, l: ledger.New(store, opts), ctx: context.Background()}
}

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"StoreContract", testStoreContract},
		{"StoreAtomicIncrements", testAtomicIncrements},
		{"RacingOnceAndLateReplay", testRacingOnce},
		{"ManyGoroutinesManyKeys", testManyKeys},
		{"RedeliveryStorm", testRedeliveryStorm},
		{"SupersededDeliveries", testSupersededDeliveries},
		{"SequenceDiagram", testSequenceDiagram},
		{"NotAppliedRetriedThenExhausted", testExhausted},
		{"OtherErrorsAreAmbiguous", testAmbiguousError},
		{"PendingPastTTL", testPendingPastTTL},
		{"Reconciler", testReconciler},
		{"OperatorResolve", testResolve},
		{"LateSettle", testLateSettle},
		{"SupersedeRules", testSupersedeRules},
		{"ExclusiveLease", testExclusive},
		{"CancelAndEnd", testCancelEnd},
		{"StaleDeliveryCannotEnd", testStaleEnd},
		{"ConflictModes", testConflictModes},
		{"Retention", testRetention},
		{"BeginClaim", testBeginClaim},
		{"BadInputChangesNothing", testBadInput},
		{"Blobs", testBlobs},
		{"AbsentRecords", testAbsentRecords},
		{"DueIndex", testDueIndex},
		{"IndexesAfterExpiry", testIndexesAfterExpiry},
		{"DueBetween", testDueBetween},
		{"ParkAndUnpark", testParkAndUnpark},
		{"ReceivedIndex", testReceivedIndex},
		{"RecentDeliveries", testRecentDeliveries},
		{"EnqueueStored", testEnqueueStored},
		{"EventRecordsWhereverKept", testEventRecordsWhereverKept},
		{"DueDeliveries", testDueDeliveries},
		{"DueDeliveriesSkipping", testDueDeliveriesSkipping},
		{"CountDue", testCountDue},
		{"DeliveryLease", testDeliveryLease},
		{"ReplayAndDead", testReplayAndDead},
		{"RunFinishedByHandNotForwarded", testRunFinishedByHandNotForwarded},
		{"TrialChangesNothingButItsRecord", testTrialChangesNothingButItsRecord},
		{"DuplicateSeesEveryProcess", testDuplicateSeesEveryProcess},
		{"ListDeliveries", testListDeliveries},
		{"ScopeOrder", testScopeOrder},
		{"NewestWins", testNewestWins},
		{"Debounce", testDebounce},
		{"AbandonedClaimOutlivesRetention", testAbandonedKept},
		{"ResolvedNotAppliedThenLateCommit", testResolvedThenLateCommit},
		{"ExpiredRedeliverableFreesScope", testExpiredRedeliverable},
		{"LeaseTTLKeptOnRenewal", testLeaseTTLKept},
		{"ContextAtOutOfRange", testContextAtOutOfRange},
		{"ExclusiveRedeliveryAfterLostLease", testExclusiveRedelivery},
		{"BeginClaimOnFinishedRun", testBeginClaimEndedRun},
		{"CorruptDocument", testCorruptDocument},
		{"ContextMapping", testContextMapping},
		{"ContextMappingClockSkew", testContextMappingSkew},
		{"EarlierDeliveryConflicts", testEarlierDeliveryConflicts},
		{"TokenSurvivesExpiry", testTokenSurvivesExpiry},
		{"MaxAttemptsCountsFailures", testMaxAttemptsCountsFailures},
		{"SettlePastDeadlineFlagged", testSettlePastDeadlineFlagged},
		{"CapLimitsIntent", testCapLimitsIntent},
		{"CapCounts", testCapCounts},
		{"CapWithRuns", testCapWithRuns},
		{"CapRace", testCapRace},
		{"CommittedValue", testCommittedValue},
		{"OperatorResolveAs", testResolveAs},
		{"Conversation", testConversation},
		{"AmbiguousWriteConflicts", testAmbiguousWriteConflicts},
		{"ControlRecords", testControlRecords},
		{"PausedSourcesRecord", testPausedSourcesRecord},
		{"VerificationCounts", testVerificationCounts},
		{"AgentIncidents", testAgentIncidents},
		{"ContentClaims", testContentClaims},
		{"LongScopeDuplicates", testLongScopeDuplicates},
		{"LongScopeFailedRetried", testLongScopeFailedRetried},
		{"LongScopeDeliveries", testLongScopeDeliveries},
		{"LongScopeRuns", testLongScopeRuns},
		{"LongWaitingQueue", testLongWaitingQueue},
		{"LongWaitingQueueOperations", testLongWaitingQueueOperations},
		{"LongDebounceBurst", testLongDebounceBurst},
		{"LongScopeDeliveryPageReads", testLongScopeDeliveryPageReads},
		{"LongScopeConflicts", testLongScopeConflicts},
		{"LongScopeRetention", testLongScopeRetention},
		{"LongScopeResolve", testLongScopeResolve},
		{"LongScopeHistoryPages", testLongScopeHistoryPages},
		{"LongScopeHistoryPagesWrites", testLongScopeHistoryPagesWrites},
		{"LongScopeHistoryPageReads", testLongScopeHistoryPageReads},
		{"LongScopeClaimReads", testLongScopeClaimReads},
		{"LongScopePaged", testLongScopePaged},
		{"LongScopeOldContextsRace", testLongScopeOldContextsRace},
		{"LongScopeListingsShared", testLongScopeListingsShared},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					f, ok := r.(failure)
					if !ok {
						panic(r)
					}
					t.Fatalf("unexpected error: %v", f.err)
				}
			}()
			tc.fn(t, newStore)
		})
	}
}

// failure carries an unexpected error from must to the subtest that
// recovers it, so assertions stay one line long.
type failure struct{ err error }

// must returns v, or ends the current subtest on err. Use it only on the
// test's own goroutine.
func must[T any](v T, err error) T {
	if err != nil {
		panic(failure{err})
	}
	return v
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func wantStatus(t *testing.T, what string, r ledger.Result, status ledger.Status, reason ledger.Reason) {
	t.Helper()
	if r.Status != status || r.Reason != reason {
		t.Fatalf("%s: got %s/%s, want %s/%s", what, r.Status, r.Reason, status, reason)
	}
}

func count(n *atomic.Int64, value any) ledger.Effect {
	return func(ctx context.Context, c ledger.Call) (any, error) {
		n.Add(1)
		return value, nil
	}
}

func testStoreContract(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	scope := "contract"
	if doc, err := s.Read(ctx, scope); err != nil || doc != nil {
		t.Fatalf("read of a missing scope: %q, %v; want nil, nil", doc, err)
	}
	sentinel := errors.New("decided not to")
	if err := s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) { return nil, sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("fn error not passed through: %v", err)
	}
	if err := s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if doc, _ := s.Read(ctx, scope); doc != nil {
		t.Fatalf("nil write or failed fn wrote %q", doc)
	}
	review := start.Add(time.Minute)
	write := func(doc string, at time.Time) {
		t.Helper()
		err := s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(doc), TTL: time.Hour, ReviewAt: at}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write(`{"n":1}`, review)
	var seen []byte
	_ = s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) { seen = cur; return nil, nil })
	assertJSON(t, seen, `{"n":1}`)
	assertJSON(t, must(s.Read(ctx, scope)), `{"n":1}`)
	if got := must(s.ScopesToReview(ctx, review.Add(-time.Second), 10)); len(got) != 0 {
		t.Fatalf("scopes to review before their time: %v", got)
	}
	if got := must(s.ScopesToReview(ctx, review, 10)); len(got) != 1 || got[0] != scope {
		t.Fatalf("scopes to review: %v, want [%s]", got, scope)
	}
	write(`{"n":2}`, time.Time{})
	if got := must(s.ScopesToReview(ctx, review.Add(time.Hour), 10)); len(got) != 0 {
		t.Fatalf("a write without review time left the scope listed: %v", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Transact(cancelled, scope, func(cur []byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(`{"n":3}`)}, nil
	}); err == nil {
		t.Fatal("transact with a cancelled context succeeded")
	}
	assertJSON(t, must(s.Read(ctx, scope)), `{"n":2}`)
}

func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("stored document %q is not JSON: %v", got, err)
	}
	_ = json.Unmarshal([]byte(want), &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("document = %s, want %s", got, want)
	}
}

// testAtomicIncrements: many goroutines read-modify-write one counter; a
// lost update shows as a short total.
func testAtomicIncrements(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	const workers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := s.Transact(ctx, "counter", func(cur []byte) (*ledger.Write, error) {
					var doc struct{ N int }
					if cur != nil {
						if err := json.Unmarshal(cur, &doc); err != nil {
							return nil, err
						}
					}
					doc.N++
					b, _ := json.Marshal(doc)
					return &ledger.Write{Doc: b}, nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	assertJSON(t, must(s.Read(ctx, "counter")), fmt.Sprintf(`{"N":%d}`, workers*each))
}

func testRacingOnce(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	key := ledger.Key{Scope: "order-A-1001", Intent: "refund", Payload: map[string]any{"order": "A-1001", "cents": 2500}}
	var runs atomic.Int64
	release := make(chan struct{})
	effect := func(ctx context.Context, c ledger.Call) (any, error) {
		runs.Add(1)
		<-release // stay in flight until the other two callers have answered
		return map[string]string{"refundId": "re_1"}, nil
	}
	results := make([]ledger.Result, 3)
	var wg sync.WaitGroup
	var others sync.WaitGroup
	others.Add(2)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.l.Once(e.ctx, key, effect)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
			if r.Status != ledger.StatusExecuted {
				others.Done()
			}
		}()
	}
	// Release the winner once both losers have their answer.
	go func() { others.Wait(); close(release) }()
	wg.Wait()
	executed, inFlight := 0, 0
	for _, r := range results {
		switch r.Status {
		case ledger.StatusExecuted:
			executed++
		case ledger.StatusInFlight:
			inFlight++
		}
	}
	if executed != 1 || inFlight != 2 || runs.Load() != 1 {
		t.Fatalf("statuses %v %v %v, effect ran %d times; want one executed, two in_flight, one run",
			results[0].Status, results[1].Status, results[2].Status, runs.Load())
	}
	late := must(e.l.Once(e.ctx, key, count(&runs, "never")))
	wantStatus(t, "late call", late, ledger.StatusReplayed, "")
	assertJSON(t, late.Value, `{"refundId":"re_1"}`)
	if runs.Load() != 1 {
		t.Fatalf("late call ran the effect again")
	}
}

func testManyKeys(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	const goroutines, keys = 200, 20
	var counts [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := g % keys
			key := ledger.Key{Scope: fmt.Sprintf("conv-%d", k), Intent: "reply", Payload: map[string]int{"message": k}}
			r, err := e.l.Once(e.ctx, key, count(&counts[k], k), ledger.OnceOptions{Wait: 5 * time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			if !r.OK() {
				t.Errorf("key %d: %s/%s after waiting", k, r.Status, r.Reason)
			}
		}()
	}
	wg.Wait()
	for k := range counts {
		if n := counts[k].Load(); n != 1 {
			t.Errorf("key %d: effect ran %d times, want exactly 1", k, n)
		}
	}
}
