package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/storetest"
)

func open(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) ledger.Store {
		s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// A committed effect survives closing and reopening the file, and a claim
// left pending by a crash reads as ambiguous once its TTL has passed.
func TestSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	clock := storetest.NewClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	opts := ledger.Options{Clock: clock.Now, PendingTTL: time.Minute}
	var runs atomic.Int64
	effect := func(ctx context.Context, c ledger.Call) (any, error) { runs.Add(1); return "sent", nil }
	done := ledger.Key{Scope: "conv", Intent: "reply", Payload: "m1"}
	crashed := ledger.Key{Scope: "conv", Intent: "refund", Payload: "o1"}

	s := open(t, path)
	l := ledger.New(s, opts)
	if r, err := l.Once(ctx, done, effect); err != nil || r.Status != ledger.StatusExecuted {
		t.Fatalf("first run: %v %v", r.Status, err)
	}
	c, err := l.Claim(ctx, ledger.ClaimRequest{Key: crashed})
	if err != nil || !c.Acquired() {
		t.Fatalf("claim: %v %v", c.Status, err)
	}
	if err := s.Close(); err != nil { // the process dies with the refund claimed
		t.Fatal(err)
	}

	s = open(t, path)
	defer s.Close()
	l = ledger.New(s, opts)
	if r, err := l.Once(ctx, done, effect); err != nil || r.Status != ledger.StatusReplayed || string(r.Value) != `"sent"` {
		t.Fatalf("after reopen: %v %s %v", r.Status, r.Value, err)
	}
	if r, _ := l.Once(ctx, crashed, effect); r.Status != ledger.StatusInFlight {
		t.Fatalf("crashed claim before its TTL: %v", r.Status)
	}
	clock.Advance(time.Minute)
	if r, _ := l.Once(ctx, crashed, effect); r.Status != ledger.StatusAmbiguous {
		t.Fatalf("crashed claim after its TTL: %v", r.Status)
	}
	if runs.Load() != 1 {
		t.Fatalf("effects ran %d times, want 1", runs.Load())
	}
	amb, err := l.Views().Ambiguous(ctx, 10)
	if err != nil || len(amb) != 1 || amb[0].Intent != "refund" {
		t.Fatalf("ambiguous after reopen: %+v %v", amb, err)
	}
}

func TestDeleteExpired(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	s, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, ttl := range []time.Duration{time.Minute, time.Hour, 0} {
		err := s.Transact(ctx, string(rune('a'+i)), func([]byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{}`), TTL: ttl, ReviewAt: now}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Minute)
	if n, err := s.DeleteExpired(ctx); err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want 1", n, err)
	}
	if doc, _ := s.Read(ctx, "a"); doc != nil {
		t.Fatal("expired document still readable")
	}
	if got, _ := s.ScopesToReview(ctx, now, 10); len(got) != 2 {
		t.Fatalf("review index after deletion: %v", got)
	}
}

func BenchmarkOnce(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "ledger.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkOnce(b, s)
}

func BenchmarkEnqueueBacklog(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "ledger.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkEnqueueBacklog(b, s)
}

// One process at a time: a second Open of a file that is open waits for
// the lock, then fails saying so; once the first closes, the file opens.
// bbolt's lock is per open file (flock on Linux and macOS, `LockFileEx` on
// Windows), so a second Open in this process stands for a second gateway.
func TestSecondOpenWaitsForTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	first := open(t, path)
	_, err := bolt.Open(path, bolt.Options{OpenTimeout: 50 * time.Millisecond})
	if !errors.Is(err, bolterrors.ErrTimeout) || !errors.Is(err, bolt.ErrInUse) || !strings.Contains(err.Error(), "is held by another process") {
		t.Fatalf("second open of a locked file: %v, want the lock named", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := bolt.Open(path, bolt.Options{OpenTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	_ = second.Close()
}

func BenchmarkLongScope(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "ledger.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkLongScope(b, s)
}
