package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
)

// slack is how far past its deadline a failing call may return: scheduling
// under -race on a small, busy machine. The clients below wait 30 s for the
// network on their own, so a call that ignored its context would overshoot
// by far more than this.
const slack = 1500 * time.Millisecond

// storeVia returns a store whose client talks to addr instead of the test
// server directly.
func storeVia(t *testing.T, addr string, opts Options) *Store {
	t.Helper()
	o := clientOptions(t)
	o.Addr = addr
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 30*time.Second, 30*time.Second, 30*time.Second
	c := goredis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// expectOutage checks that every store call fails, as an error and within
// its deadline.
func expectOutage(t *testing.T, s *Store, what string) {
	t.Helper()
	const deadline = 300 * time.Millisecond
	calls := map[string]func(ctx context.Context) error{
		"Transact": func(ctx context.Context) error { return increment(ctx, s, "k") },
		"Read": func(ctx context.Context) error {
			doc, err := s.Read(ctx, "k")
			if err == nil {
				t.Errorf("%s: Read returned %q and no error", what, doc)
			}
			return err
		},
		"ScopesToReview": func(ctx context.Context) error {
			_, err := s.ScopesToReview(ctx, time.Now(), 10)
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		cancel()
		if err == nil {
			t.Errorf("%s: %s succeeded during the outage", what, name)
			continue
		}
		if took > deadline+slack {
			t.Errorf("%s: %s took %v with a %v deadline", what, name, took, deadline)
		} else {
			t.Logf("%s: %s failed after %v: %v", what, name, took.Round(time.Millisecond), err)
		}
		if errors.Is(err, ledger.ErrContention) {
			t.Errorf("%s: %s: an outage reported as contention: %v", what, name, err)
		}
	}
}

func TestClosedPort(t *testing.T) {
	testURL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	expectOutage(t, storeVia(t, addr, Options{}), "closed port")

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if s, err := Open(ctx, "redis://"+addr+"/0", Options{}); err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded against a closed port")
	}
}

// Outages that start and end while the store is idle: nothing the client
// gave up on reached the server, so the count is exact.
func TestProxyOutagesAndRecovery(t *testing.T) {
	direct, _ := newTestStore(t, Options{})
	p := startProxy(t, direct.client.(*goredis.Client).Options().Addr)
	s := storeVia(t, p.addr(), Options{KeyPrefix: direct.prefix})
	ctx := ctxT(t)

	done := 0
	incrementMany := func(n int) {
		t.Helper()
		for range n {
			if err := increment(ctx, s, "k"); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
			done++
		}
	}
	incrementMany(10)
	for _, m := range []struct {
		name string
		mode proxyMode
	}{{"stalled", proxyStall}, {"dropped", proxyDrop}, {"stalled again", proxyStall}} {
		p.set(m.mode)
		expectOutage(t, s, m.name)
		p.set(proxyPass)
		incrementMany(10)
	}
	doc, err := direct.Read(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeCounter(t, doc).N; got != done {
		t.Fatalf("counter = %d; want %d (lost or doubled increments)", got, done)
	}
}

// Outages that start under load: a write the server applied may have lost
// its reply, so a failed call is allowed to have counted once. A success
// must count exactly once, and nothing may count twice. Each goroutine
// writes a scope of its own: goroutines of one process take turns on a
// scope, and the load is many writes in flight at once.
func TestProxyOutagesUnderLoad(t *testing.T) {
	direct, _ := newTestStore(t, Options{})
	p := startProxy(t, direct.client.(*goredis.Client).Options().Addr)
	s := storeVia(t, p.addr(), Options{KeyPrefix: direct.prefix, MaxRetries: 10000})

	const writers = 8
	var ok, failed [writers]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				start := time.Now()
				err := increment(ctx, s, fmt.Sprint("k", g))
				took := time.Since(start)
				cancel()
				if took > 200*time.Millisecond+slack {
					t.Errorf("increment took %v with a 200ms deadline", took)
				}
				if err != nil {
					failed[g].Add(1)
				} else {
					ok[g].Add(1)
				}
			}
		})
	}
	for _, m := range []proxyMode{proxyStall, proxyPass, proxyDrop, proxyPass, proxyStall, proxyPass, proxyDrop, proxyPass} {
		time.Sleep(150 * time.Millisecond)
		p.set(m)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()

	var oks, fails, total int64
	for g := range writers {
		doc, err := direct.Read(context.Background(), fmt.Sprint("k", g))
		if err != nil {
			t.Fatal(err)
		}
		got := int64(decodeCounter(t, doc).N)
		if got < ok[g].Load() || got > ok[g].Load()+failed[g].Load() {
			t.Fatalf("counter k%d = %d; want between %d successes and %d successes+failures", g, got, ok[g].Load(), ok[g].Load()+failed[g].Load())
		}
		oks, fails, total = oks+ok[g].Load(), fails+failed[g].Load(), total+got
	}
	if fails == 0 {
		t.Fatal("no call failed: the proxy did not cut anything")
	}
	t.Logf("%d increments succeeded, %d failed, counters %d", oks, fails, total)
}
