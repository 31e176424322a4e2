package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores"
)

// Opening the store at start: the first retry waits DefaultStoreRetry,
// each later one twice as long, up to maxStoreRetry; each attempt may take
// storeAttemptTimeout.
const (
	DefaultStoreRetry   = time.Second
	maxStoreRetry       = 30 * time.Second
	storeAttemptTimeout = 10 * time.Second
)

// errStoreNotOpen is what every store call answers until the store has
// opened: the gateway answers 503, and /readyz too.
var errStoreNotOpen = errors.New("the store has not opened yet")

// openStoreRetrying opens the configured store. When it cannot be reached
// (a database still starting, a network not yet up), serve must not exit:
// an orchestrator would crash-loop it. It returns a stand-in that fails
// every call (webhooks and /readyz answer 503) while a goroutine keeps
// trying, with backoff, logging each failure, until the store opens or
// close is called. A URL that cannot be parsed never gets here: the
// configuration's validation refuses it, for check and serve alike.
func (a *App) openStoreRetrying(ctx context.Context, c config.Store, log *zap.Logger) (ledger.Store, func(), error) {
	open := func(ctx context.Context) (ledger.Store, func(), error) {
		actx, cancel := context.WithTimeout(ctx, storeAttemptTimeout)
		defer cancel()
		return a.openStore(actx, c, log)
	}
	store, closeStore, err := open(ctx)
	if err == nil {
		return store, closeStore, nil
	}
	if errors.Is(err, stores.ErrInUse) {
		return nil, nil, fmt.Errorf("%w; stop the other gateway first, or use postgres or redis to run several instances", err)
	}
	w := &waitingStore{}
	w.setErr(err)
	delay := a.StoreRetry
	if delay <= 0 {
		delay = DefaultStoreRetry
	}
	log.Error("store unreachable at start; serving 503 and retrying", zap.String("store", c.Kind), zap.Int("attempt", 1),
		zap.Duration("retry_in", delay), zap.Error(err))
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var closeInner func()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for attempt := 2; ; attempt++ {
			t := time.NewTimer(delay)
			select {
			case <-rctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			s, cl, err := open(rctx)
			if err == nil {
				closeInner = cl
				w.set(s)
				log.Info("store open", zap.String("store", c.Kind), zap.Int("attempts", attempt))
				return
			}
			if rctx.Err() != nil {
				return
			}
			w.setErr(err)
			delay = min(2*delay, maxStoreRetry)
			log.Error("store unreachable at start; serving 503 and retrying", zap.String("store", c.Kind), zap.Int("attempt", attempt),
				zap.Duration("retry_in", delay), zap.Error(err))
		}
	}()
	return w, func() {
		stop()
		wg.Wait()
		if closeInner != nil {
			closeInner()
		}
	}, nil
}

// waitingStore stands in for a store that has not opened yet and becomes
// it once it has.
type waitingStore struct {
	store   atomic.Pointer[storeBox]
	lastErr atomic.Pointer[error]
}

type storeBox struct{ ledger.Store }

var _ ledger.Store = (*waitingStore)(nil)

func (w *waitingStore) set(s ledger.Store) { w.store.Store(&storeBox{s}) }
func (w *waitingStore) setErr(err error)   { w.lastErr.Store(&err) }

func (w *waitingStore) get() (ledger.Store, error) {
	if b := w.store.Load(); b != nil {
		return b.Store, nil
	}
	return nil, fmt.Errorf("%w: %w", errStoreNotOpen, *w.lastErr.Load())
}

// ChecksAbsent forwards ledger.AbsenceChecker once the store is open.
func (w *waitingStore) ChecksAbsent() bool {
	s, err := w.get()
	return err == nil && ledger.ChecksAbsent(s)
}

func (w *waitingStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	s, err := w.get()
	if err != nil {
		return err
	}
	return s.Transact(ctx, scope, fn)
}

func (w *waitingStore) Read(ctx context.Context, scope string) ([]byte, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.Read(ctx, scope)
}

func (w *waitingStore) ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.ScopesToReview(ctx, notAfter, limit)
}

func (w *waitingStore) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.ScopesDue(ctx, notAfter, limit)
}

func (w *waitingStore) ScopesDueBetween(ctx context.Context, from, to time.Time, limit int) ([]string, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.ScopesDueBetween(ctx, from, to, limit)
}

func (w *waitingStore) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	s, err := w.get()
	if err != nil {
		return 0, err
	}
	return s.CountDue(ctx, notAfter)
}

func (w *waitingStore) ScopesReceived(ctx context.Context, before ledger.ScopeAt, limit int) ([]ledger.ScopeAt, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.ScopesReceived(ctx, before, limit)
}

func (w *waitingStore) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.ReadBlob(ctx, scope, name)
}

func (w *waitingStore) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.ReadBlobs(ctx, scope, names)
}

func (w *waitingStore) ReadControl(ctx context.Context, name string) ([]byte, error) {
	s, err := w.get()
	if err != nil {
		return nil, err
	}
	return s.ReadControl(ctx, name)
}

func (w *waitingStore) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	s, err := w.get()
	if err != nil {
		return err
	}
	return s.TransactControl(ctx, name, fn)
}
