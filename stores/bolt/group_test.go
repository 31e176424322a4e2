package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
)

// incrementFn adds one to a decimal counter document.
func incrementFn(cur []byte) (*ledger.Write, error) {
	n := 0
	if cur != nil {
		var err error
		if n, err = strconv.Atoi(string(cur)); err != nil {
			return nil, err
		}
	}
	return &ledger.Write{Doc: []byte(strconv.Itoa(n + 1))}, nil
}

func readInt(t *testing.T, s *bolt.Store, scope string) int {
	t.Helper()
	doc, err := s.Read(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(string(doc))
	return n
}

// Writers racing on their own scopes and on shared ones: every write lands
// exactly once, and they share commits (fewer commits than writes, so
// fewer fsyncs).
func TestConcurrentTransactsShareCommits(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	const workers, each = 64, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				scope := fmt.Sprintf("own-%d", w)
				if i%2 == 1 {
					scope = fmt.Sprintf("hot-%d", i%3)
				}
				if err := s.Transact(ctx, scope, incrementFn); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for w := range workers {
		if n := readInt(t, s, fmt.Sprintf("own-%d", w)); n != each/2 {
			t.Errorf("own-%d = %d, want %d", w, n, each/2)
		}
	}
	for h := range 3 {
		total += readInt(t, s, fmt.Sprintf("hot-%d", h))
	}
	if total != workers*each/2 {
		t.Errorf("hot scopes counted %d, want %d", total, workers*each/2)
	}
	commits, carried := bolt.Commits(s)
	if carried != workers*each {
		t.Errorf("commits carried %d writes, want %d", carried, workers*each)
	}
	if commits >= carried {
		t.Errorf("%d commits for %d writes: concurrent writes never shared a commit", commits, carried)
	}
	t.Logf("%d commits carried %d writes", commits, carried)
}

// The ledger's refusals and a panicking function answer only their own
// caller and write nothing; the writes sharing their commit land.
func TestFailingFunctionsInASharedCommit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	refused := errors.New("refused by the ledger")
	var wg sync.WaitGroup
	errs := make([]error, 90)
	for i := range errs {
		wg.Go(func() {
			scope := fmt.Sprintf("s%d", i)
			switch i % 3 {
			case 0:
				errs[i] = s.Transact(ctx, scope, incrementFn)
			case 1:
				errs[i] = s.Transact(ctx, scope, func([]byte) (*ledger.Write, error) { return nil, refused })
			case 2:
				errs[i] = s.Transact(ctx, scope, func([]byte) (*ledger.Write, error) { panic("bug") })
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		scope := fmt.Sprintf("s%d", i)
		doc, rerr := s.Read(ctx, scope)
		if rerr != nil {
			t.Fatal(rerr)
		}
		switch i % 3 {
		case 0:
			if err != nil || string(doc) != "1" {
				t.Errorf("%s: %v, doc %q", scope, err, doc)
			}
		case 1:
			if err != refused || doc != nil {
				t.Errorf("%s: %v (want the function's error unchanged), doc %q", scope, err, doc)
			}
		case 2:
			if err == nil || doc != nil {
				t.Errorf("%s: panic gave %v, doc %q", scope, err, doc)
			}
		}
	}
	if err := s.Transact(ctx, "after", incrementFn); err != nil {
		t.Fatalf("store unusable after failing functions: %v", err)
	}
}

// Writers racing on one scope: each function runs first on a snapshot,
// outside the writer, and most snapshots are out of date by the time their
// commit runs (a write to the scope landed since, or went before in the
// same commit). Those run again on the current document, so every
// increment lands once.
func TestDecisionsOnAMovedScopeRunAgain(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	const workers, each = 32, 25
	var mu sync.Mutex
	runs := 0
	counted := func(cur []byte) (*ledger.Write, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		return incrementFn(cur)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if err := s.Transact(ctx, "one", counted); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := readInt(t, s, "one"); n != workers*each {
		t.Fatalf("counter = %d after %d increments: a decision on an out-of-date snapshot was saved", n, workers*each)
	}
	if runs <= workers*each {
		t.Errorf("functions ran %d times for %d increments: none ran again, so no snapshot was ever out of date", runs, workers*each)
	}
	t.Logf("%d runs for %d increments", runs, workers*each)
}

// A function that writes nothing (the ledger's refusal, an answer from the
// document as it is) is answered from its read: no commit, no fsync.
func TestDecisionsThatWriteNothingCommitNothing(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	if err := s.Transact(ctx, "a", incrementFn); err != nil {
		t.Fatal(err)
	}
	before, _ := bolt.Commits(s)
	refused := errors.New("refused by the ledger")
	if err := s.Transact(ctx, "a", func([]byte) (*ledger.Write, error) { return nil, refused }); err != refused {
		t.Fatalf("refusal: %v", err)
	}
	var seen []byte
	if err := s.Transact(ctx, "a", func(cur []byte) (*ledger.Write, error) { seen = cur; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if string(seen) != "1" {
		t.Fatalf("the function saw %q, want the committed document", seen)
	}
	if after, _ := bolt.Commits(s); after != before {
		t.Fatalf("%d commits for decisions that wrote nothing", after-before)
	}
}

// A document that expires between the function's read and its commit is
// gone for the write as well: the function runs again on no document
// rather than have its write extend the expired one.
func TestDocumentExpiredSinceTheDecisionRunsAgain(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Transact(ctx, "a", func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte("7"), TTL: time.Minute}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var saw []string
	err = s.Transact(ctx, "a", func(cur []byte) (*ledger.Write, error) {
		saw = append(saw, string(cur))
		if len(saw) == 1 {
			// Time passes between the read and the commit.
			mu.Lock()
			now = now.Add(2 * time.Minute)
			mu.Unlock()
		}
		return incrementFn(cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(saw) != 2 || saw[0] != "7" || saw[1] != "" {
		t.Fatalf("the function saw %q, want the live document, then none", saw)
	}
	if n := readInt(t, s, "a"); n != 1 {
		t.Fatalf("document %d, want 1: a write decided on the expired document was saved", n)
	}
}

// A write that takes a record as absent is refused when the record exists
// by its commit, even if it did not when the function first decided: a
// write between the two sends the function to run again in the commit,
// where the check is made on the scope as it is.
func TestAbsentRecordWrittenSinceTheDecisionRefusesTheWrite(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	if err := s.Transact(ctx, "s", func([]byte) (*ledger.Write, error) { return &ledger.Write{Doc: []byte("1")}, nil }); err != nil {
		t.Fatal(err)
	}
	read, written := make(chan struct{}), make(chan struct{})
	go func() {
		<-read
		err := s.Transact(ctx, "s", func([]byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte("2"), Blobs: map[string][]byte{"r": []byte("moved out")}}, nil
		})
		if err != nil {
			t.Error(err)
		}
		close(written)
	}()
	runs := 0
	err := s.Transact(ctx, "s", func(cur []byte) (*ledger.Write, error) {
		runs++
		if runs == 1 {
			close(read)
			<-written // the other write commits while this one decides
		}
		return &ledger.Write{Doc: []byte("3"), Absent: []string{"r"}}, nil
	})
	var present *ledger.PresentError
	if !errors.As(err, &present) || string(present.Blobs["r"]) != "moved out" {
		t.Fatalf("write that took r as absent after r was written: %v, want a PresentError holding r", err)
	}
	if runs != 2 {
		t.Fatalf("function ran %d times, want again in the commit", runs)
	}
	if n := readInt(t, s, "s"); n != 2 {
		t.Fatalf("document %d, want the other write's 2", n)
	}
}
