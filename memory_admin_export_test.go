package chatmem

// CachedOf reports what m keeps of the conversation between turns: an
// entry in the tail cache, and one in the summary cache.
func CachedOf(m *Memory, key Key) (tail, summary bool) {
	_, _, _, _, tail = m.tails.peek(key)
	_, summary = m.summaries.Get(key)
	return tail, summary
}
