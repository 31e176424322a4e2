package redis

import (
	"context"
	"errors"
	"fmt"
	"github.com/replyonce/gateway/internal/testkit"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/internal/groupcommit"
)

// Many writers at once: writes leave together in pipelines, and every one
// of them lands exactly once, on scopes of their own and on shared ones.
func TestPipelinesCarryConcurrentWrites(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxRetries: 100000})
	ctx := ctxT(t)
	const workers, each, hot = 64, 20, 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				scope := fmt.Sprintf("own-%d", w)
				if i%2 == 1 {
					scope = fmt.Sprintf("hot-%d", i%hot)
				}
				if err := increment(ctx, s, scope); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range workers {
		doc, err := s.Read(ctx, fmt.Sprintf("own-%d", w))
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeCounter(t, doc).N; got != each/2 {
			t.Errorf("own-%d = %d; want %d", w, got, each/2)
		}
	}
	total := 0
	for h := range hot {
		doc, err := s.Read(ctx, fmt.Sprintf("hot-%d", h))
		if err != nil {
			t.Fatal(err)
		}
		total += decodeCounter(t, doc).N
	}
	if total != workers*each/2 {
		t.Errorf("hot scopes counted %d; want %d", total, workers*each/2)
	}
	pipelines, carried := s.batch.Stats()
	if pipelines == 0 {
		t.Fatal("64 concurrent writers never shared a pipeline")
	}
	t.Logf("%d pipelines carried %d writes", pipelines, carried)
}

// MaxBatch 1 sends every write on its own.
func TestMaxBatchOneSendsAlone(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxBatch: 1})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			if err := increment(ctx, s, fmt.Sprintf("s%d", w)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, _ := s.batch.Stats(); n != 0 {
		t.Fatalf("%d pipelines with MaxBatch 1", n)
	}
}

// A server that forgot the script (restart, SCRIPT FLUSH) answers NOSCRIPT
// to every script of a pipeline without running it; each is sent again and
// lands once.
func TestPipelineAfterScriptFlush(t *testing.T) {
	s, c := newPrivateTestStore(t, Options{})
	ctx := ctxT(t)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	batch := make([]*groupcommit.Item[casArgs, casReply], 3)
	for i := range batch {
		scope := fmt.Sprintf("p%d", i)
		batch[i] = &groupcommit.Item[casArgs, casReply]{Ctx: ctx, Write: casArgs{scope: scope, key: s.docKey(scope), next: newToken(),
			w: &ledger.Write{Doc: []byte(`{"n":1}`), TTL: time.Hour}}}
	}
	s.runPipeline(ctx, batch)
	for i, it := range batch {
		if it.Result.err != nil || !it.Result.won {
			t.Fatalf("write %d after SCRIPT FLUSH: %+v", i, it.Result)
		}
		doc, err := s.Read(ctx, it.Write.scope)
		if err != nil || decodeCounter(t, doc).N != 1 {
			t.Fatalf("scope %s: %q, %v", it.Write.scope, doc, err)
		}
	}
}

// stalledStore returns a store that reaches the server through a stalled
// proxy with every round trip it allows taken (wait waits for those writes
// to give up, after 2 s), the proxy, and a store talking to the server
// directly on the same keys.
func stalledStore(t *testing.T) (direct *Store, p *faultProxy, s *Store, wait func()) {
	t.Helper()
	direct, _ = newTestStore(t, Options{})
	p = startProxy(t, direct.client.(*goredis.Client).Options().Addr)
	s = storeVia(t, p.addr(), Options{KeyPrefix: direct.prefix})
	p.set(proxyStall)
	return direct, p, s, fillRoundTrips(t, s, 2*time.Second)
}

// fillRoundTrips starts writes through a stalled proxy until every round
// trip the store allows is taken, and returns a function that waits for
// them to give up.
func fillRoundTrips(t *testing.T, s *Store, deadline time.Duration) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range pipelinesInFlight {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if err := increment(ctx, s, fmt.Sprintf("stuck-%d", i)); err == nil {
				t.Error("a write through a stalled proxy succeeded")
			}
		})
	}
	testkit.Eventually(t, "every round trip taken", func() bool { return s.batch.Inflight() >= pipelinesInFlight })
	return wg.Wait
}

// queued waits until n writes are queued.
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("%d writes queued", n), func() bool { return s.batch.Queued() >= n })
}

// A write still queued when its caller gives up is never sent: the caller
// gets its context's error, and nothing lands later.
func TestQueuedWriteLeavesWhenCancelled(t *testing.T) {
	direct, p, s, wait := stalledStore(t)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- increment(ctx, s, "queued") }()
	queued(t, s, 1)
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "unknown") {
		t.Fatalf("queued write cancelled: %v; want the context's error, outcome known", err)
	}
	wait()
	p.set(proxyPass)
	if doc, err := direct.Read(ctxT(t), "queued"); err != nil || doc != nil {
		t.Fatalf("the cancelled write landed: %q, %v", doc, err)
	}
}

// Close fails queued writes without sending them, and the store refuses
// writes afterwards.
func TestCloseFailsQueuedWrites(t *testing.T) {
	direct, p, s, wait := stalledStore(t)

	const n = 3
	errc := make(chan error, n)
	for i := range n {
		go func() { errc <- increment(ctxT(t), s, fmt.Sprintf("q%d", i)) }()
	}
	queued(t, s, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errc; !errors.Is(err, groupcommit.ErrClosed) {
			t.Errorf("queued write at Close: %v; want %v", err, groupcommit.ErrClosed)
		}
	}
	wait()
	p.set(proxyPass)
	for i := range n {
		if doc, err := direct.Read(ctxT(t), fmt.Sprintf("q%d", i)); err != nil || doc != nil {
			t.Fatalf("a write failed at Close landed: %q, %v", doc, err)
		}
	}
	if err := increment(ctxT(t), s, "after"); !errors.Is(err, groupcommit.ErrClosed) {
		t.Fatalf("write after Close: %v; want %v", err, groupcommit.ErrClosed)
	}
}
