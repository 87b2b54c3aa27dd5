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
		if e.accounted != e.bytes || e.bytes != entryBytes(e.key)+messagesBytes(e.sys)+messagesBytes(e.recent) {
			sum = -1 << 62 // an entry's own count is off
		}
		e.mu.Unlock()
	}
	return c.size, sum, c.max
}

// TailCacheEntries reports how many conversations the tail cache holds.
func TailCacheEntries(m *Memory) int {
	m.tails.mu.Lock()
	defer m.tails.mu.Unlock()
	return len(m.tails.entries)
}

// AutoSummaryPercent is the share of the budget a summary following the
// budget may take.
const AutoSummaryPercent = autoSummaryPercent

// CPUTime is cpuTime, for the benchmarks of package chatmem_test.
var CPUTime = cpuTime

// ReceiptDictionary is the dictionary of stored receipts, for tests of
// the forms stored before.
func ReceiptDictionary() []byte { return receiptDict }
