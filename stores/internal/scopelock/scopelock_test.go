package scopelock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Goroutines of one scope never hold its lock together; those of other
// scopes do not wait for them; and nothing is left in the table after.
func TestOneHolderPerScope(t *testing.T) {
	tab := New()
	ctx := context.Background()
	var inside [4]atomic.Int32
	var overlap atomic.Bool
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			scope := g % len(inside)
			for range 50 {
				unlock, err := tab.Lock(ctx, fmt.Sprint("scope-", scope))
				if err != nil {
					t.Error(err)
					return
				}
				if inside[scope].Add(1) != 1 {
					overlap.Store(true)
				}
				time.Sleep(10 * time.Microsecond)
				inside[scope].Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	if overlap.Load() {
		t.Fatal("two goroutines held one scope's lock at once")
	}
	if n := tab.held(); n != 0 {
		t.Fatalf("%d scopes still in the table with nobody holding or waiting", n)
	}

	unlock, err := tab.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		other, err := tab.Lock(ctx, "b")
		if err == nil {
			other()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lock on scope b waited for the holder of scope a")
	}
	unlock()
}

// A waiter whose context ends gives up with its error, holds nothing, and
// the holder's release still frees the scope for the next.
func TestWaitEndsWithContext(t *testing.T) {
	tab := New()
	unlock, err := tab.Lock(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tab.Lock(ctx, "s")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with a cancelled context: %v, want context.Canceled", err)
	}
	unlock()
	again, err := tab.Lock(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	again()
	if n := tab.held(); n != 0 {
		t.Fatalf("%d scopes left in the table", n)
	}
}

// held counts the scopes with a holder or a waiter.
func (t *Table) held() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.locks)
		sh.mu.Unlock()
	}
	return n
}
