package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"github.com/replyonce/gateway/internal/testkit"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a fake store: it records what was sent alone and in batches
// and answers each write with its own key.
type recorder struct {
	mu      sync.Mutex
	alone   []string
	batches [][]string
}

type result struct {
	key string
	err error
}

func newBatcher(t *testing.T, opts Options, separate func(a, b string) bool) (*Batcher[string, result], *recorder) {
	rec := &recorder{}
	b := New(opts,
		func(ctx context.Context, w string) result {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.alone = append(rec.alone, w)
			return result{key: w}
		},
		func(ctx context.Context, batch []*Item[string, result]) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var keys []string
			for _, it := range batch {
				keys = append(keys, it.Write)
				it.Result = result{key: it.Write}
			}
			rec.batches = append(rec.batches, keys)
		},
		func(err error) result { return result{err: err} },
		separate)
	t.Cleanup(b.Close)
	return b, rec
}

func waitQueued(t *testing.T, b *Batcher[string, result], n int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("%d writes queued", n), func() bool { return b.Queued() >= n })
}

func TestLoneWriteGoesAlone(t *testing.T) {
	b, rec := newBatcher(t, Options{MaxBatch: 8, MaxInflight: 2}, nil)
	if r := b.Do(context.Background(), "a"); r.key != "a" || r.err != nil {
		t.Fatalf("Do = %+v", r)
	}
	if len(rec.alone) != 1 || len(rec.batches) != 0 {
		t.Fatalf("alone %v, batches %v", rec.alone, rec.batches)
	}
}

// Writes that queue while every round trip is busy leave together, each
// answered with its own result; writes that must be kept apart are.
func TestQueuedWritesLeaveTogether(t *testing.T) {
	b, rec := newBatcher(t, Options{MaxBatch: 8, MaxInflight: 2}, func(x, y string) bool { return x == y })
	release := b.Hold()
	keys := []string{"a", "b", "c", "a", "d"}
	results := make([]result, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { results[i] = b.Do(context.Background(), k) })
		waitQueued(t, b, i+1)
	}
	release()
	wg.Wait()
	for i, r := range results {
		if r.key != keys[i] || r.err != nil {
			t.Errorf("write %s got %+v", keys[i], r)
		}
	}
	if batches, writes := b.Stats(); writes+int64(len(rec.alone)) != int64(len(keys)) || batches == 0 {
		t.Fatalf("batches %v, alone %v", rec.batches, rec.alone)
	}
	for _, batch := range rec.batches {
		seen := map[string]bool{}
		for _, k := range batch {
			if seen[k] {
				t.Fatalf("two writes of %q in one batch: %v", k, batch)
			}
			seen[k] = true
		}
	}
}

func TestCancelledWhileQueuedIsNeverSent(t *testing.T) {
	b, rec := newBatcher(t, Options{MaxBatch: 8, MaxInflight: 1}, nil)
	release := b.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- b.Do(ctx, "x") }()
	waitQueued(t, b, 1)
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled queued write: %+v", r)
	}
	release()
	if b.Do(context.Background(), "y").key != "y" {
		t.Fatal("batcher unusable after a cancelled write")
	}
	for _, k := range rec.alone {
		if k == "x" {
			t.Fatal("the cancelled write was sent")
		}
	}
	if len(rec.batches) != 0 {
		t.Fatalf("batches %v", rec.batches)
	}
}

func TestCloseFailsQueuedAndLaterWrites(t *testing.T) {
	b, rec := newBatcher(t, Options{MaxBatch: 8, MaxInflight: 1}, nil)
	release := b.Hold()
	defer release()
	done := make(chan result, 2)
	for _, k := range []string{"q1", "q2"} {
		go func() { done <- b.Do(context.Background(), k) }()
	}
	waitQueued(t, b, 2)
	b.Close()
	for range 2 {
		if r := <-done; !errors.Is(r.err, ErrClosed) {
			t.Fatalf("queued write at Close: %+v", r)
		}
	}
	if r := b.Do(context.Background(), "late"); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("write after Close: %+v", r)
	}
	if len(rec.alone)+len(rec.batches) != 0 {
		t.Fatalf("sent after or at Close: %v %v", rec.alone, rec.batches)
	}
}

// goroutineID reads the running goroutine's number from its stack header,
// for telling which goroutine sent a batch.
func goroutineID() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// When a batch comes back and the queue holds writes that may leave, the
// goroutine that sent it sends them next, instead of handing them to the
// dispatcher and a new goroutine: queued writes pay no extra wake-ups.
func TestTheBatchGoroutineSendsWhatQueuedMeanwhile(t *testing.T) {
	gate := make(chan struct{})
	var (
		mu      sync.Mutex
		senders []string
		batches [][]string
	)
	b := New(Options{MaxBatch: 2, MaxInflight: 1},
		func(ctx context.Context, w string) result { return result{key: w} },
		func(ctx context.Context, batch []*Item[string, result]) {
			mu.Lock()
			first := len(batches) == 0
			var keys []string
			for _, it := range batch {
				keys = append(keys, it.Write)
				it.Result = result{key: it.Write}
			}
			batches = append(batches, keys)
			senders = append(senders, goroutineID())
			mu.Unlock()
			if first {
				<-gate // the first batch stays in flight until c and d queued
			}
		},
		func(err error) result { return result{err: err} }, nil)
	defer b.Close()

	release := b.Hold()
	var wg sync.WaitGroup
	results := map[string]*result{}
	for _, k := range []string{"a", "b", "c", "d"} {
		results[k] = &result{}
	}
	do := func(k string) { wg.Go(func() { *results[k] = b.Do(context.Background(), k) }) }
	do("a")
	waitQueued(t, b, 1)
	do("b")
	waitQueued(t, b, 2)
	release()
	testkit.Eventually(t, "the queued writes in flight as one batch", func() bool { return b.Inflight() == 1 && b.Queued() == 0 })
	do("c")
	waitQueued(t, b, 1)
	do("d")
	waitQueued(t, b, 2)
	close(gate)
	wg.Wait()

	for k, r := range results {
		if r.key != k || r.err != nil {
			t.Errorf("write %s got %+v", k, *r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || len(batches[1]) != 2 {
		t.Fatalf("batches %v, want [a b] then [c d]", batches)
	}
	if senders[0] != senders[1] {
		t.Errorf("batches sent by goroutines %s and %s, want the same one", senders[0], senders[1])
	}
}
