package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
		_, err := l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
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
				p, err := l.Views().RecentDeliveries(ctx, ledger.DeliveryFilter{}, after, 50)
				if err != nil || p.Next == nil {
					b.Fatalf("page toward 20: %v", err)
				}
				after = p.Next
			}
			b.ResetTimer()
			for range b.N {
				if p, err := l.Views().RecentDeliveries(ctx, ledger.DeliveryFilter{}, after, 50); err != nil || len(p.Items) == 0 {
					b.Fatalf("page: %d, %v", len(p.Items), err)
				}
			}
		})
	}
}

// farFuture lists a whole due index.
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkLongScope measures the steps of one event on a scope that
// already holds a long history: 10, 1,000 or 10,000 settled effects, or
// 10, 1,000 or 10,000 deliveries waiting behind one in flight under order:
// scope.
// Issue #34's target is the same cost at every size, so compare each
// size's ns/op with the smallest's in the same run. doc-B is the size of
// the scope's document after the step: what every Transact of the scope
// reads and writes (on Postgres and Redis, over the network). written-B
// and read-B are the bytes per operation the steps handed to the store
// (documents and side records of the writes that landed, with the names
// of the records written, deleted or checked as absent) and read back
// from it (documents and side records read, and records a refused write
// handed over): what a server store moves per step, but for the document
// a Transact reads, which a store that caches it reads only after
// another process wrote.
//
//   - effects=N/claim-settle: Claim and Settle of a new effect;
//   - effects=N/duplicate: Claim of one of the N settled effects
//     (replayed; the replay cache off, so the store answers);
//   - effects=N/accept-take-finish: Enqueue, TakeDelivery and
//     FinishDelivery (delivered) of a new event;
//   - waiting=N/accept-take-finish: the same under order: scope, the head
//     finished and the next taken, so N items keep waiting.
//
// Each sub-benchmark starts a fresh scope of N every 10 operations, so
// that its own writes (queue items, runs and entries of its deliveries,
// which stay in the document while they are recent) are the same at every
// size and only the seeded history differs; run with -benchtime=100x or so.
// waiting=10000 enqueues 10,000 events for every 10 operations, a second
// or more on memory and bolt and tens of seconds on Postgres and Redis:
// select it alone (-bench 'LongScope/waiting') with a small -benchtime.
func BenchmarkLongScope(b *testing.B, store ledger.Store) {
	ctx := context.Background()
	moved := &movedStore{Store: store}
	l := ledger.New(moved, ledger.Options{ReplayCache: -1})
	// stop and start pause the timer and the byte counts together.
	stop := func(b *testing.B) { b.StopTimer(); moved.counting.Store(false) }
	start := func(b *testing.B) { moved.counting.Store(true); b.StartTimer() }
	var scopes atomic.Int64
	fresh := func(b *testing.B, kind string, n int) string {
		b.Helper()
		scope := fmt.Sprintf("long:%s:%d:%d", kind, n, scopes.Add(1))
		if err := seedSettled(ctx, store, scope, n, time.Now()); err != nil {
			b.Fatal(err)
		}
		// One write first, untimed: it rewrites the seeded document as
		// this build keeps it (a one-off migration), so the timed steps
		// see the steady state.
		if _, err := l.Once(ctx, ledger.Key{Scope: scope, Intent: "warm", Payload: 0},
			func(context.Context, ledger.Call) (any, error) { return nil, nil }); err != nil {
			b.Fatal(err)
		}
		return scope
	}
	// report stops the timer and reports scope's document and the bytes
	// moved per operation.
	report := func(b *testing.B, scope string) {
		b.Helper()
		stop(b)
		raw, err := store.Read(ctx, scope)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(raw)), "doc-B")
		b.ReportMetric(float64(moved.written.Load())/float64(b.N), "written-B/op")
		b.ReportMetric(float64(moved.read.Load())/float64(b.N), "read-B/op")
	}
	body := make([]byte, 1024)
	enqueue := func(scope, id string, order ledger.Order) (ledger.Enqueued, error) {
		return l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "bench", EventID: id, Scope: scope, Body: body},
			Run:   ledger.RunOptions{RunID: "bench:" + id, Mode: ledger.ModeIndependent},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: id}, PendingTTL: time.Minute},
			Order: order,
		})
	}
	finish := func(t ledger.Taken) error {
		_, err := l.Queue().FinishDelivery(ctx, ledger.Finish{Taken: t, Status: ledger.DeliveryDelivered})
		return err
	}
	// acceptTakeFinish is one queued event's whole life on scope: the
	// accept, the take and the delivered finish.
	acceptTakeFinish := func(b *testing.B, scope string, i int) {
		b.Helper()
		q, err := enqueue(scope, fmt.Sprintf("ev-%d", i), ledger.OrderNone)
		if err != nil || q.Status != ledger.EnqueueQueued {
			b.Fatalf("accept: %v %v", q.Status, err)
		}
		t, err := l.Queue().TakeDelivery(ctx, scope, q.Item.EntryID, time.Minute)
		if err != nil || !t.OK {
			b.Fatalf("take: %v %v", t.OK, err)
		}
		if err := finish(t); err != nil {
			b.Fatal(err)
		}
	}
	// reseeded times step on a scope that seed makes anew every 10
	// operations, at every size, and reports the last scope's document.
	const reseed = 10
	reseeded := func(b *testing.B, seed func(b *testing.B) string, step func(b *testing.B, scope string, i int)) {
		moved.reset()
		var scope string
		for i := range b.N {
			if i%reseed == 0 {
				stop(b)
				scope = seed(b)
				start(b)
			}
			step(b, scope, i)
		}
		report(b, scope)
	}
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("effects=%d/claim-settle", n), func(b *testing.B) {
			reseeded(b, func(b *testing.B) string { return fresh(b, "cs", n) }, func(b *testing.B, scope string, i int) {
				c, err := l.Claim(ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: -1 - i}})
				if err != nil || !c.Acquired() {
					b.Fatalf("claim: %v %v", c.Status, err)
				}
				if _, err := l.Settle(ctx, c.Ref(), ledger.OutcomeCommitted, "ok", nil); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("effects=%d/duplicate", n), func(b *testing.B) {
			scope := fresh(b, "dup", n)
			moved.reset()
			b.ResetTimer()
			for i := range b.N {
				c, err := l.Claim(ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: i % n}})
				if err != nil || c.Status != ledger.StatusReplayed {
					b.Fatalf("duplicate: %v %v", c.Status, err)
				}
			}
			report(b, scope)
		})
		b.Run(fmt.Sprintf("effects=%d/accept-take-finish", n), func(b *testing.B) {
			reseeded(b, func(b *testing.B) string { return fresh(b, "atf", n) }, acceptTakeFinish)
		})
	}
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("delivered=%d/accept-take-finish", n), func(b *testing.B) {
			seed := func(b *testing.B) string {
				scope := fmt.Sprintf("long:delivered:%d:%d", n, scopes.Add(1))
				if err := seedDelivered(ctx, store, scope, n, time.Now()); err != nil {
					b.Fatal(err)
				}
				// The one-off migration, untimed (see fresh).
				if _, err := l.Once(ctx, ledger.Key{Scope: scope, Intent: "warm", Payload: 0},
					func(context.Context, ledger.Call) (any, error) { return nil, nil }); err != nil {
					b.Fatal(err)
				}
				return scope
			}
			reseeded(b, seed, acceptTakeFinish)
		})
	}
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("waiting=%d/accept-take-finish", n), func(b *testing.B) {
			var scope string
			var head ledger.Taken
			var ids []string
			next := 0
			moved.reset()
			for i := range b.N {
				if i%reseed == 0 {
					stop(b)
					// n deliveries under order: scope, the first taken.
					scope = fmt.Sprintf("long:wait:%d:%d", n, scopes.Add(1))
					ids = ids[:0]
					next = 1
					for j := range n + 1 {
						q, err := enqueue(scope, fmt.Sprintf("w-%d", j), ledger.OrderScope)
						if err != nil {
							b.Fatal(err)
						}
						ids = append(ids, q.Item.EntryID)
					}
					var err error
					if head, err = l.Queue().TakeDelivery(ctx, scope, ids[0], time.Minute); err != nil || !head.OK {
						b.Fatalf("take head: %v %v", head.OK, err)
					}
					start(b)
				}
				q, err := enqueue(scope, fmt.Sprintf("ev-%d", i), ledger.OrderScope)
				if err != nil || q.Status != ledger.EnqueueQueued {
					b.Fatalf("accept: %v %v", q.Status, err)
				}
				ids = append(ids, q.Item.EntryID)
				if err := finish(head); err != nil {
					b.Fatal(err)
				}
				if head, err = l.Queue().TakeDelivery(ctx, scope, ids[next], time.Minute); err != nil || !head.OK {
					b.Fatalf("take next: %v %v", head.OK, err)
				}
				next++
			}
			report(b, scope)
		})
	}
}

// seedSettled writes scope as a format 1 document holding n committed
// effects (intent reply, payloads 0 to n-1), settled just now: the history
// a long conversation leaves within retention, written in one step rather
// than n.
func seedSettled(ctx context.Context, store ledger.Store, scope string, n int, now time.Time) error {
	now = now.UTC().Truncate(time.Millisecond)
	entries := make(map[string]ledger.Entry, n)
	landings := make([]map[string]any, 0, n)
	for i := range n {
		k := ledger.Key{Scope: scope, Intent: "reply", Payload: i}
		ik, err := ledger.IdempotencyKey(k)
		if err != nil {
			return err
		}
		id := strings.TrimPrefix(ik, "ro_")
		at := now.Add(time.Duration(i-n) * time.Millisecond)
		entries[id] = ledger.Entry{ID: id, Scope: scope, Intent: "reply", Payload: json.RawMessage(strconv.Itoa(i)),
			State: ledger.StateCommitted, Attempt: 1, ClaimedAt: at, PendingTTL: 15 * time.Minute,
			SettledAt: at, LandedSeq: uint64(i + 1), Value: json.RawMessage(`{"reply":"sent"}`)}
		landings = append(landings, map[string]any{"seq": i + 1, "at": at})
	}
	doc, err := json.Marshal(map[string]any{
		"format": 1, "scope": scope, "seq": n, "token": now.UnixMilli(),
		"expiresAt": now.Add(7 * 24 * time.Hour), "entries": entries, "landings": landings,
	})
	if err != nil {
		return err
	}
	return store.Transact(ctx, scope, func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: doc, TTL: 7 * 24 * time.Hour}, nil
	})
}

// seedDelivered writes scope as a format 1 document holding n delivered
// events (source bench, intent deliver), each with its committed deliver
// entry, its finished queue item and its run, received and delivered a millisecond
// apart up to now: the deliveries a long conversation keeps within
// retention, written in one step rather than 3n. Their event records are
// not written: the benchmark reads none.
func seedDelivered(ctx context.Context, store ledger.Store, scope string, n int, now time.Time) error {
	now = now.UTC().Truncate(time.Millisecond)
	entries := make(map[string]ledger.Entry, n)
	queue := make(map[string]ledger.QueueItem, n)
	runs := make(map[string]map[string]any, n)
	landings := make([]map[string]any, 0, n)
	for i := range n {
		ev := fmt.Sprintf("seed-%d", i)
		k := ledger.Key{Scope: scope, Intent: "deliver", Payload: ev}
		ik, err := ledger.IdempotencyKey(k)
		if err != nil {
			return err
		}
		id := strings.TrimPrefix(ik, "ro_")
		at := now.Add(time.Duration(i-n) * time.Millisecond)
		payload := json.RawMessage(strconv.Quote(ev))
		entries[id] = ledger.Entry{ID: id, Scope: scope, Intent: "deliver", Payload: payload,
			State: ledger.StateCommitted, Attempt: 1, ClaimedAt: at, PendingTTL: time.Minute, Redeliverable: true,
			RunID: "bench:" + ev, Token: uint64(at.UnixMilli()), Delivery: 1,
			SettledAt: at, LandedSeq: uint64(i + 1), Value: json.RawMessage(`{"reply":"sent"}`)}
		queue[id] = ledger.QueueItem{EntryID: id, Scope: scope, Source: "bench", EventID: ev, RunID: "bench:" + ev,
			Intent: "deliver", Payload: payload, Blob: fmt.Sprintf("%016x", i), Status: ledger.DeliveryDelivered,
			ReceivedAt: at, ContextAt: at, Attempts: 1, LastStatus: 200, FinishedAt: at, BodySize: 1024}
		// Its run, as a delivery leaves it: independent, idle, kept for
		// a retention after its last activity.
		runs["bench:"+ev] = map[string]any{"id": "bench:" + ev, "mode": "independent", "token": at.UnixMilli(),
			"delivery": 1, "contextAt": at, "seenSeq": i, "lastActive": at}
		landings = append(landings, map[string]any{"seq": i + 1, "at": at})
	}
	doc, err := json.Marshal(map[string]any{
		"format": 1, "scope": scope, "seq": n, "token": now.UnixMilli(),
		"expiresAt": now.Add(7 * 24 * time.Hour), "entries": entries, "queue": queue, "runs": runs, "landings": landings,
	})
	if err != nil {
		return err
	}
	return store.Transact(ctx, scope, func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: doc, TTL: 7 * 24 * time.Hour, ReceivedAt: now.Add(-time.Millisecond)}, nil
	})
}

// movedStore counts the bytes BenchmarkLongScope's steps move through a
// store while counting is on (see written-B and read-B there). It honours
// Write.Absent exactly when the store it wraps does.
type movedStore struct {
	ledger.Store
	counting      atomic.Bool
	written, read atomic.Int64
}

func (s *movedStore) ChecksAbsent() bool { return ledger.ChecksAbsent(s.Store) }

// reset zeroes the counts and turns counting on.
func (s *movedStore) reset() {
	s.written.Store(0)
	s.read.Store(0)
	s.counting.Store(true)
}

func (s *movedStore) add(c *atomic.Int64, n int) {
	if s.counting.Load() {
		c.Add(int64(n))
	}
}

func (s *movedStore) Read(ctx context.Context, scope string) ([]byte, error) {
	b, err := s.Store.Read(ctx, scope)
	s.add(&s.read, len(b))
	return b, err
}

func (s *movedStore) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	b, err := s.Store.ReadBlob(ctx, scope, name)
	s.add(&s.read, len(b))
	return b, err
}

func (s *movedStore) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	bs, err := s.Store.ReadBlobs(ctx, scope, names)
	for _, b := range bs {
		s.add(&s.read, len(b))
	}
	return bs, err
}

// Transact counts the write that landed (fn may run more than once; the
// last run's write is the one saved), its records' names included, or
// the records a refused write handed over.
func (s *movedStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	n := 0
	err := s.Store.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
		w, err := fn(cur)
		n = 0
		if w != nil && err == nil {
			// The names too: a server is sent each record's name,
			// deleted ones and those checked as absent included.
			n = len(w.Doc)
			for name, b := range w.Blobs {
				n += len(name) + len(b)
			}
			for _, name := range w.Absent {
				n += len(name)
			}
		}
		return w, err
	})
	var present *ledger.PresentError
	switch {
	case err == nil:
		s.add(&s.written, n)
	case errors.As(err, &present):
		for _, b := range present.Blobs {
			s.add(&s.read, len(b))
		}
	}
	return err
}
