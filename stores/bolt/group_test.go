package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/internal/testkit"
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

// holdWriter starts a Transact that leads a commit at once and holds it,
// its function running inside, until release is called.
func holdWriter(t *testing.T, s *bolt.Store) (release func()) {
	t.Helper()
	entered, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- s.Transact(context.Background(), "writer-held", func(cur []byte) (*ledger.Write, error) {
			once.Do(func() { close(entered) })
			<-rel
			return incrementFn(cur)
		})
	}()
	<-entered
	return func() {
		close(rel)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// A Transact that has to wait for a commit runs its function meanwhile,
// once, and its commit writes what it answered; one that finds the writer
// free runs its function in its own commit, without a read before.
func TestFunctionPreparedWhileACommitRuns(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	for range 2 {
		if err := s.Transact(ctx, "alone", incrementFn); err != nil {
			t.Fatal(err)
		}
	}
	if n := bolt.Reruns(s); n != 2 {
		t.Fatalf("%d of 2 lone Transacts ran their function in the commit, want both", n)
	}
	release := holdWriter(t, s)
	var calls atomic.Int32
	counted := func(cur []byte) (*ledger.Write, error) {
		calls.Add(1)
		return incrementFn(cur)
	}
	done := make(chan error, 1)
	go func() { done <- s.Transact(ctx, "alone", counted) }()
	testkit.Eventually(t, "the second Transact waits for the held commit", func() bool { return bolt.Queued(s) == 1 })
	before := calls.Load()
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if before != 1 || calls.Load() != 1 {
		t.Errorf("function called %d times before the commit, %d in all; want once, before", before, calls.Load())
	}
	if n := readInt(t, s, "alone"); n != 3 {
		t.Errorf("counter %d, want 3", n)
	}
	if n := bolt.Reruns(s); n != 3 { // the two lone ones and the holder
		t.Errorf("%d functions ran in a commit, want 3", n)
	}
}

// A function prepared on a document that another write changes before its
// commit runs again in the commit, on the document as that write left it:
// no write is lost.
func TestPreparedFunctionRunsAgainOnAChangedDocument(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	if err := s.Transact(ctx, "hot", incrementFn); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	entered, proceed := make(chan struct{}), make(chan struct{})
	var seen []string
	slow := func(cur []byte) (*ledger.Write, error) {
		seen = append(seen, string(cur))
		if len(seen) == 1 {
			close(entered)
			<-proceed // prepared on "1"; another write lands meanwhile
		}
		return incrementFn(cur)
	}
	done := make(chan error, 1)
	go func() { done <- s.Transact(ctx, "hot", slow) }()
	<-entered
	release()
	if err := s.Transact(ctx, "hot", incrementFn); err != nil {
		t.Fatal(err)
	}
	reruns := bolt.Reruns(s)
	close(proceed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := readInt(t, s, "hot"); n != 3 {
		t.Errorf("counter %d, want 3 (a write was lost)", n)
	}
	if fmt.Sprint(seen) != "[1 2]" || bolt.Reruns(s) != reruns+1 {
		t.Errorf("the function saw %v and ran again in the commit %d times; want [1 2] and once", seen, bolt.Reruns(s)-reruns)
	}
}

// A document that expires between the function's preparation and its
// commit is none in the commit: the function runs again on nothing.
func TestPreparedFunctionRunsAgainWhenItsDocumentExpired(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Transact(ctx, "short", func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte("5"), TTL: time.Minute}, nil
	}); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	var seen []string
	fn := func(cur []byte) (*ledger.Write, error) {
		seen = append(seen, fmt.Sprintf("%q", cur))
		if len(seen) == 1 {
			mu.Lock()
			now = now.Add(2 * time.Minute) // the document expires before the commit
			mu.Unlock()
		}
		return incrementFn(cur)
	}
	done := make(chan error, 1)
	go func() { done <- s.Transact(ctx, "short", fn) }()
	testkit.Eventually(t, "the Transact waits for the held commit", func() bool { return bolt.Queued(s) == 1 })
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := readInt(t, s, "short"); n != 1 {
		t.Errorf("counter %d, want 1 (counted from nothing)", n)
	}
	if fmt.Sprint(seen) != `["5" ""]` {
		t.Errorf("the function saw %v, want the live document, then none", seen)
	}
}

// A Transact waiting for a commit is prepared on the document this
// process last wrote or read for its scope, without reading the file; on
// a scope it knows nothing of, it reads it.
func TestPreparedOnTheDocumentLastWrittenOrRead(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	ctx := context.Background()
	waiting := func() {
		t.Helper()
		release := holdWriter(t, s)
		done := make(chan error, 1)
		go func() { done <- s.Transact(ctx, "w", incrementFn) }()
		testkit.Eventually(t, "the Transact waits for the held commit", func() bool { return bolt.Queued(s) == 1 })
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Transact(ctx, "w", incrementFn); err != nil {
		t.Fatal(err)
	}
	waiting() // on the document the first Transact wrote
	if n := bolt.PrepareReads(s); n != 0 {
		t.Errorf("prepared on the document just written with %d reads, want 0", n)
	}
	bolt.ForgetDocs(s)
	waiting() // on a document read from the file
	if n := bolt.PrepareReads(s); n != 1 {
		t.Errorf("prepared on a forgotten document with %d reads, want 1", n)
	}
	bolt.ForgetDocs(s)
	if _, err := s.Read(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	waiting() // on the document just read
	if n := bolt.PrepareReads(s); n != 1 {
		t.Errorf("prepared on the document just read with %d reads in all, want 1", n)
	}
	if n := readInt(t, s, "w"); n != 4 {
		t.Errorf("counter %d, want 4", n)
	}
}
