package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/internal/cputime"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest"
)

// Documents about the size of a scope with one delivery claimed.
var (
	benchClaimDoc  = []byte(`{"v":1,"seq":1,"tok":1,"runs":{"stripe:evt_1":{"token":1,"delivery":1,"mode":"independent","context_at":"2026-03-01T12:00:00.000Z"}},"entries":{"e1":{"intent":"deliver","state":"pending","attempt":1,"run":"stripe:evt_1","token":1,"claimed_at":"2026-03-01T12:00:00.000Z","pad":"` + strings.Repeat("x", 120) + `"}}}`)
	benchSettleDoc = []byte(strings.Replace(string(benchClaimDoc), `"pending"`, `"committed"`, 1))
)

// BenchmarkClaimSettle measures one claim plus one settle (two writes to a
// fresh scope) three ways, at 1, 16 and 64 goroutines:
//
//	raw    two EVALSHA calls of the write script, no Store around them
//	store  two Store.Transact calls
//	ledger one ledger.Once (its claim and its settle)
//
// The three run in alternating slices of the same benchmark, in rotating
// order, so a change in machine load hits all of them alike; ns/op is the
// sum, and the per-way cost and the ratios to raw are reported as metrics.
// The target: store and ledger at least 0.8x raw throughput, that
// is a ratio of at most 1.25, at 16 goroutines. Under concurrency the
// store sends writes together in pipelines, which raw, one EVALSHA per
// call, does not; ledger/store isolates the ledger's own cost.
func BenchmarkClaimSettle(b *testing.B) {
	c := testClient(b)
	ctx := context.Background()
	if err := casScript.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	review := time.Now().Add(15 * time.Minute)
	reviewArg := strconv.FormatInt(review.UnixMilli(), 10)
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			rawStore := New(c, Options{KeyPrefix: testPrefix(b, c)})
			raw := func(i int64) error {
				scope := "stripe:evt_" + strconv.FormatInt(i, 10)
				keys := casArgs{scope: scope, key: rawStore.docKey(scope)}.keys(rawStore)
				claim := newToken()
				if err := casScript.EvalSha(ctx, c, keys, "", claim, benchClaimDoc, "3600000", reviewArg, scope, "", 0, 0, "").Err(); err != nil {
					return err
				}
				return casScript.EvalSha(ctx, c, keys, claim, newToken(), benchSettleDoc, "3600000", "", scope, "", 0, 0, "").Err()
			}
			s := New(c, Options{KeyPrefix: testPrefix(b, c)})
			claim := func([]byte) (*ledger.Write, error) {
				return &ledger.Write{Doc: benchClaimDoc, TTL: time.Hour, ReviewAt: review}, nil
			}
			settle := func([]byte) (*ledger.Write, error) {
				return &ledger.Write{Doc: benchSettleDoc, TTL: time.Hour}, nil
			}
			store := func(i int64) error {
				scope := "stripe:evt_" + strconv.FormatInt(i, 10)
				if err := s.Transact(ctx, scope, claim); err != nil {
					return err
				}
				return s.Transact(ctx, scope, settle)
			}
			l := ledger.New(New(c, Options{KeyPrefix: testPrefix(b, c)}), ledger.Options{})
			noop := func(context.Context, ledger.Call) (any, error) { return nil, nil }
			once := func(i int64) error {
				id := "evt_" + strconv.FormatInt(i, 10)
				res, err := l.Once(ctx, ledger.Key{Scope: "stripe:" + id, Intent: "deliver", Payload: map[string]any{"source": "stripe", "event_id": id}}, noop)
				if err == nil && res.Status != ledger.StatusExecuted {
					err = fmt.Errorf("Once = %+v", res)
				}
				return err
			}
			ways := []func(int64) error{raw, store, once}
			var spent, cpu, srv [3]time.Duration
			chunk := max(100, 8*g)
			b.ReportAllocs()
			b.ResetTimer()
			for done, round := 0, 0; done < b.N; done, round = done+chunk, round+1 {
				n := min(chunk, b.N-done)
				for k := range ways {
					w := (k + round) % len(ways)
					start, c0, s0 := time.Now(), processCPU(), serverCPU(b, c)
					runConcurrently(b, g, int64(done), int64(n), ways[w])
					spent[w] += time.Since(start)
					cpu[w] += processCPU() - c0
					srv[w] += serverCPU(b, c) - s0
				}
			}
			b.StopTimer()
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / 1000 }
			b.ReportMetric(per(spent[0]), "raw-µs/op")
			b.ReportMetric(per(spent[1]), "store-µs/op")
			b.ReportMetric(per(spent[2]), "ledger-µs/op")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "store/raw")
			_, cpuMeasured := cputime.Self()
			for k, name := range []string{"raw", "store", "ledger"} {
				if cpuMeasured {
					b.ReportMetric(per(cpu[k]), name+"-cpu-µs/op")
				}
				b.ReportMetric(per(srv[k]), name+"-srv-µs/op")
			}
			b.ReportMetric(float64(spent[2])/float64(spent[0]), "ledger/raw")
			// The ledger's own cost per Once, whatever the store does with
			// its writes (under load the store pipelines them, raw cannot).
			b.ReportMetric(float64(spent[2])/float64(spent[1]), "ledger/store")
		})
	}
}

// runConcurrently calls op for indexes from+1 .. from+n over exactly g
// goroutines and waits for them.
func runConcurrently(b *testing.B, g int, from, n int64, op func(i int64) error) {
	var next atomic.Int64
	next.Store(from)
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > from+n {
					return
				}
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// processCPU is 0 where the platform reports no CPU time (the benchmark
// then reports no cpu figures).
func processCPU() time.Duration {
	d, _ := cputime.Self()
	return d
}

func serverCPU(b *testing.B, c goredis.UniversalClient) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	d, err := cputime.RedisServer(info)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkEnqueueBacklog is the suite's accept-with-a-backlog benchmark.
func BenchmarkEnqueueBacklog(b *testing.B) {
	s, _ := newTestStore(b, Options{})
	storetest.BenchmarkEnqueueBacklog(b, s)
}

// BenchmarkLongScope is the suite's long-scope benchmark (issue #34).
func BenchmarkLongScope(b *testing.B) {
	s, _ := newTestStore(b, Options{})
	storetest.BenchmarkLongScope(b, s)
}
