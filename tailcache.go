package chatmem

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// DefaultTailCacheBytes is the default of Options.TailCacheBytes.
const DefaultTailCacheBytes = 32 << 20

// fillSlack is how much more than n (a query's tokens or turns) a cache
// entry is filled with: a quarter more, at least 1. The entry must reach
// past the query's selection for answer to tell where it starts (one
// message older, for tokens), and appends only move the selection
// forward, so a quarter is room enough for the turns that follow, asking
// as much; a refill reads it on a process's first turn, where every
// message read is one more decoded (twice the window made that turn 7 to
// 9 steady turns on Redis). When the message past the selection does not
// fit in the slack, answer fails and the query is read as asked.
func fillSlack(n int) int {
	if n <= 0 {
		return 0
	}
	return max(1, n/4)
}

// withSlack is q with fillSlack's room on each of its limits: the query
// that fills a cache entry able to answer q and the next turns'.
func withSlack(q TailQuery) TailQuery {
	return TailQuery{Tokens: q.Tokens + fillSlack(q.Tokens), Turns: q.Turns + fillSlack(q.Turns)}
}

// maxCatchUp bounds how many messages appended since a conversation's
// tail was cached are read to bring it up to date; further behind (another
// process wrote a lot), the tail is read anew, one bounded read as ever.
const maxCatchUp = 256

// tailCache keeps, per conversation, the newest messages its last window
// was assembled from, so that the next turn reads from the store only what
// was appended since, not the whole window again: per turn, the
// conversation's row and the turn's few messages, instead of the tail's
// three queries and every message of the window decoded again. (The new
// messages are read back rather than taken from Append, so that the cache
// holds what the store returns: its time precision, its empty values;
// except after an append conditional on the entry's last message, Turn's,
// when the append's result is all there is to read, and the messages it
// returns are the store's: see appended.)
//
// Stored messages change only by a rewind or a redaction (a recount
// records another tokenizer), and each moves the conversation's Revision
// on, so an entry is valid for as long as the conversation it was read
// from is at the same revision: it is tied to the conversation's
// CreatedAt, tokenizer and Revision, and checked against its LastSeq and
// token totals, which every append moves. Every read of the entry
// compares them with a Conversation the store returned on the turn's own
// path (Conversation, ConversationSince, or the append's result), so an
// entry a rewind or redaction in another process made stale is dropped at
// its next use, with no extra round trip. Memory.Rewind and Memory.Redact
// drop their own process's entry at once. The blind spot, as for the
// summary cache: a deleted and re-created conversation with the same
// CreatedAt, at least as many messages and the same totals.
//
// An entry holds the system messages and a run of the newest other
// messages long enough to answer the last query with room to spare (read
// with a quarter more than its tokens and turns, see fillSlack; kept up
// to twice as much as appends extend it): a query that needs more than
// the run holds reads the store, and the entry is refilled from that
// read. Entries are evicted least recently used first, to a bound on the
// bytes of their messages.
type tailCache struct {
	max int64 // bytes; 0: off

	mu      sync.Mutex
	size    int64
	lru     list.List // of *tailEntry, most recently used first
	entries map[Key]*list.Element
}

type tailEntry struct {
	key Key

	mu        sync.Mutex
	created   time.Time
	tokenizer string
	revision  int64 // the conversation's Revision the entry was read at
	lastSeq   int64
	// tokens and systemTokens are the conversation's totals at lastSeq.
	tokens, systemTokens int64
	sys                  []Message // the system messages (all of them if sysRead)
	sysRead              bool      // sys was read from the store, then extended
	recent               []Message // the newest non-system messages up to lastSeq
	complete             bool      // recent holds every non-system message
	want                 TailQuery // the last query answered, for trimming
	bytes                int64     // the size of sys and recent
	dropped              bool      // evicted or replaced: updates are moot

	// runTokens and runUsers are the tokens and the user messages of
	// recent, kept as it changes, so that trimming it each turn costs
	// what it drops, not a walk over the run.
	runTokens, runUsers int
	// shared counts the messages of sys and recent with tool calls or
	// metadata, which answer copies: with none, a window is one copy.
	shared int

	accounted int64         // bytes as the cache's size counts them; guarded by tailCache.mu
	el        *list.Element // the entry's place in the order of eviction; guarded by tailCache.mu
}

func (c *tailCache) init(maxBytes int64) {
	switch {
	case maxBytes == 0:
		maxBytes = DefaultTailCacheBytes
	case maxBytes < 0:
		maxBytes = 0
	}
	c.max = maxBytes
	c.entries = make(map[Key]*list.Element)
}

// get returns the conversation's entry, if it may serve conv: read from
// the same conversation, not ahead of it, and not too far behind.
func (c *tailCache) get(key Key, conv Conversation) *tailEntry {
	if c.max == 0 {
		return nil
	}
	c.mu.Lock()
	el, ok := c.entries[key]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	e := el.Value.(*tailEntry)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dropped || !e.created.Equal(conv.CreatedAt) || e.tokenizer != conv.Tokenizer || e.revision != conv.Revision ||
		e.lastSeq > conv.LastSeq || conv.LastSeq-e.lastSeq > maxCatchUp ||
		(e.lastSeq == conv.LastSeq && (e.tokens != conv.Tokens || e.systemTokens != conv.SystemTokens)) {
		return nil
	}
	return e
}

// peek returns the conversation's entry, the LastSeq it is up to date
// with, the Revision and the tokenizer of the conversation it was read
// from, if there is an entry. Unlike get, it checks the entry against
// nothing and leaves the order of eviction alone.
func (c *tailCache) peek(key Key) (_ *tailEntry, lastSeq, revision int64, tokenizer string, ok bool) {
	if c.max == 0 {
		return nil, 0, 0, "", false
	}
	c.mu.Lock()
	el, ok := c.entries[key]
	c.mu.Unlock()
	if !ok {
		return nil, 0, 0, "", false
	}
	e := el.Value.(*tailEntry)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dropped {
		return nil, 0, 0, "", false
	}
	return e, e.lastSeq, e.revision, e.tokenizer, true
}

// put replaces the conversation's entry with one holding a tail read from
// the store (sys: its system messages, msgs: a Tail read under q of
// conv). It returns the new entry.
func (c *tailCache) put(key Key, conv Conversation, sys, msgs []Message, want TailQuery) *tailEntry {
	if c.max == 0 {
		return nil
	}
	e := &tailEntry{
		key: key, created: conv.CreatedAt, tokenizer: conv.Tokenizer, revision: conv.Revision, lastSeq: conv.LastSeq,
		tokens: conv.Tokens, systemTokens: conv.SystemTokens, want: want,
		complete: len(msgs) > 0 && msgs[0].Seq == 1, sysRead: conv.SystemTokens > 0,
	}
	// The reads after conv may see messages appended since: then they do
	// not match conv's totals, and the entry would be wrong.
	var sysTokens int64
	for _, m := range sys {
		if m.Seq > conv.LastSeq {
			return nil
		}
		sysTokens += int64(m.Tokens)
		e.addSys(m.Clone()) // the caller returns sys too
	}
	if n := len(msgs); (n > 0 && msgs[n-1].Seq != conv.LastSeq) || (e.sysRead && sysTokens != conv.SystemTokens) {
		return nil
	}
	for _, m := range msgs {
		if m.Role != RoleSystem {
			e.addRecent(m)
		}
	}
	e.bytes = entryBytes(key) + messagesBytes(e.sys) + messagesBytes(e.recent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.remove(old)
	}
	e.el = c.lru.PushFront(e)
	c.entries[key] = e.el
	e.accounted = e.bytes
	c.size += e.accounted
	c.evict()
	return e
}

// appended extends e, the conversation's entry as peek returned it, with
// msgs, which an append conditional on the entry's last message (last)
// stored right after it, as the append's result conv describes the
// conversation: nothing can have come between them, so no read is
// needed. The entry is left as it is if it was dropped, moved on or does
// not match conv (extend checks the conversation and the totals). msgs
// are copied.
func (c *tailCache) appended(e *tailEntry, last int64, conv Conversation, msgs []Message) {
	if e == nil {
		return
	}
	e.mu.Lock()
	grew := e.lastSeq == last && e.extend(conv, msgs, true)
	e.mu.Unlock()
	if grew {
		c.resize(e)
	}
}

// drop forgets the conversation's entry.
func (c *tailCache) drop(key Key) {
	if c.max == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
}

// remove unlinks an entry; c.mu is held.
func (c *tailCache) remove(el *list.Element) {
	e := el.Value.(*tailEntry)
	c.lru.Remove(el)
	delete(c.entries, e.key)
	e.mu.Lock()
	e.dropped = true
	e.mu.Unlock()
	c.size -= e.accounted
}

// evict removes least recently used entries until the cache is within its
// bound; c.mu is held.
func (c *tailCache) evict() {
	for c.size > c.max && c.lru.Len() > 0 {
		c.remove(c.lru.Back())
	}
}

// resize takes on an entry's size after it grew or shrank, and moves it
// to the front of the order of eviction.
func (c *tailCache) resize(e *tailEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.mu.Lock()
	bytes, dropped := e.bytes, e.dropped
	e.mu.Unlock()
	if !dropped {
		c.lru.MoveToFront(e.el)
		c.size += bytes - e.accounted
		e.accounted = bytes
		c.evict()
	}
}

// extend appends msgs, the messages after e.lastSeq up to conv.LastSeq as
// the store returned them, and takes on conv's totals; false if msgs do
// not follow on from the entry or the totals do not add up (the entry is then stale).
// With clone, the entry keeps copies of msgs (an append's result, which
// its caller owns), in UTC and without the monotonic clock reading an
// append's own time.Now carries, as a read gives them. e.mu is held.
func (e *tailEntry) extend(conv Conversation, msgs []Message, clone bool) bool {
	if e.dropped || !e.created.Equal(conv.CreatedAt) || e.tokenizer != conv.Tokenizer || e.revision != conv.Revision {
		return false
	}
	tokens, sys := e.tokens, e.systemTokens
	for i, m := range msgs {
		if m.Seq != e.lastSeq+int64(i)+1 {
			return false
		}
		if m.Role == RoleSystem {
			sys += int64(m.Tokens)
		} else {
			tokens += int64(m.Tokens)
		}
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Seq != conv.LastSeq || tokens != conv.Tokens || sys != conv.SystemTokens {
		return false
	}
	for _, m := range msgs {
		if clone {
			m = m.Clone()
			m.CreatedAt = m.CreatedAt.UTC()
		}
		if m.Role == RoleSystem {
			e.addSys(m)
		} else {
			e.addRecent(m)
		}
		e.bytes += messageBytes(m)
	}
	e.lastSeq, e.tokens, e.systemTokens = conv.LastSeq, conv.Tokens, conv.SystemTokens
	e.trim()
	return true
}

// answer returns what Memory.tail returns for q: the system messages, then
// the newest non-system messages that Store.Tail would select, as copies
// (sharing their tool calls and metadata with the entry if shared);
// false if the entry's run is too short to tell where that selection
// starts. e.mu is held.
func (e *tailEntry) answer(q TailQuery, shared bool) ([]Message, bool) {
	start := 0
	if q.Tokens <= 0 && q.Turns <= 0 {
		start = len(e.recent) // as Store.Tail: nothing
	}
	if q.Tokens > 0 {
		sum, i := 0, len(e.recent)
		for i > 0 && sum+e.recent[i-1].Tokens <= q.Tokens {
			i--
			sum += e.recent[i].Tokens
		}
		if i == 0 && !e.complete {
			return nil, false
		}
		start = i
	}
	if q.Turns > 0 {
		users, i := 0, len(e.recent)
		for i > 0 && users < q.Turns {
			i--
			if e.recent[i].Role == RoleUser {
				users++
			}
		}
		if users < q.Turns {
			if !e.complete {
				return nil, false
			}
			i = 0
		}
		start = max(start, i)
	}
	// As Memory.tail reads them: when the system messages count tokens.
	var sys []Message
	if e.systemTokens > 0 {
		if !e.sysRead {
			return nil, false
		}
		sys = e.sys
	}
	e.want = q
	out := make([]Message, 0, len(sys)+len(e.recent)-start)
	out = append(append(out, sys...), e.recent[start:]...)
	if !shared && e.shared > 0 {
		for i := range out {
			// Copies: only tool calls and metadata are shared by a plain copy.
			if hasShared(out[i]) {
				out[i] = out[i].Clone()
			}
		}
	}
	return out, true
}

// trim drops the oldest messages of the run that the last query, asked
// again, would not need: it keeps twice its tokens and turns. e.mu is
// held.
func (e *tailEntry) trim() {
	if e.want.Tokens <= 0 && e.want.Turns <= 0 {
		return
	}
	sum, users := e.runTokens, e.runUsers
	n := 0
	for n < len(e.recent) {
		m := e.recent[n]
		rest, restUsers := sum-m.Tokens, users
		if m.Role == RoleUser {
			restUsers--
		}
		if (e.want.Tokens > 0 && rest < 2*e.want.Tokens) || (e.want.Turns > 0 && restUsers < 2*e.want.Turns) {
			break
		}
		sum, users = rest, restUsers
		e.bytes -= messageBytes(m)
		if hasShared(m) {
			e.shared--
		}
		n++
	}
	e.runTokens, e.runUsers = sum, users
	if n > 0 {
		clear(e.recent[:n]) // let go of their contents; append reallocates in time
		e.recent = e.recent[n:]
		e.complete = false
	}
}

// addRecent appends m, a non-system message, to the run. e.mu is held (or
// e is not shared yet).
func (e *tailEntry) addRecent(m Message) {
	e.recent = append(e.recent, m)
	e.runTokens += m.Tokens
	if m.Role == RoleUser {
		e.runUsers++
	}
	if hasShared(m) {
		e.shared++
	}
}

// addSys appends m, a system message, to the entry's. e.mu is held (or
// e is not shared yet).
func (e *tailEntry) addSys(m Message) {
	e.sys = append(e.sys, m)
	if hasShared(m) {
		e.shared++
	}
}

// hasShared reports whether m holds what a plain copy of it shares: tool
// calls or metadata.
func hasShared(m Message) bool { return m.ToolCalls != nil || m.Metadata != nil }

// entryBytes approximates the memory of an entry without messages, so
// that empty entries count too.
func entryBytes(key Key) int64 { return int64(256 + len(key.Tenant) + len(key.ID)) }

// messageBytes approximates the memory a message holds.
func messageBytes(m Message) int64 {
	n := 256 + len(m.Content) + len(m.Name) + len(m.ToolCallID) // with the run's spare capacity
	for _, c := range m.ToolCalls {
		n += 64 + len(c.ID) + len(c.Type) + len(c.Function.Name) + len(c.Function.Arguments)
	}
	if m.Metadata != nil {
		n += 256 // the map itself
	}
	for k, v := range m.Metadata {
		n += 32 + len(k) + len(v)
	}
	return int64(n)
}

func messagesBytes(msgs []Message) int64 {
	var n int64
	for _, m := range msgs {
		n += messageBytes(m)
	}
	return n
}

// sinceRead holds the messages a SinceReader returned with the
// conversation's metadata: those after seq after, if read.
type sinceRead struct {
	read  bool
	after int64
	msgs  []Message
}

// conversation reads the conversation's metadata for Context. When the
// store is a SinceReader and the tail cache has an entry for the
// conversation, the messages appended since the entry was brought up to
// date come along in the same read (at most maxCatchUp: further behind,
// the entry is not used); withSince false leaves them out.
func (m *Memory) conversation(ctx context.Context, key Key, withSince bool) (Conversation, sinceRead, error) {
	if r := m.caps.since; r != nil && withSince {
		if _, after, _, _, ok := m.tails.peek(key); ok {
			conv, msgs, err := r.ConversationSince(ctx, key, after, maxCatchUp)
			return conv, sinceRead{read: err == nil, after: after, msgs: msgs}, err
		}
	}
	conv, err := m.store.Conversation(ctx, key)
	return conv, sinceRead{}, err
}

// cachedTail is Memory.tail for a budget or turns policy: from the
// conversation's cache entry, brought up to date with the messages since
// read with conv (since) or, failing that, one Range read; from the store,
// refilling the entry, when the entry is missing, stale or too short.
func (m *Memory) cachedTail(ctx context.Context, key Key, conv Conversation, since sinceRead, q TailQuery, shared bool, hit *bool) ([]Message, error) {
	if e := m.tails.get(key, conv); e != nil {
		e.mu.Lock()
		from := e.lastSeq
		e.mu.Unlock()
		var news []Message
		switch {
		case conv.LastSeq <= from:
		case since.read && since.after == from:
			news = since.msgs // read with conv: up to conv.LastSeq, as get checked
		default:
			var err error
			if news, err = m.store.Range(ctx, key, from, int(conv.LastSeq-from)); err != nil {
				return nil, err
			}
		}
		e.mu.Lock()
		ok := true
		if e.lastSeq == from && len(news) > 0 {
			ok = e.extend(conv, news, false)
		} else if e.lastSeq != conv.LastSeq {
			ok = false // moved on meanwhile (past conv): read anew
		}
		var out []Message
		if ok {
			out, ok = e.answer(q, shared)
		}
		e.mu.Unlock()
		if len(news) > 0 {
			m.tails.resize(e)
		}
		if ok {
			*hit = true
			return out, nil
		}
	}
	var sys []Message
	if conv.SystemTokens > 0 {
		var err error
		if sys, err = m.store.System(ctx, key); err != nil {
			return nil, err
		}
	}
	if m.tails.max == 0 {
		recent, err := m.store.Tail(ctx, key, q)
		if err != nil {
			return nil, err
		}
		return mergePinned(sys, recent), nil
	}
	// Read a little more than is asked (see fillSlack), so that this
	// answer and the next turns', asking as much, find the start of their
	// selection inside the entry.
	msgs, err := m.store.Tail(ctx, key, withSlack(q))
	if err != nil {
		return nil, err
	}
	if e := m.tails.put(key, conv, sys, msgs, q); e != nil {
		e.mu.Lock()
		out, ok := e.answer(q, shared)
		e.trim()
		e.mu.Unlock()
		m.tails.resize(e)
		if ok {
			return out, nil
		}
	}
	recent, err := m.store.Tail(ctx, key, q)
	if err != nil {
		return nil, err
	}
	return mergePinned(sys, recent), nil
}

// tail reads the pinned system messages and the newest messages the policy
// can use, with the stored counts.
func (m *Memory) tail(ctx context.Context, key Key, conv Conversation, since sinceRead, p Policy, shared bool, hit *bool) ([]Message, error) {
	if p.Kind == PolicyAll {
		return m.store.Range(ctx, key, 0, 0)
	}
	q := p.tailQuery(conv.SystemTokens, conv.Tokens)
	if p.Budget > 0 && q.Tokens == 0 {
		if conv.SystemTokens == 0 {
			return nil, nil
		}
		return m.store.System(ctx, key) // Apply reports the budget as too small
	}
	return m.cachedTail(ctx, key, conv, since, q, shared, hit)
}

// recountedTail reads ever larger tails (doubling) until the recounted
// messages exceed what the policy can use or the history is exhausted.
func (m *Memory) recountedTail(ctx context.Context, key Key, conv Conversation, p Policy, c Counter) ([]Message, error) {
	if p.Kind == PolicyAll || p.Budget == 0 {
		msgs, err := m.store.Range(ctx, key, 0, 0)
		if err != nil {
			return nil, err
		}
		return msgs, recountAll(ctx, c, msgs)
	}
	sys, err := m.store.System(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := recountAll(ctx, c, sys); err != nil {
		return nil, err
	}
	for guess := max(p.Budget, 256); ; guess *= 2 {
		recent, err := m.store.Tail(ctx, key, TailQuery{Tokens: guess, Turns: p.Turns})
		if err != nil {
			return nil, err
		}
		if err := recountAll(ctx, c, recent); err != nil {
			return nil, err
		}
		total := 0
		for _, msg := range recent {
			if msg.Role != RoleSystem {
				total += msg.Tokens
			}
		}
		exhausted := len(recent) == 0 || recent[0].Seq == 1 || int64(guess) >= conv.Tokens
		if total > p.Budget || exhausted {
			return mergePinned(sys, recent), nil
		}
	}
}

func recountAll(ctx context.Context, c Counter, msgs []Message) error {
	for i := range msgs {
		n, err := c.Count(ctx, msgs[i])
		if err != nil {
			return fmt.Errorf("count message %d: %w", msgs[i].Seq, err)
		}
		msgs[i].Tokens = n
	}
	return nil
}

// mergePinned returns the system messages followed by recent without the
// system messages it holds (they are in sys already).
func mergePinned(sys, recent []Message) []Message {
	out := make([]Message, 0, len(sys)+len(recent))
	out = append(out, sys...)
	for _, m := range recent {
		if m.Role != RoleSystem {
			out = append(out, m)
		}
	}
	return out
}

// CachedTail returns, from this process's tail cache and without any I/O,
// the non-system messages among the conversation's newest n (those after
// Seq lastSeq-n), oldest first, and lastSeq and revision, the
// conversation's LastSeq and Revision as the cache last saw it. ok is false when the cache holds no entry for
// the conversation, or its entry does not reach back that far. The
// messages are the cache's own: read them, do not modify them.
//
// The cache may be behind the store (another process appended since, or
// rewound and appended back to the same LastSeq): an answer is only as
// good as an append conditional on lastSeq and revision
// (AppendOptions.ExpectedLastSeq and ExpectedRevision), which fails with
// ErrConflict if the conversation moved on or was rewritten, as Turn's
// own append from the cache does. Turn with those conditions is then one
// store write, and its window comes from the cache.
func (m *Memory) CachedTail(key Key, n int) (msgs []Message, lastSeq, revision int64, ok bool) {
	if m.tails.max == 0 || n < 0 {
		return nil, 0, 0, false
	}
	m.tails.mu.Lock()
	el, found := m.tails.entries[key]
	m.tails.mu.Unlock()
	if !found {
		return nil, 0, 0, false
	}
	e := el.Value.(*tailEntry)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dropped || e.lastSeq <= 0 {
		return nil, 0, 0, false
	}
	after := max(e.lastSeq-int64(n), 0)
	i := len(e.recent)
	for i > 0 && e.recent[i-1].Seq > after {
		i--
	}
	// The run must reach back past after: else a message trimmed from it
	// may be among the newest n.
	if i == 0 && !e.complete && (len(e.recent) == 0 || e.recent[0].Seq > after+1) {
		return nil, 0, 0, false
	}
	return slices.Clone(e.recent[i:]), e.lastSeq, e.revision, true
}
