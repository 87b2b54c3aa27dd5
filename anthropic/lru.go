package anthropic

import (
	"container/list"
	"sync"
)

// lru is a fixed-capacity least-recently-used map from a SHA-256 digest to a
// token count. It is safe for concurrent use. A capacity below 1 disables it:
// get always misses and put does nothing.
type lru struct {
	mu    sync.Mutex
	cap   int
	order *list.List // front is the most recently used; values are *lruEntry
	items map[[32]byte]*list.Element
}

type lruEntry struct {
	key [32]byte
	val int
}

func newLRU(capacity int) *lru {
	return &lru{cap: capacity, order: list.New(), items: make(map[[32]byte]*list.Element)}
}

func (c *lru) get(key [32]byte) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return 0, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry).val, true
}

func (c *lru) put(key [32]byte, val int) {
	if c.cap < 1 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value.(*lruEntry).val = val
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, val: val})
	if c.order.Len() > c.cap {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry).key)
	}
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
