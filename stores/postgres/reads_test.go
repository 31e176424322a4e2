package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// Reads that meet share one statement, and each gets its own scope's row:
// a live one as it is, an expired or missing one as absent, two reads of
// one scope the same row.
func TestGroupedReadsAnswerEachItsOwnRow(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	mustTransact(t, s, "a", incr("1"))
	mustTransact(t, s, "b", incr("1"))
	mustTransact(t, s, "b", incr("2"))
	mustTransact(t, s, "expired", put(`{"n":7}`, -time.Second, time.Time{}))

	scopes := []string{"a", "b", "b", "expired", "missing"}
	release := postgres.HoldReads(s)
	var wg sync.WaitGroup
	docs := make([][]byte, len(scopes))
	errs := make([]error, len(scopes))
	for i, scope := range scopes {
		wg.Go(func() { docs[i], errs[i] = s.Read(testContext(t), scope) })
	}
	waitCount(t, "reads", len(scopes), func() int { return postgres.QueuedReads(s) })
	release()
	wg.Wait()
	if batches, reads := postgres.GroupedReads(s); batches != 1 || reads != int64(len(scopes)) {
		t.Fatalf("%d grouped statements carrying %d reads, want 1 carrying %d", batches, reads, len(scopes))
	}
	want := []int{1, 2, 2, 0, 0}
	for i, scope := range scopes {
		if errs[i] != nil {
			t.Fatalf("read %q: %v", scope, errs[i])
		}
		if c := decodeCounter(t, docs[i]); c.N != want[i] {
			t.Errorf("read %q = %s, want n=%d", scope, docs[i], want[i])
		}
		if want[i] == 0 && docs[i] != nil {
			t.Errorf("read %q = %s, want absent", scope, docs[i])
		}
	}
}

// A decision that writes nothing, made on a copy another process has since
// moved past, is checked by a read that may travel with others, and is
// made again on what that read found.
func TestGroupedReadChecksAReadOnlyDecision(t *testing.T) {
	s, pool := setup(t, postgres.Options{})
	other := postgres.New(pool, postgres.Options{Table: s.Table()})
	t.Cleanup(other.Close)
	mustTransact(t, s, "x", incr("1"))     // s remembers n=1
	mustTransact(t, other, "x", incr("2")) // the row is now n=2

	release := postgres.HoldReads(s)
	var seen []int
	var wg sync.WaitGroup
	var txErr, readErr error
	wg.Go(func() {
		txErr = s.Transact(testContext(t), "x", func(cur []byte) (*ledger.Write, error) {
			seen = append(seen, decodeCounter(t, cur).N)
			return nil, nil // read-only
		})
	})
	wg.Go(func() { _, readErr = s.Read(testContext(t), "y") })
	waitCount(t, "reads", 2, func() int { return postgres.QueuedReads(s) })
	release()
	wg.Wait()
	if txErr != nil || readErr != nil {
		t.Fatalf("transact: %v; read: %v", txErr, readErr)
	}
	if batches, reads := postgres.GroupedReads(s); batches != 1 || reads != 2 {
		t.Fatalf("%d grouped statements carrying %d reads, want 1 carrying 2", batches, reads)
	}
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("the decision saw n=%v, want the cached 1, then the row's 2", seen)
	}
}

// A grouped read that fails fails every read in its group, as a store
// error: none of them reads as an absent scope.
func TestGroupedReadFailureIsAnErrorForEveryRead(t *testing.T) {
	s, pool := setup(t, postgres.Options{})
	mustTransact(t, s, "a", incr("1"))
	release := postgres.HoldReads(s)
	var wg sync.WaitGroup
	scopes := []string{"a", "b", "c"}
	docs := make([][]byte, len(scopes))
	errs := make([]error, len(scopes))
	for i, scope := range scopes {
		wg.Go(func() { docs[i], errs[i] = s.Read(testContext(t), scope) })
	}
	waitCount(t, "reads", len(scopes), func() int { return postgres.QueuedReads(s) })
	if _, err := pool.Exec(testContext(t), `ALTER TABLE `+s.Table()+` RENAME TO gone_`+time.Now().Format("150405")); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	for i, scope := range scopes {
		if errs[i] == nil {
			t.Errorf("read %q = %q with the table gone, want an error", scope, docs[i])
		}
	}
}

// After Close, reads still work, each alone.
func TestReadsAfterClose(t *testing.T) {
	s, _ := setup(t, postgres.Options{})
	mustTransact(t, s, "a", incr("1"))
	s.Close()
	if c := decodeCounter(t, mustRead(t, s, "a")); c.N != 1 {
		t.Fatalf("read after Close: n=%d, want 1", c.N)
	}
}
