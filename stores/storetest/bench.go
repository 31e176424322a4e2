package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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
