package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// BenchmarkOnce measures Once throughput (one claim and one settle per
// operation, each on a fresh key in its own scope) at 1, 16 and 64
// goroutines. Report ops/s by dividing b.N by the elapsed time, or read
// ns/op: with parallel goroutines it is wall time per operation.
func BenchmarkOnce(b *testing.B, store ledger.Store) {
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			l := ledger.New(store, ledger.Options{})
			ctx := context.Background()
			var next atomic.Int64
			prefix := fmt.Sprintf("bench-%d-%d", g, b.N)
			effect := func(ctx context.Context, c ledger.Call) (any, error) { return nil, nil }
			b.ReportAllocs()
			b.SetParallelism(max(1, g/runtimeProcs()))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					key := ledger.Key{Scope: fmt.Sprintf("%s-%d", prefix, i), Intent: "reply", Payload: i}
					r, err := l.Once(ctx, key, effect)
					if err != nil || r.Status != ledger.StatusExecuted {
						b.Errorf("once: %v %v", r.Status, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkEnqueueBacklog measures one accept (Enqueue of a 1 KiB event,
// its run and claim) at 16 goroutines while 10, 1,000 or 100,000 events
// already wait in the queue, one sweep's read of the due index, and the
// operators' newest-first reads of the received index. The
// index is an ordered structure in every store, so the accept's cost must
// not grow with the backlog. The 100,000 case fills the store first, which
// takes a while; run it with -benchtime=2000x or so.
func BenchmarkEnqueueBacklog(b *testing.B, store ledger.Store) {
	l := ledger.New(store, ledger.Options{})
	ctx := context.Background()
	body := make([]byte, 1024)
	enqueue := func(prefix string, i int64) error {
		id := fmt.Sprintf("%s-%d", prefix, i)
		scope := "backlog:" + id
		_, err := l.Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "bench", EventID: id, Scope: scope, Body: body},
			Run:   ledger.RunOptions{RunID: "bench:" + id, Mode: ledger.ModeIndependent},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: id}, PendingTTL: 15 * time.Second},
		})
		return err
	}
	queued := int64(0)
	for _, backlog := range []int64{10, 1000, 100000} {
		// Fill up to the backlog with 64 writers.
		var next atomic.Int64
		next.Store(queued)
		var failed atomic.Value
		done := make(chan struct{})
		for range 64 {
			go func() {
				defer func() { done <- struct{}{} }()
				for {
					i := next.Add(1)
					if i > backlog {
						return
					}
					if err := enqueue("fill", i); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		for range 64 {
			<-done
		}
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		queued = backlog
		b.Run(fmt.Sprintf("backlog=%d/accept", backlog), func(b *testing.B) {
			var n atomic.Int64
			prefix := fmt.Sprintf("accept-%d-%d", backlog, b.N)
			b.SetParallelism(max(1, 16/runtimeProcs()))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := enqueue(prefix, n.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(fmt.Sprintf("backlog=%d/due-page", backlog), func(b *testing.B) {
			for range b.N {
				if _, err := store.ScopesDue(ctx, farFuture, 64); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The operators' newest-first listing: one index read, and one
		// page of 50 events 20 pages deep (a cursor a page past the
		// scopes it walked, so its cost must not grow with the backlog).
		b.Run(fmt.Sprintf("backlog=%d/received-page", backlog), func(b *testing.B) {
			for range b.N {
				if _, err := store.ScopesReceived(ctx, ledger.ScopeAt{}, 64); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("backlog=%d/recent-events-page", backlog), func(b *testing.B) {
			var after *ledger.DeliveryCursor
			for range min(20, backlog/50-1) {
				p, err := l.RecentDeliveries(ctx, ledger.DeliveryFilter{}, after, 50)
				if err != nil || p.Next == nil {
					b.Fatalf("page toward 20: %v", err)
				}
				after = p.Next
			}
			b.ResetTimer()
			for range b.N {
				if p, err := l.RecentDeliveries(ctx, ledger.DeliveryFilter{}, after, 50); err != nil || len(p.Items) == 0 {
					b.Fatalf("page: %d, %v", len(p.Items), err)
				}
			}
		})
	}
}

// farFuture lists a whole due index.
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
