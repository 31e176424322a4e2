package bench

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// scriptedStore is a store whose calls take as long as the test says, on a
// clock the test owns, and which records what it was given.
type scriptedStore struct {
	clock    time.Time
	next     time.Duration // how long the next call takes
	err      error         // what the next call returns
	doc      []byte        // what Read returns
	scopes   []string      // what ScopesToReview returns
	gotScope string
	gotWrite *ledger.Write
	gotLimit int
}

func (s *scriptedStore) now() time.Time { return s.clock }

func (s *scriptedStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	s.clock = s.clock.Add(s.next)
	s.gotScope = scope
	w, err := fn(s.doc)
	if err != nil {
		return err
	}
	s.gotWrite = w
	return s.err
}

func (s *scriptedStore) Read(ctx context.Context, scope string) ([]byte, error) {
	s.clock = s.clock.Add(s.next)
	s.gotScope = scope
	return s.doc, s.err
}

func (s *scriptedStore) ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	s.gotLimit = limit
	return s.scopes, s.err
}

func (s *scriptedStore) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	return nil, s.err
}

func (s *scriptedStore) ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error) {
	return nil, s.err
}
func (s *scriptedStore) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	return 0, s.err
}
func (s *scriptedStore) ScopesReceived(ctx context.Context, before ledger.ScopeAt, limit int) ([]ledger.ScopeAt, error) {
	return nil, s.err
}

func (s *scriptedStore) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	return nil, s.err
}

func (s *scriptedStore) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	return nil, s.err
}

func (s *scriptedStore) ReadControl(ctx context.Context, name string) ([]byte, error) {
	return nil, s.err
}

func (s *scriptedStore) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	return s.err
}

func serveOnce(h http.Handler) {
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/hooks/"+sourceName, nil))
}

func TestTimedStoreRecordsEachRequestsCalls(t *testing.T) {
	fake := &scriptedStore{clock: time.Unix(1700000000, 0)}
	ts := newTimedStore(fake, fake.now)
	failure := errors.New("store down")

	// Request i (1..100) makes a Transact of i ms that fails on odd i, and
	// a Read of i ms: 200 calls, each length twice, and requests taking
	// 2, 4, ..., 200 ms in all.
	i := 0
	h := ts.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i++
		fake.next, fake.err = time.Duration(i)*time.Millisecond, nil
		if i%2 == 1 {
			fake.err = failure
		}
		if err := ts.Transact(r.Context(), "s", func([]byte) (*ledger.Write, error) { return nil, nil }); err != fake.err {
			t.Errorf("Transact returned %v, want %v", err, fake.err)
		}
		fake.err = nil
		if _, err := ts.Read(r.Context(), "s"); err != nil {
			t.Error(err)
		}
	}))

	// A warm-up request before the pass records nothing.
	serveOnce(h)
	i = 0

	rec := ts.newRecorder(100)
	rec.attach()
	for range 100 {
		serveOnce(h)
	}
	rec.detach()
	// Nor does a request of another slice, after the pass let go.
	serveOnce(h)

	got := rec.finish()
	want := StoreTiming{Requests: 100, Calls: 200, CallsPerReq: 2,
		// Nearest rank over 1,1,2,2,...,100,100 ms: the 100th and the
		// 198th smallest.
		CallP50ms: 50, CallP99ms: 99,
		// Over 2,4,...,200 ms: the 50th and the 99th.
		ReqP50ms: 100, ReqP99ms: 198}
	if got != want {
		t.Errorf("store timing %+v\nwant %+v", got, want)
	}
}

func TestTimedStoreCountsRequestsWithoutCalls(t *testing.T) {
	fake := &scriptedStore{}
	ts := newTimedStore(fake, fake.now)
	// A request the gateway turns away before the ledger (bad signature,
	// say) waited on the store for nothing, and counts as such.
	idle := ts.handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	busy := ts.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fake.next = 3 * time.Millisecond
		_, _ = ts.Read(r.Context(), "s")
	}))
	rec := ts.newRecorder(4)
	rec.attach()
	serveOnce(idle)
	serveOnce(idle)
	serveOnce(idle)
	serveOnce(busy)
	rec.detach()
	got := rec.finish()
	want := StoreTiming{Requests: 4, Calls: 1, CallsPerReq: 0.25, CallP50ms: 3, CallP99ms: 3, ReqP50ms: 0, ReqP99ms: 3}
	if got != want {
		t.Errorf("store timing %+v\nwant %+v", got, want)
	}
	if empty := ts.newRecorder(0).finish(); empty != (StoreTiming{}) {
		t.Errorf("a pass without requests: %+v", empty)
	}
}

func TestTimedStoreForwardsUnchanged(t *testing.T) {
	fake := &scriptedStore{doc: []byte(`{"a":1}`), scopes: []string{"x", "y"}}
	ts := newTimedStore(fake, fake.now)
	ctx := context.Background()

	want := &ledger.Write{Doc: []byte(`{"b":2}`), TTL: time.Hour}
	var seen []byte
	if err := ts.Transact(ctx, "scope-1", func(cur []byte) (*ledger.Write, error) { seen = cur; return want, nil }); err != nil {
		t.Fatal(err)
	}
	if fake.gotScope != "scope-1" || fake.gotWrite != want || !bytes.Equal(seen, fake.doc) {
		t.Errorf("Transact reached the store as scope %q, write %v, current %q", fake.gotScope, fake.gotWrite, seen)
	}
	// The decision's error comes back as it was, for errors.Is.
	if err := ts.Transact(ctx, "s", func([]byte) (*ledger.Write, error) { return nil, ledger.ErrInvalid }); err != ledger.ErrInvalid {
		t.Errorf("Transact returned %v, want the decision's own error", err)
	}
	fake.err = ledger.ErrContention
	if err := ts.Transact(ctx, "s", func([]byte) (*ledger.Write, error) { return nil, nil }); err != ledger.ErrContention {
		t.Errorf("Transact returned %v, want the store's own error", err)
	}
	fake.err = nil
	if doc, err := ts.Read(ctx, "scope-2"); err != nil || string(doc) != `{"a":1}` || fake.gotScope != "scope-2" {
		t.Errorf("Read: %q, %v (scope %q)", doc, err, fake.gotScope)
	}
	if scopes, err := ts.ScopesToReview(ctx, time.Now(), 7); err != nil || !slices.Equal(scopes, fake.scopes) || fake.gotLimit != 7 {
		t.Errorf("ScopesToReview: %v, %v (limit %d)", scopes, err, fake.gotLimit)
	}
}

// TestTimedStoreUnderTheLedger runs the ledger over the wrapper on a real
// store from many requests at once: the ledger's decisions come through
// intact, and every call is counted (the race detector checks the rest).
func TestTimedStoreUnderTheLedger(t *testing.T) {
	ts := newTimedStore(memory.New(nil), time.Now)
	l := ledger.New(ts, ledger.Options{})
	const requests = 256
	h := ts.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		key := ledger.Key{Scope: "scope-" + id, Intent: "deliver", Payload: map[string]string{"id": id}}
		for round := range 2 {
			c, err := l.Claim(r.Context(), ledger.ClaimRequest{Key: key})
			if err != nil {
				t.Error(err)
				return
			}
			want := []ledger.Status{ledger.StatusClaimed, ledger.StatusInFlight}[round]
			if c.Status != want {
				t.Errorf("claim %d of %s: %s, want %s", round+1, id, c.Status, want)
			}
		}
		if _, err := l.Check(r.Context(), key); err != nil {
			t.Error(err)
		}
	}))
	rec := ts.newRecorder(requests)
	rec.attach()
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < requests; i += 64 {
				req := httptest.NewRequest(http.MethodPost, "/?id="+strconv.Itoa(i), nil)
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
	wg.Wait()
	rec.detach()
	got := rec.finish()
	if got.Requests != requests || got.Calls != 3*requests || got.CallsPerReq != 3 {
		t.Errorf("store timing %+v, want %d requests of 3 calls each", got, requests)
	}
	if got.CallP50ms > got.CallP99ms || got.ReqP50ms > got.ReqP99ms || got.ReqP99ms < got.CallP99ms {
		t.Errorf("quantiles out of order: %+v", got)
	}
}

// TestFinishWaitsForRequestsInFlight: a request admitted before the pass
// ended counts even if its handler returns after the pass's summary was
// asked for.
func TestFinishWaitsForRequestsInFlight(t *testing.T) {
	fake := &scriptedStore{}
	ts := newTimedStore(fake, fake.now)
	inside, release := make(chan struct{}), make(chan struct{})
	h := ts.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fake.next = time.Millisecond
		_, _ = ts.Read(r.Context(), "s")
		close(inside)
		<-release
	}))
	rec := ts.newRecorder(1)
	rec.attach()
	var wg sync.WaitGroup
	wg.Go(func() { serveOnce(h) })
	<-inside
	rec.detach()
	done := make(chan StoreTiming, 1)
	wg.Go(func() { done <- rec.finish() })
	// Once finish has closed the recorder it can only be waiting for the
	// request held inside the handler.
	for closed := false; !closed; runtime.Gosched() {
		rec.mu.Lock()
		closed = rec.closed
		rec.mu.Unlock()
	}
	select {
	case got := <-done:
		t.Fatalf("finish returned %+v with a request still in its handler", got)
	default:
	}
	close(release)
	wg.Wait()
	got := <-done
	if got.Requests != 1 || got.Calls != 1 {
		t.Errorf("store timing %+v, want the request in flight counted", got)
	}
	// Once finished, the recorder takes no more requests.
	if rec.begin() {
		t.Error("a finished recorder admitted a request")
	}
}
