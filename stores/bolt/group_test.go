package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

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
