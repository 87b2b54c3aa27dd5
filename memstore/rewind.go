package memstore

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.RevisionRewinder = (*Store)(nil)

// Rewind deletes the messages after toSeq with what was derived from them,
// under the write lock; see chatmem.Rewinder. The columns of the message
// log are cut, the bytes of the rewound contents stay in their chunks
// unreferenced (messages returned before share them, and they never
// change); the index, the user's index and the vectors lose the rewound
// messages' entries.
func (s *Store) Rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64) (chatmem.Conversation, error) {
	return s.rewind(ctx, key, toSeq, expectedLastSeq, nil)
}

// RewindRevision is Rewind that also checks the conversation's Revision;
// see chatmem.RevisionRewinder.
func (s *Store) RewindRevision(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq, expectedRevision int64) (chatmem.Conversation, error) {
	if err := storekit.CheckRewindRevision(expectedRevision); err != nil {
		return chatmem.Conversation{}, err
	}
	return s.rewind(ctx, key, toSeq, expectedLastSeq, &expectedRevision)
}

func (s *Store) rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64, expectedRevision *int64) (chatmem.Conversation, error) {
	if err := ctx.Err(); err != nil {
		return chatmem.Conversation{}, err
	}
	if err := storekit.CheckRewind(key, toSeq, expectedLastSeq); err != nil {
		return chatmem.Conversation{}, err
	}
	c, err := s.getForWrite(ctx, key)
	if err != nil {
		return chatmem.Conversation{}, err
	}
	defer s.mu.Unlock()
	if err := storekit.RewindConflict(key, c.meta.LastSeq, expectedLastSeq); err != nil {
		return chatmem.Conversation{}, err
	}
	if expectedRevision != nil && c.meta.Revision != *expectedRevision {
		return chatmem.Conversation{}, storekit.RevisionConflict(key, c.meta.Revision, *expectedRevision)
	}
	if toSeq == c.meta.LastSeq {
		return c.meta, nil
	}
	n := int(toSeq)
	for _, i := range c.system {
		if i >= n {
			c.meta.SystemTokens -= c.msgs.tokens[i]
		}
	}
	c.system = slices.DeleteFunc(c.system, func(i int) bool { return i >= n })
	c.msgs.truncate(n)
	c.cum, c.users = c.cum[:n+1], c.users[:n]
	c.meta.Tokens, c.meta.Turns = c.cum[n], 0
	if n > 0 {
		c.meta.Turns = c.users[n-1]
	}
	c.meta.LastSeq = toSeq
	c.meta.Revision++
	c.meta.UpdatedAt = time.Now()

	c.index.mu.Lock()
	if c.index.indexed > n {
		for t, list := range c.index.postings {
			if list = cutAfter(list, toSeq); len(list) == 0 {
				delete(c.index.postings, t)
			} else {
				c.index.postings[t] = list
			}
		}
		c.index.indexed = n
	}
	c.index.mu.Unlock()
	maps.DeleteFunc(c.idem, func(_ string, a applied) bool { return a.first+int64(a.count)-1 > toSeq })
	if c.summary.CoversSeq > toSeq {
		c.summary = chatmem.Summary{}
	}
	pruneFacts(c.facts, func(f chatmem.Fact) bool { return f.SourceSeq > toSeq })
	c.factSeq = min(c.factSeq, toSeq)
	maps.DeleteFunc(c.receipts, func(seq int64, _ []byte) bool { return seq > toSeq })
	for _, m := range c.vectors {
		maps.DeleteFunc(m, func(seq int64, _ []float32) bool { return seq > toSeq })
	}
	if c.meta.User != "" {
		if u := s.tenants[key.Tenant].users[c.meta.User]; u != nil {
			u.unindexAfter(key.ID, toSeq)
			pruneFacts(u.facts, func(f chatmem.Fact) bool { return f.Conversation == key.ID && f.SourceSeq > toSeq })
		}
	}
	return c.meta, nil
}

// pruneFacts deletes the values for which drop is true from the fact
// histories in m, and the keys left with none.
func pruneFacts(m map[string][]chatmem.Fact, drop func(chatmem.Fact) bool) {
	for name, h := range m {
		if h = slices.DeleteFunc(h, drop); len(h) == 0 {
			delete(m, name)
		} else {
			m[name] = h
		}
	}
}

// cutAfter returns the ascending list without its numbers above seq.
func cutAfter(list []int64, seq int64) []int64 {
	i, _ := slices.BinarySearch(list, seq+1)
	return list[:i]
}

// unindexAfter drops the entries of conversation conv's messages after seq
// from u's index. The caller holds the write lock.
func (u *userRecord) unindexAfter(conv string, seq int64) {
	for t := range u.index.terms[conv] {
		list := slices.DeleteFunc(u.index.postings[t], func(e userEntry) bool { return e.conv == conv && e.seq > seq })
		if len(list) == 0 {
			delete(u.index.postings, t)
		} else {
			u.index.postings[t] = list
		}
	}
}
