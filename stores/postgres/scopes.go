package postgres

import (
	"container/list"
	"context"
	"hash/maphash"
	"sync"

	"github.com/replyonce/gateway/stores/internal/scopelock"
)

// shardCount spreads the cache over several mutexes so that goroutines
// working on different scopes rarely wait for each other here.
const shardCount = 32

// scopeTable is the store's in-process state per scope: a lock that
// serialises this process's Transacts on one scope (scopelock), and a
// bounded LRU cache of the version and document this process last saw for
// it.
//
// The lock is what keeps hot scopes cheap: goroutines of one process queue
// there instead of racing each other's compare-and-set in the database, and
// each one finds the cache already holding what the previous one wrote.
type scopeTable struct {
	locks    *scopelock.Table
	seed     maphash.Seed
	perShard int // cache entries per shard; 0 disables the cache
	shards   [shardCount]shard
}

type shard struct {
	mu    sync.Mutex
	lru   list.List // of *cacheEntry, most recently used first
	items map[string]*list.Element
}

type cacheEntry struct {
	scope   string
	version int64
	doc     []byte
}

func newScopeTable(cacheSize int) *scopeTable {
	t := &scopeTable{locks: scopelock.New(), seed: maphash.MakeSeed()}
	if cacheSize > 0 {
		t.perShard = (cacheSize + shardCount - 1) / shardCount
	}
	for i := range t.shards {
		t.shards[i].items = make(map[string]*list.Element)
	}
	return t
}

func (t *scopeTable) shard(scope string) *shard {
	return &t.shards[maphash.String(t.seed, scope)%shardCount]
}

// lock waits until this goroutine is the only one in the process working on
// scope, or until ctx ends. The returned function releases it.
func (t *scopeTable) lock(ctx context.Context, scope string) (func(), error) {
	return t.locks.Lock(ctx, scope)
}

// get returns the cached version and document of scope. ok is false when
// nothing is cached, which callers read as "probably absent".
func (t *scopeTable) get(scope string) (version int64, doc []byte, ok bool) {
	if t.perShard == 0 {
		return 0, nil, false
	}
	sh := t.shard(scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	el, ok := sh.items[scope]
	if !ok {
		return 0, nil, false
	}
	sh.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.version, e.doc, true
}

// put records what this process last saw or wrote for scope. doc is kept
// as given; callers pass a slice nobody else holds.
func (t *scopeTable) put(scope string, version int64, doc []byte) {
	if t.perShard == 0 {
		return
	}
	sh := t.shard(scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if el, ok := sh.items[scope]; ok {
		e := el.Value.(*cacheEntry)
		e.version, e.doc = version, doc
		sh.lru.MoveToFront(el)
		return
	}
	sh.items[scope] = sh.lru.PushFront(&cacheEntry{scope: scope, version: version, doc: doc})
	for sh.lru.Len() > t.perShard {
		oldest := sh.lru.Back()
		sh.lru.Remove(oldest)
		delete(sh.items, oldest.Value.(*cacheEntry).scope)
	}
}

// drop forgets scope, for when its row is absent or its state is unknown.
func (t *scopeTable) drop(scope string) {
	if t.perShard == 0 {
		return
	}
	sh := t.shard(scope)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if el, ok := sh.items[scope]; ok {
		sh.lru.Remove(el)
		delete(sh.items, scope)
	}
}
