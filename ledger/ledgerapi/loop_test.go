package ledgerapi_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

// oncer is what both paths under test offer: the in-process ledger and
// the HTTP client run the same claim → effect → settle loop.
type oncer interface {
	Once(ctx context.Context, key ledger.Key, effect ledger.Effect, opts ...ledger.OnceOptions) (ledger.Result, error)
	Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	History(ctx context.Context, scope string) ([]ledger.Entry, error)
}

// loopPaths builds each path with the given clock and reconciler. For the
// HTTP path both belong to the client, where the effect runs; the server's
// ledger has neither a reconciler nor that clock.
func loopPaths(t *testing.T, now func() time.Time, rec ledger.Reconciler) map[string]oncer {
	t.Helper()
	base := newClock()
	if now == nil {
		now = base.Now
	}
	inProcess := ledger.New(memory.New(now), ledger.Options{Clock: now, Reconcile: rec, WaitInterval: time.Millisecond})

	server := ledger.New(memory.New(now), ledger.Options{Clock: now})
	srv := httptest.NewServer(ledgerapi.NewHandler(server, token, zaptest.NewLogger(t)))
	t.Cleanup(func() {
		srv.Close()
		srv.Client().CloseIdleConnections()
	})
	opts := []ledgerapi.ClientOption{ledgerapi.WithClock(now), ledgerapi.WithWaitInterval(time.Millisecond)}
	if rec != nil {
		opts = append(opts, ledgerapi.WithReconciler(rec))
	}
	client, err := ledgerapi.NewClient(srv.URL, token, srv.Client(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]oncer{"in process": ledgerapi.InProcess(inProcess), "over HTTP": client}
}

// A Wait is measured on the injected clock: an hour of waiting on a clock
// that runs a minute per reading ends after a few dozen polls, not an hour.
func TestOnceWaitsByTheInjectedClock(t *testing.T) {
	base := newClock()
	ticking := func() time.Time { base.Advance(time.Minute); return base.Now() }
	for name, l := range loopPaths(t, ticking, nil) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			key := ledger.Key{Scope: "s", Intent: "send", Payload: 1}
			if c, err := l.Claim(ctx, ledger.ClaimRequest{Key: key, PendingTTL: 48 * time.Hour}); err != nil || !c.Acquired() {
				t.Fatalf("first claim: %+v, %v", c, err)
			}
			res, err := l.Once(ctx, key, func(context.Context, ledger.Call) (any, error) { return nil, nil }, ledger.OnceOptions{Wait: time.Hour})
			if err != nil {
				t.Fatalf("Once with an hour's Wait on a fast clock: %v (it waited by the wall clock)", err)
			}
			if res.Status != ledger.StatusInFlight {
				t.Fatalf("Once: %+v, want in_flight once the wait ran out", res)
			}
		})
	}
}

// An ambiguous effect is put to the reconciler on both paths: "not
// applied" lets the effect run again, "committed" is recorded and
// replayed.
func TestOnceAsksTheReconcilerOnBothPaths(t *testing.T) {
	var asked atomic.Int64
	rec := func(_ context.Context, e ledger.Entry) (ledger.Outcome, error) {
		asked.Add(1)
		if e.Intent == "refund" {
			return ledger.OutcomeNotApplied, nil
		}
		return ledger.OutcomeCommitted, nil
	}
	for name, l := range loopPaths(t, nil, rec) {
		t.Run(name, func(t *testing.T) {
			asked.Store(0)
			ctx := context.Background()
			lost := func(context.Context, ledger.Call) (any, error) { return nil, errors.New("connection reset") }
			var ran atomic.Int64
			works := func(context.Context, ledger.Call) (any, error) { ran.Add(1); return "done", nil }

			refund := ledger.Key{Scope: "s", Intent: "refund", Payload: 1}
			if res, err := l.Once(ctx, refund, lost); err != nil || res.Status != ledger.StatusAmbiguous {
				t.Fatalf("first refund: %+v, %v; want ambiguous", res, err)
			}
			res, err := l.Once(ctx, refund, works)
			if err != nil || res.Status != ledger.StatusExecuted || ran.Load() != 1 || asked.Load() != 1 {
				t.Fatalf("refund after the reconciler said not applied: %+v, %v, ran %d, asked %d; want executed once",
					res, err, ran.Load(), asked.Load())
			}
			if res.Entry.Attempt != 2 {
				t.Errorf("the refund ran as attempt %d, want 2", res.Entry.Attempt)
			}

			email := ledger.Key{Scope: "s", Intent: "email", Payload: 1}
			if res, err := l.Once(ctx, email, lost); err != nil || res.Status != ledger.StatusAmbiguous {
				t.Fatalf("first email: %+v, %v; want ambiguous", res, err)
			}
			res, err = l.Once(ctx, email, works)
			if err != nil || res.Status != ledger.StatusReplayed || ran.Load() != 1 {
				t.Fatalf("email after the reconciler said committed: %+v, %v, ran %d; want replayed, not run", res, err, ran.Load())
			}
			hist, err := l.History(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range hist {
				if e.Intent == "email" && (e.State != ledger.StateCommitted || e.ResolvedBy != "reconciler") {
					t.Errorf("email entry %s resolved by %q; want committed by the reconciler", e.State, e.ResolvedBy)
				}
			}
		})
	}
}

// A reconciler's resolve names the attempt and is refused once the entry
// moved on; a wrong "by" changes nothing.
func TestReconcilerResolveOverHTTPIsFencedOnTheAttempt(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	key := ledger.Key{Scope: "s", Intent: "refund", Payload: 1}
	res, err := e.client.Once(ctx, key, func(context.Context, ledger.Call) (any, error) { return nil, errors.New("reset") })
	if err != nil || res.Status != ledger.StatusAmbiguous {
		t.Fatal(res, err)
	}
	id := res.Entry.ID
	for _, body := range []string{
		`{"scope":"s","entry_id":"` + id + `","outcome":"committed","by":"robot"}`,
		`{"scope":"s","entry_id":"` + id + `","outcome":"committed","by":"reconciler"}`,
		`{"scope":"s","entry_id":"` + id + `","outcome":"committed","attempt":1}`,
	} {
		if status, out := e.call(t, "POST", "/v1/entries/resolve", "Bearer "+token, body); status != 400 || errorCode(out) != ledgerapi.CodeInvalidRequest {
			t.Errorf("%s: %d %v, want 400 invalid_request", body, status, out)
		}
	}
	if _, err := e.client.Reconciled(ctx, ledger.ClaimRef{Scope: "s", EntryID: id, Attempt: 2}, ledger.OutcomeCommitted); !errors.Is(err, ledger.ErrNotAmbiguous) {
		t.Errorf("reconciling an attempt that was never the latest: %v, want not_ambiguous", err)
	}
	got, err := e.client.Reconciled(ctx, ledger.ClaimRef{Scope: "s", EntryID: id, Attempt: 1}, ledger.OutcomeNotApplied)
	if err != nil || got.State != ledger.StateFailed || got.ResolvedBy != "reconciler" {
		t.Fatalf("reconcile attempt 1: %+v, %v", got, err)
	}
}
