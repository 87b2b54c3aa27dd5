// Package bounded is a map bounded in entries and bytes that starts over
// when it is full: the cache of shortcuts, each good for a few seconds or
// until something changes, that Memory keeps per conversation (summaries,
// fact values, token counts, summary budgets and estimates). Forgetting
// every entry at once costs each a read or a count again, and needs no
// bookkeeping per entry, so a hit or a put allocates nothing but the map.
package bounded

import "sync"

// Map is a map from K to V, safe for concurrent use, that holds at most
// MaxEntries entries and about MaxBytes bytes (as the sizes given to Put
// add up; they are not taken back when an entry is replaced or deleted):
// a Put that finds either bound reached empties the map first. A bound of
// 0 or less is no bound. Set the bounds before first use.
type Map[K comparable, V any] struct {
	MaxEntries int
	MaxBytes   int

	mu    sync.Mutex
	m     map[K]V
	bytes int
}

// Get returns the value of k, if there is one.
func (c *Map[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Put sets the value of k, counting size bytes for it.
func (c *Map[K, V]) Put(k K, v V, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(k, v, size)
}

// Update calls f with the value of k (ok false if none) and, if f reports
// store, sets k to the value it returns, counting size bytes, as one step:
// no other call on c comes in between. It reports store.
func (c *Map[K, V]) Update(k K, size int, f func(v V, ok bool) (_ V, store bool)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.m[k]
	v, store := f(old, ok)
	if store {
		c.put(k, v, size)
	}
	return store
}

func (c *Map[K, V]) put(k K, v V, size int) {
	if c.m == nil || (c.MaxEntries > 0 && len(c.m) >= c.MaxEntries) || (c.MaxBytes > 0 && c.bytes >= c.MaxBytes) {
		c.m, c.bytes = make(map[K]V), 0
	}
	c.m[k] = v
	c.bytes += size
}

// Delete drops the value of k.
func (c *Map[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// Clear drops every value.
func (c *Map[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.bytes = nil, 0
}

// Len returns how many values c holds.
func (c *Map[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
