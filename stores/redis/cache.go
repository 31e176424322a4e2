package redis

import (
	"container/list"
	"sync"
)

// docCache remembers, per scope, the last version token and document this
// process saw, so an uncontended Transact can decide locally and send a
// single compare-and-set. It is only ever a guess: every write it leads to
// is checked by the script, and every read-only outcome drawn from it is
// checked by a fresh read. It is bounded (least recently used goes first)
// so a gateway seeing millions of one-off scopes does not grow without end.
type docCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recently used; values are *cached
	byKey map[string]*list.Element
}

type cached struct {
	scope string
	token string
	doc   []byte // never modified after insertion
}

func newDocCache(max int) *docCache {
	return &docCache{max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

// get returns the remembered token and document. The document is shared:
// callers must not modify it.
func (c *docCache) get(scope string) (token string, doc []byte, ok bool) {
	if c.max <= 0 {
		return "", nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[scope]
	if !ok {
		return "", nil, false
	}
	c.order.MoveToFront(el)
	e := el.Value.(*cached)
	return e.token, e.doc, true
}

// put remembers doc, which the cache then owns: callers pass a copy.
func (c *docCache) put(scope, token string, doc []byte) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[scope]; ok {
		e := el.Value.(*cached)
		e.token, e.doc = token, doc
		c.order.MoveToFront(el)
		return
	}
	c.byKey[scope] = c.order.PushFront(&cached{scope: scope, token: token, doc: doc})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cached).scope)
	}
}

func (c *docCache) drop(scope string) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[scope]; ok {
		c.order.Remove(el)
		delete(c.byKey, scope)
	}
}
