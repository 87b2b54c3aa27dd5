package chatmem

// TailCacheSize reports the tail cache's accounted size, the sum of its
// entries' sizes and its bound, for tests of the accounting.
func TailCacheSize(m *Memory) (size, sum, bound int64) {
	c := &m.tails
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*tailEntry)
		e.mu.Lock()
		sum += e.accounted
		if e.accounted != e.bytes || e.bytes != messagesBytes(e.sys)+messagesBytes(e.recent) {
			sum = -1 << 62 // an entry's own count is off
		}
		e.mu.Unlock()
	}
	return c.size, sum, c.max
}
