package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
)

func TestTransactAndRead(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	ctx := ctxT(t)

	doc, err := s.Read(ctx, "conv/1")
	if err != nil || doc != nil {
		t.Fatalf("Read of a new scope = %q, %v; want nil, nil", doc, err)
	}
	var seen [][]byte
	for _, want := range []string{`{"a":1}`, `{"a":2}`} {
		err := s.Transact(ctx, "conv/1", func(cur []byte) (*ledger.Write, error) {
			seen = append(seen, cur)
			return &ledger.Write{Doc: []byte(want)}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 || seen[0] != nil || string(seen[1]) != `{"a":1}` {
		t.Fatalf("fn saw %q; want [nil {\"a\":1}]", seen)
	}
	// A second store has no cache: it must read what the first wrote.
	other := New(s.client, Options{KeyPrefix: s.prefix})
	doc, err = other.Read(ctx, "conv/1")
	if err != nil || string(doc) != `{"a":2}` {
		t.Fatalf("Read = %q, %v", doc, err)
	}
	// Scopes are independent, whatever characters they hold.
	for _, scope := range []string{"conv/2", "{tagged}", "with space", "ünï"} {
		if err := s.Transact(ctx, scope, put(`{"s":"`+scope+`"}`, 0, time.Time{})); err != nil {
			t.Fatal(err)
		}
		doc, err := other.Read(ctx, scope)
		if err != nil || string(doc) != `{"s":"`+scope+`"}` {
			t.Fatalf("Read(%q) = %q, %v", scope, doc, err)
		}
	}
}

func TestReturnedDocumentsAreCopies(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	ctx := ctxT(t)
	buf := []byte(`{"a":1}`)
	if err := s.Transact(ctx, "x", func([]byte) (*ledger.Write, error) { return &ledger.Write{Doc: buf}, nil }); err != nil {
		t.Fatal(err)
	}
	buf[2] = 'Z' // the caller reuses its buffer
	err := s.Transact(ctx, "x", func(cur []byte) (*ledger.Write, error) {
		if string(cur) != `{"a":1}` {
			t.Errorf("fn saw %q", cur)
		}
		cur[0] = '!' // a misbehaving fn must not poison the cache
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := s.Read(ctx, "x")
	doc[0] = '!'
	if doc, _ := s.Read(ctx, "x"); string(doc) != `{"a":1}` {
		t.Fatalf("Read = %q", doc)
	}
}

var errRefused = errors.New("refused by fn")

func TestFnErrorWritesNothing(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)

	err := s.Transact(ctx, "new", func([]byte) (*ledger.Write, error) { return nil, fmt.Errorf("wrapped: %w", errRefused) })
	if !errors.Is(err, errRefused) {
		t.Fatalf("err = %v; want errRefused", err)
	}
	if n, _ := c.Exists(ctx, s.docKey("new")).Result(); n != 0 {
		t.Fatal("a failed fn created the key")
	}

	if err := s.Transact(ctx, "old", put(`{"v":1}`, 0, time.Time{})); err != nil {
		t.Fatal(err)
	}
	err = s.Transact(ctx, "old", func([]byte) (*ledger.Write, error) { return nil, errRefused })
	if err != errRefused {
		t.Fatalf("err = %v; want errRefused unchanged", err)
	}
	if doc, _ := s.Read(ctx, "old"); string(doc) != `{"v":1}` {
		t.Fatalf("doc = %q", doc)
	}
}

// A refusal or a read-only answer reached on a cached (possibly stale)
// document must be checked against the server before it is returned.
func TestOutcomesFromCacheAreVerified(t *testing.T) {
	a, _ := newTestStore(t, Options{})
	b := New(a.client, Options{KeyPrefix: a.prefix})
	ctx := ctxT(t)

	if err := a.Transact(ctx, "s", put(`{"state":"open"}`, 0, time.Time{})); err != nil {
		t.Fatal(err)
	}
	if err := b.Transact(ctx, "s", put(`{"state":"closed"}`, 0, time.Time{})); err != nil {
		t.Fatal(err)
	}
	// a's cache still says open. fn writes nothing for open and refuses
	// closed: the caller must hear the refusal.
	var calls []string
	err := a.Transact(ctx, "s", func(cur []byte) (*ledger.Write, error) {
		calls = append(calls, string(cur))
		if strings.Contains(string(cur), "closed") {
			return nil, errRefused
		}
		return nil, nil
	})
	if !errors.Is(err, errRefused) || len(calls) != 2 {
		t.Fatalf("err = %v after calls %q; want errRefused after a fresh read", err, calls)
	}

	// The other way round: a refusal on a stale copy, then a write on the
	// fresh one.
	if err := b.Transact(ctx, "s", put(`{"state":"open"}`, 0, time.Time{})); err != nil {
		t.Fatal(err)
	}
	calls = nil
	err = a.Transact(ctx, "s", func(cur []byte) (*ledger.Write, error) {
		calls = append(calls, string(cur))
		if strings.Contains(string(cur), "closed") {
			return nil, errRefused
		}
		return &ledger.Write{Doc: []byte(`{"state":"done"}`)}, nil
	})
	if err != nil || len(calls) != 2 {
		t.Fatalf("err = %v after calls %q", err, calls)
	}
	if doc, _ := b.Read(ctx, "s"); string(doc) != `{"state":"done"}` {
		t.Fatalf("doc = %q", doc)
	}

	// A guess that the scope is new is verified the same way.
	fresh := New(a.client, Options{KeyPrefix: a.prefix})
	calls = nil
	err = fresh.Transact(ctx, "s", func(cur []byte) (*ledger.Write, error) {
		calls = append(calls, string(cur))
		if cur == nil {
			return nil, errRefused
		}
		return nil, nil
	})
	if err != nil || len(calls) != 2 {
		t.Fatalf("err = %v after calls %q; want nil after the real document", err, calls)
	}
}

// countingHook counts the commands a client sends; a pipeline counts once,
// as it is one round trip.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *countingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// The budget: a claim plus a settle, uncontended, is two round
// trips, including on a scope this process has never seen.
func TestUncontendedClaimAndSettleIsTwoRoundTrips(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)
	if err := casScript.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &countingHook{}
	c.AddHook(hook)
	review := time.Now().Add(time.Minute)
	if err := s.Transact(ctx, "evt_1", put(`{"pending":1}`, time.Hour, review)); err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(ctx, "evt_1", put(`{"done":1}`, time.Hour, time.Time{})); err != nil {
		t.Fatal(err)
	}
	if n := hook.n.Load(); n != 2 {
		t.Fatalf("claim + settle took %d round trips; want 2", n)
	}
}

// The same budget, seen through the ledger: one Once on a new event.
func TestOnceIsTwoRoundTrips(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)
	if err := casScript.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &countingHook{}
	c.AddHook(hook)
	l := ledger.New(s, ledger.Options{})
	res, err := l.Once(ctx, ledger.Key{Scope: "stripe:evt_1", Intent: "deliver", Payload: map[string]any{"event_id": "evt_1"}},
		func(context.Context, ledger.Call) (any, error) { return "ok", nil })
	if err != nil || res.Status != ledger.StatusExecuted {
		t.Fatalf("Once = %+v, %v", res, err)
	}
	if n := hook.n.Load(); n != 2 {
		t.Fatalf("Once took %d round trips; want 2", n)
	}
}

func TestTTL(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)
	key := s.docKey("t")

	if err := s.Transact(ctx, "t", put(`{}`, 10*time.Second, time.Time{})); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 9*time.Second || ttl > 10*time.Second {
		t.Fatalf("PTTL = %v; want just under 10s", ttl)
	}
	if err := s.Transact(ctx, "t", put(`{}`, time.Hour, time.Time{})); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 59*time.Minute {
		t.Fatalf("PTTL = %v after a longer TTL; want about 1h", ttl)
	}
	if err := s.Transact(ctx, "t", put(`{}`, 0, time.Time{})); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl != -1 {
		t.Fatalf("PTTL = %v after TTL 0; want no expiry (-1)", ttl)
	}
}

// A document that expired is absent, even to a store whose cache still
// holds it.
func TestExpiry(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	ctx := ctxT(t)
	if err := s.Transact(ctx, "e", put(`{"old":1}`, 50*time.Millisecond, time.Time{})); err != nil {
		t.Fatal(err)
	}
	waitGone(t, s, "e")
	var saw []byte = []byte("unset")
	err := s.Transact(ctx, "e", func(cur []byte) (*ledger.Write, error) {
		saw = cur
		return &ledger.Write{Doc: []byte(`{"new":1}`)}, nil
	})
	if err != nil || saw != nil {
		t.Fatalf("after expiry fn saw %q (err %v); want nil", saw, err)
	}
}

func waitGone(t *testing.T, s *Store, scope string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Ask the server directly, so s's cache stays stale.
		n, err := s.client.Exists(context.Background(), s.docKey(scope)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not expire", scope)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestScopesToReview(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	// Many scopes, so they land in many buckets and the merge is tested.
	for i := range 40 {
		at := t0.Add(time.Duration(40-i) * time.Second)
		if err := s.Transact(ctx, fmt.Sprintf("s%02d", i), put(`{}`, 0, at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Transact(ctx, "never", put(`{}`, 0, time.Time{})); err != nil {
		t.Fatal(err)
	}

	got, err := s.ScopesToReview(ctx, t0.Add(5*time.Second), 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"s39", "s38", "s37", "s36", "s35"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v; want %v (oldest first)", got, want)
	}
	got, _ = s.ScopesToReview(ctx, t0.Add(time.Hour), 3)
	if fmt.Sprint(got) != fmt.Sprint([]string{"s39", "s38", "s37"}) {
		t.Fatalf("limit 3: got %v", got)
	}
	if got, _ := s.ScopesToReview(ctx, t0, 10); len(got) != 0 {
		t.Fatalf("nothing is due at t0, got %v", got)
	}
	if got, _ := s.ScopesToReview(ctx, t0.Add(time.Hour), 0); len(got) != 0 {
		t.Fatalf("limit 0: got %v", got)
	}

	// Clearing ReviewAt takes the scope out; moving it moves it.
	if err := s.Transact(ctx, "s39", put(`{}`, 0, time.Time{})); err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(ctx, "s38", put(`{}`, 0, t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	got, _ = s.ScopesToReview(ctx, t0.Add(5*time.Second), 100)
	if fmt.Sprint(got) != fmt.Sprint([]string{"s37", "s36", "s35"}) {
		t.Fatalf("after clearing s39 and moving s38: got %v", got)
	}
	// A failed fn changes nothing in the index either.
	_ = s.Transact(ctx, "s37", func([]byte) (*ledger.Write, error) { return nil, errRefused })

	// An expired document leaves the index the next time it is listed.
	if err := s.Transact(ctx, "s36", put(`{}`, 30*time.Millisecond, t0)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, s, "s36")
	got, _ = s.ScopesToReview(ctx, t0.Add(5*time.Second), 100)
	if fmt.Sprint(got) != fmt.Sprint([]string{"s37", "s35"}) {
		t.Fatalf("after s36 expired: got %v", got)
	}
	if err := c.ZScore(ctx, s.indexKey(bucketOf("s36")), "s36").Err(); err != goredis.Nil {
		t.Fatalf("expired scope still indexed: %v", err)
	}
}

func TestConcurrentIncrementsAreAtomic(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxRetries: 100000})
	ctx := ctxT(t)
	const workers, each = 64, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				if err := increment(ctx, s, "hot"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	doc, _ := s.Read(ctx, "hot")
	if got := decodeCounter(t, doc).N; got != workers*each {
		t.Fatalf("counter = %d; want %d", got, workers*each)
	}
}

// Two stores on one prefix each believe their cache; the script must catch
// every stale guess.
func TestTwoStoresNoLostUpdates(t *testing.T) {
	a, _ := newTestStore(t, Options{})
	b := New(a.client, Options{KeyPrefix: a.prefix})
	ctx := ctxT(t)

	for i := range 100 {
		s := a
		if i%2 == 1 {
			s = b
		}
		if err := increment(ctx, s, "shared"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b, a, b, a, b, a, b} {
		wg.Go(func() {
			for range 50 {
				if err := increment(ctx, s, "shared"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	doc, _ := a.Read(ctx, "shared")
	if got := decodeCounter(t, doc).N; got != 100+8*50 {
		t.Fatalf("counter = %d; want %d", got, 100+8*50)
	}
}

func TestNoScriptFallback(t *testing.T) {
	s, c := newPrivateTestStore(t, Options{})
	ctx := ctxT(t)
	if err := increment(ctx, s, "f"); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := increment(ctx, s, "f"); err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
	if exists, _ := casScript.Exists(ctx, c).Result(); !exists[0] {
		t.Fatal("the fallback EVAL did not leave the script cached")
	}
	if doc, _ := s.Read(ctx, "f"); decodeCounter(t, doc).N != 2 {
		t.Fatalf("doc = %q", doc)
	}
}

// Writers in several processes (here Stores of their own) race through
// the script; past MaxRetries lost races a write gives up with a
// ContentionError and writes nothing.
func TestContentionError(t *testing.T) {
	s, c := newTestStore(t, Options{MaxRetries: 1})
	stores := []*Store{s}
	for range 7 {
		other, _ := newTestStoreOn(t, c, Options{KeyPrefix: s.prefix, MaxRetries: 1})
		stores = append(stores, other)
	}
	ctx := ctxT(t)
	var wg sync.WaitGroup
	var ok, contended atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			s := stores[g%len(stores)]
			for range 30 {
				err := increment(ctx, s, "hammered")
				var ce *ContentionError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ledger.ErrContention) && errors.As(err, &ce) && ce.Scope == "hammered":
					contended.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if contended.Load() == 0 {
		t.Fatal("no ContentionError with MaxRetries 1 and 32 writers in 8 processes on one scope")
	}
	doc, _ := s.Read(ctx, "hammered")
	if got := decodeCounter(t, doc).N; int64(got) != ok.Load() {
		t.Fatalf("counter = %d; want exactly the %d successful increments", got, ok.Load())
	}
	t.Logf("%d increments succeeded, %d gave up with contention", ok.Load(), contended.Load())
}

// Goroutines of one process that write one scope take turns: each decides
// on what the one before wrote, so none loses a race to another and none
// gives up, even allowed a single retry.
func TestOneProcessTakesTurnsOnAScope(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxRetries: 1})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 30 {
				if err := increment(ctx, s, "hot"); err != nil {
					t.Errorf("increment of a scope only this process writes: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	doc, _ := s.Read(ctx, "hot")
	if got := decodeCounter(t, doc).N; got != 32*30 {
		t.Fatalf("counter = %d, want %d", got, 32*30)
	}
}

// The write script is idempotent for its own attempt: a client-level retry
// of a write that already landed (reply lost) must not count as losing.
func TestRetriedWriteIsIdempotent(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)
	keys := casArgs{scope: "i", key: s.docKey("i")}.keys(s)
	for range 2 {
		r, err := casScript.Run(ctx, c, keys, "", "tok1", `{"n":1}`, "0", "", "i", "", 0, 0, "").Slice()
		if err != nil || len(r) != 1 || r[0] != int64(1) {
			t.Fatalf("reply %v, %v; want [1]", r, err)
		}
	}
	r, err := casScript.Run(ctx, c, keys, "", "tok2", `{"n":2}`, "0", "", "i", "", 0, 0, "").Slice()
	if err != nil || len(r) != 3 || r[1] != "tok1" || r[2] != `{"n":1}` {
		t.Fatalf("conflict reply %v, %v; want [0 tok1 {\"n\":1}]", r, err)
	}
}

func TestCancelledContext(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := increment(ctx, s, "c"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Transact: %v", err)
	}
	if _, err := s.Read(ctx, "c"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read: %v", err)
	}
}

func TestNewRefusesBadSetups(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: New did not panic", name)
			}
		}()
		f()
	}
	plain := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer plain.Close()
	mustPanic("no ContextTimeoutEnabled", func() { New(plain, Options{}) })
	good := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer good.Close()
	mustPanic("braces in prefix", func() { New(good, Options{KeyPrefix: "a{b}:"}) })
	if err := (Options{MaxRetries: -1}).Validate(); err == nil {
		t.Error("negative MaxRetries accepted")
	}
	_ = New(good, Options{})
}

func TestBucketsSpreadOverSlots(t *testing.T) {
	seen := map[uint32]bool{}
	for i := range 10000 {
		seen[bucketOf(fmt.Sprintf("stripe:evt_%d", i))] = true
	}
	if len(seen) != reviewBuckets {
		t.Fatalf("10000 scopes used %d of %d buckets", len(seen), reviewBuckets)
	}
	// Redis Cluster hashes only what is between the first '{' and the next
	// '}', when that is not empty: a scope and its index must agree on it,
	// whatever the scope holds.
	hashTag := func(key string) string {
		i := strings.IndexByte(key, '{')
		if i < 0 {
			return key
		}
		j := strings.IndexByte(key[i+1:], '}')
		if j <= 0 {
			return key
		}
		return key[i+1 : i+1+j]
	}
	s := New(goredis.NewClient(&goredis.Options{ContextTimeoutEnabled: true}), Options{})
	defer s.client.Close()
	for _, scope := range []string{"plain", "x{y}z", "{}", "}{", "{", "}", ""} {
		doc, idx := s.docKey(scope), s.indexKey(bucketOf(scope))
		if hashTag(doc) != hashTag(idx) || len(hashTag(doc)) != 2 {
			t.Errorf("scope %q: %q and %q hash on %q and %q", scope, doc, idx, hashTag(doc), hashTag(idx))
		}
	}
}

// ScopesDue answers the earliest due scopes across buckets in order, also
// when most of them sit in one bucket: it reads a few entries of every
// bucket first, and more only of the buckets that may hold more of the
// answer.
func TestScopesDueAcrossBucketsInOrder(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	ctx := ctxT(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var crowded, spread []string
	for i := 0; len(crowded) < 40 || len(spread) < 200; i++ {
		scope := fmt.Sprintf("s-%d", i)
		if bucketOf(scope) == 7 {
			if len(crowded) < 40 {
				crowded = append(crowded, scope)
			}
		} else if len(spread) < 200 {
			spread = append(spread, scope)
		}
	}
	type due struct {
		scope string
		at    time.Time
	}
	var all []due
	// The crowded bucket holds the 30 earliest, and 10 late ones; the
	// other buckets hold the rest, interleaved.
	for i, scope := range crowded {
		at := base.Add(time.Duration(i) * time.Second)
		if i >= 30 {
			at = base.Add(time.Hour + time.Duration(i)*time.Second)
		}
		all = append(all, due{scope, at})
	}
	for i, scope := range spread {
		all = append(all, due{scope, base.Add(30*time.Second + time.Duration(i)*time.Second)})
	}
	for _, d := range all {
		err := s.Transact(ctx, d.scope, func([]byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{}`), TTL: time.Hour, DueAt: d.at}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(all, func(a, b due) int { return a.at.Compare(b.at) })
	for _, limit := range []int{1, 5, 35, 64, 300} {
		got, err := s.ScopesDue(ctx, base.Add(2*time.Hour), limit)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range all[:min(limit, len(all))] {
			want = append(want, d.scope)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: got %v, want %v", limit, got, want)
		}
	}
}
