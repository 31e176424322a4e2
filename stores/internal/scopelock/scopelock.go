package scopelock

import (
	"context"
	"hash/maphash"
	"sync"
)

// shardCount spreads the table over several mutexes so that goroutines
// working on different scopes rarely wait for each other here.
const shardCount = 32

// Table holds a lock per scope that some goroutine holds or waits for;
// a scope nobody asks for costs nothing. The zero Table is not ready: use
// New.
type Table struct {
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu    sync.Mutex
	locks map[string]*scopeLock
}

// scopeLock is a channel rather than a sync.Mutex so that waiting for it
// gives up when the caller's context does.
type scopeLock struct {
	ch   chan struct{}
	refs int // goroutines holding or waiting; the entry goes at zero
}

// New returns an empty table.
func New() *Table {
	t := &Table{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].locks = make(map[string]*scopeLock)
	}
	return t
}

// Lock waits until the caller is the only goroutine of the process holding
// scope's lock, or until ctx ends (then it returns ctx's error and holds
// nothing). The returned function releases the lock; call it once.
func (t *Table) Lock(ctx context.Context, scope string) (func(), error) {
	sh := &t.shards[maphash.String(t.seed, scope)%shardCount]
	sh.mu.Lock()
	l := sh.locks[scope]
	if l == nil {
		l = &scopeLock{ch: make(chan struct{}, 1)}
		sh.locks[scope] = l
	}
	l.refs++
	sh.mu.Unlock()

	forget := func() {
		sh.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(sh.locks, scope)
		}
		sh.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() {
			<-l.ch
			forget()
		}, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}
