package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// waitQueued waits until n writes are queued behind HoldBatches.
func waitQueued(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	waitCount(t, "writes", n, func() int { return postgres.QueuedWrites(s) })
}

// waitCount waits until queued says n of what are queued.
func waitCount(t *testing.T, what string, n int, queued func() int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s queued, want %d", queued(), what, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Many goroutines writing to scopes of their own share commits, and every
// write is applied exactly once.
func TestGroupCommitManyScopes(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	t.Cleanup(s.Close)
	const goroutines, each = 64, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				// Half the writes create a scope, half update one.
				scope := fmt.Sprintf("g%d-%d", g, i/2)
				if err := s.Transact(testContext(t), scope, incr(strconv.Itoa(i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for g := range goroutines {
		for i := range each / 2 {
			scope := fmt.Sprintf("g%d-%d", g, i)
			c := decodeCounter(t, mustRead(t, s, scope))
			if c.N != 2 || len(c.IDs) != 2 || !c.IDs[strconv.Itoa(2*i)] || !c.IDs[strconv.Itoa(2*i+1)] {
				t.Fatalf("%s = %+v, want both of its writes exactly once", scope, c)
			}
		}
	}
	batches, writes := postgres.GroupCommits(s)
	if batches == 0 || writes <= batches {
		t.Fatalf("%d group commits carrying %d writes: nothing was grouped", batches, writes)
	}
	t.Logf("%d writes, %d of them in %d group commits", goroutines*each, writes, batches)
}

// A batch mixing creations, updates and a lost compare-and-set: the winners
// land, the loser retries on the fresh row and lands too.
func TestGroupCommitMixedOutcomes(t *testing.T) {
	s, pool := setup(t, postgres.Options{})
	t.Cleanup(s.Close)
	other := postgres.New(pool, postgres.Options{Table: s.Table()}) // another process, in effect
	for i := range 4 {
		mustTransact(t, s, fmt.Sprintf("old-%d", i), incr("a"))
	}
	// Move old-0 on behind s's back: s's cached version is now stale.
	mustTransact(t, other, "old-0", incr("b"))

	release := postgres.HoldBatches(s)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 4 {
		wg.Go(func() { errs <- s.Transact(testContext(t), fmt.Sprintf("old-%d", i), incr("c")) })
		wg.Go(func() { errs <- s.Transact(testContext(t), fmt.Sprintf("new-%d", i), incr("c")) })
	}
	waitQueued(t, s, 8)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if batches, writes := postgres.GroupCommits(s); batches != 1 || writes != 8 {
		t.Fatalf("%d group commits carrying %d writes, want 1 carrying 8", batches, writes)
	}
	want := map[string]int{"old-0": 3, "old-1": 2, "old-2": 2, "old-3": 2, "new-0": 1, "new-1": 1, "new-2": 1, "new-3": 1}
	for scope, n := range want {
		if c := decodeCounter(t, mustRead(t, s, scope)); c.N != n || len(c.IDs) != n {
			t.Errorf("%s = %+v, want %d distinct writes", scope, c, n)
		}
	}
}

// When the batch's transaction fails, every write in it fails, as a store
// error, and none of them is visible, although the server had applied some
// of them before reaching the failing row.
func TestGroupCommitFailureFailsEveryWriteAndWritesNothing(t *testing.T) {
	s, pool := setup(t, postgres.Options{})
	t.Cleanup(s.Close)
	ctx := testContext(t)
	mustTransact(t, s, "a-existing", incr("x"))
	// A trigger rejecting one scope: rows sorted before it are written
	// within the transaction before it fails.
	schema := quote(s.Table())[:len(quote(s.Table()))-len(`."replyonce_scopes"`)]
	if _, err := pool.Exec(ctx, `CREATE FUNCTION `+schema+`.poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.scope = 'zz-poison' THEN RAISE EXCEPTION 'poisoned scope'; END IF;
    RETURN NEW;
END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TRIGGER poison BEFORE INSERT OR UPDATE ON `+quote(s.Table())+
		` FOR EACH ROW EXECUTE FUNCTION `+schema+`.poison()`); err != nil {
		t.Fatal(err)
	}

	scopes := []string{"a-existing", "b-new", "c-new", "zz-poison"}
	release := postgres.HoldBatches(s)
	var wg sync.WaitGroup
	errs := make([]error, len(scopes))
	for i, scope := range scopes {
		wg.Go(func() { errs[i] = s.Transact(testContext(t), scope, incr("y")) })
	}
	waitQueued(t, s, len(scopes))
	release()
	wg.Wait()
	if batches, writes := postgres.GroupCommits(s); batches != 1 || writes != int64(len(scopes)) {
		t.Fatalf("%d group commits carrying %d writes, want 1 carrying %d", batches, writes, len(scopes))
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("%s: write succeeded in a failed batch", scopes[i])
		} else if errors.Is(err, ledger.ErrContention) {
			t.Errorf("%s: reported as contention: %v", scopes[i], err)
		}
	}
	if c := decodeCounter(t, mustRead(t, s, "a-existing")); c.N != 1 || c.IDs["y"] {
		t.Errorf("a-existing = %+v, want untouched", c)
	}
	for _, scope := range scopes[1:] {
		if got := mustRead(t, s, scope); got != nil {
			t.Errorf("%s = %q, want nothing", scope, got)
		}
	}

	// With the trigger gone the same writes go through, once each: what
	// the failure left cached was dropped.
	if _, err := pool.Exec(ctx, `DROP TRIGGER poison ON `+quote(s.Table())); err != nil {
		t.Fatal(err)
	}
	for _, scope := range scopes {
		mustTransact(t, s, scope, incr("y"))
	}
	if c := decodeCounter(t, mustRead(t, s, "a-existing")); c.N != 2 {
		t.Errorf("a-existing = %+v, want 2", c)
	}
	for _, scope := range scopes[1:] {
		if c := decodeCounter(t, mustRead(t, s, scope)); c.N != 1 {
			t.Errorf("%s = %+v, want 1", scope, c)
		}
	}
}

// A write whose context ends while it is queued leaves the queue, gets the
// context's error and is never sent; the others in the queue are not
// disturbed.
func TestGroupCommitCancelWhileQueued(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	t.Cleanup(s.Close)
	release := postgres.HoldBatches(s)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	var wg sync.WaitGroup
	var keptErr error
	wg.Go(func() { keptErr = s.Transact(testContext(t), "kept", incr("k")) })
	waitQueued(t, s, 1)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- s.Transact(ctx, "cancelled", incr("c")) }()
	waitQueued(t, s, 2)
	cancel()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled write stayed queued")
	}
	waitQueued(t, s, 1)

	// A deadline does the same.
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	start := time.Now()
	err := s.Transact(dctx, "late", incr("l"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v, want DeadlineExceeded promptly", err, time.Since(start))
	}

	released = true
	release()
	wg.Wait()
	if keptErr != nil {
		t.Fatal(keptErr)
	}
	if got := mustRead(t, s, "cancelled"); got != nil {
		t.Fatalf("cancelled write landed: %q", got)
	}
	if got := mustRead(t, s, "late"); got != nil {
		t.Fatalf("timed-out write landed: %q", got)
	}
	if c := decodeCounter(t, mustRead(t, s, "kept")); c.N != 1 {
		t.Fatalf("kept = %+v", c)
	}
	// The scope lock was released: the cancelled scope takes writes again.
	mustTransact(t, s, "cancelled", incr("c"))
}

// Close fails queued writes without sending them and waits for the group
// commit's goroutines; writes after Close fail.
func TestCloseFailsQueuedWrites(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	release := postgres.HoldBatches(s)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Transact(testContext(t), fmt.Sprintf("q%d", i), incr("")) })
	}
	waitQueued(t, s, len(errs))
	s.Close()
	wg.Wait()
	release()
	for i, err := range errs {
		if err == nil {
			t.Errorf("q%d: queued write succeeded across Close", i)
		}
		if got := mustRead(t, s, fmt.Sprintf("q%d", i)); got != nil {
			t.Errorf("q%d: written: %q", i, got)
		}
	}
	if err := s.Transact(testContext(t), "after", incr("")); err == nil {
		t.Error("write after Close succeeded")
	}
	s.Close() // twice is fine
}

// A batch sent into a stalled link: every caller stops waiting by its own
// deadline with an error (the writes' fate is unknown), the batch's
// goroutine ends once they have all gone, and when the link is back the
// retried writes land exactly once.
func TestGroupCommitStalledBatchEndsByDeadline(t *testing.T) {
	direct := newPool(t, testDSN(t), 0)
	table := newTable(t, direct)
	px := startProxy(t, direct.Config().ConnConfig.Host+":"+strconv.Itoa(int(direct.Config().ConnConfig.Port)))
	s := postgres.New(poolVia(t, px.addr()), postgres.Options{Table: table})
	t.Cleanup(s.Close)
	for i := range 4 {
		mustTransact(t, s, fmt.Sprintf("s%d", i), incr("first"))
	}

	const deadline = 300 * time.Millisecond
	release := postgres.HoldBatches(s)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	took := make([]time.Duration, 4)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			errs[i] = s.Transact(ctx, fmt.Sprintf("s%d", i), incr("second"))
			took[i] = time.Since(start)
		})
	}
	waitQueued(t, s, len(errs))
	px.set("stall")
	release()
	wg.Wait()
	for i, err := range errs {
		checkOutageError(t, fmt.Sprintf("s%d", i), err, took[i], deadline)
	}
	px.set("pass")

	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a batch nobody waits for")
	}

	retry := postgres.New(poolVia(t, px.addr()), postgres.Options{Table: table})
	t.Cleanup(retry.Close)
	for i := range errs {
		mustTransact(t, retry, fmt.Sprintf("s%d", i), incr("second"))
		if c := decodeCounter(t, mustRead(t, retry, fmt.Sprintf("s%d", i))); c.N != 2 || len(c.IDs) != 2 {
			t.Errorf("s%d = %+v, want each write once", i, c)
		}
	}
}

// The round-trip budget under grouping: eight concurrent claims on new
// scopes are one round trip (one commit) in all, and their eight settles
// another. Sequential writes keep the single-row statements, as
// TestUncontendedClaimAndSettleCostTwoRoundTrips checks.
func TestGroupCommitIsOneRoundTripPerBatch(t *testing.T) {
	s, qc := countedStore(t)

	const writers = 8
	for round, doc := range []string{`{"state":"pending"}`, `{"state":"committed"}`} {
		before := qc.n.Load()
		release := postgres.HoldBatches(s)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				errs[i] = s.Transact(testContext(t), fmt.Sprintf("event-%d", i), put(doc, time.Hour, time.Time{}))
			})
		}
		waitQueued(t, s, writers)
		release()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := qc.n.Load() - before; n != 1 {
			t.Fatalf("round %d: %d writes took %d round trips, want 1", round, writers, n)
		}
	}
	if batches, writes := postgres.GroupCommits(s); batches != 2 || writes != 2*writers {
		t.Fatalf("%d group commits carrying %d writes, want 2 carrying %d", batches, writes, 2*writers)
	}
	for i := range writers {
		if got := mustRead(t, s, fmt.Sprintf("event-%d", i)); string(got) != `{"state":"committed"}` {
			t.Fatalf("event-%d = %q", i, got)
		}
	}
}

// A document the server refuses (not JSON, or not UTF-8) fails only its own
// write: the batch it joined is rolled back, and its other writes go again
// alone and land once each.
func TestGroupCommitBadDocumentFailsOnlyItsWrite(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	t.Cleanup(s.Close)
	mustTransact(t, s, "a-existing", incr("x"))
	bad := map[string]string{"m-not-json": `{"a":`, "n-not-utf8": "{\"a\":\"\xff\"}"}
	scopes := []string{"a-existing", "b-new", "m-not-json", "n-not-utf8", "z-new"}
	release := postgres.HoldBatches(s)
	var wg sync.WaitGroup
	errs := make([]error, len(scopes))
	for i, scope := range scopes {
		fn := incr("y")
		if doc, ok := bad[scope]; ok {
			fn = put(doc, 0, time.Time{})
		}
		wg.Go(func() { errs[i] = s.Transact(testContext(t), scope, fn) })
	}
	waitQueued(t, s, len(scopes))
	release()
	wg.Wait()
	if batches, _ := postgres.GroupCommits(s); batches != 1 {
		t.Fatalf("%d group commits, want the writes in 1", batches)
	}
	for i, scope := range scopes {
		_, isBad := bad[scope]
		switch {
		case isBad && errs[i] == nil:
			t.Errorf("%s: a document the server refuses was accepted", scope)
		case !isBad && errs[i] != nil:
			t.Errorf("%s: failed beside a bad document: %v", scope, errs[i])
		}
	}
	if c := decodeCounter(t, mustRead(t, s, "a-existing")); c.N != 2 {
		t.Errorf("a-existing = %+v, want 2 writes", c)
	}
	for _, scope := range []string{"b-new", "z-new"} {
		if c := decodeCounter(t, mustRead(t, s, scope)); c.N != 1 {
			t.Errorf("%s = %+v, want 1 write", scope, c)
		}
	}
	for scope := range bad {
		if got := mustRead(t, s, scope); got != nil {
			t.Errorf("%s stored %q", scope, got)
		}
	}
}
