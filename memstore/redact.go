package memstore

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.Redactor = (*Store)(nil)

// Redact writes r over one message with what was derived from it, under
// the write lock; see chatmem.Redactor. The new content goes into the
// message log's chunks like an appended one; the chunk of the old one is
// copied without it (see messageLog.replace). Its cost is that of the running totals after r.Seq, the posting
// lists of the message's terms and the conversation's facts.
func (s *Store) Redact(ctx context.Context, key chatmem.Key, r chatmem.Redaction) (chatmem.Conversation, chatmem.Message, error) {
	if err := ctx.Err(); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	if err := storekit.CheckRedact(key, r); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	c, err := s.getForWrite(ctx, key)
	if err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	defer s.mu.Unlock()
	if err := storekit.RedactConflict(key, c.meta.LastSeq, c.meta.Revision, r); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	i := int(r.Seq) - 1
	old := c.msgs.view(i)
	oldTerms := chatmem.IndexTerms(old)
	m := r.Apply(c.msgs.at(i))
	c.msgs.replace(i, m)

	delta := int64(r.Tokens - old.Tokens)
	if m.Role == chatmem.RoleSystem {
		c.meta.SystemTokens += delta
	} else {
		for j := i + 1; j < len(c.cum); j++ {
			c.cum[j] += delta
		}
		c.meta.Tokens += delta
	}
	c.meta.Revision++
	c.meta.UpdatedAt = time.Now()

	newTerms := chatmem.IndexTerms(m)
	c.index.mu.Lock()
	if c.index.indexed > i {
		for _, t := range oldTerms {
			if list := removeSeq(c.index.postings[t], r.Seq); len(list) == 0 {
				delete(c.index.postings, t)
			} else {
				c.index.postings[t] = list
			}
		}
		for _, t := range newTerms {
			list := c.index.postings[t]
			if j, found := slices.BinarySearch(list, r.Seq); !found {
				c.index.postings[t] = slices.Insert(list, j, r.Seq)
			}
		}
	}
	c.index.mu.Unlock()
	for k, a := range c.idem {
		if a.first <= r.Seq && r.Seq < a.first+int64(a.count) {
			a.fingerprint = ""
			c.idem[k] = a
		}
	}
	if c.summary.CoversSeq >= r.Seq {
		c.summary = chatmem.Summary{}
	}
	pruneFacts(c.facts, func(f chatmem.Fact) bool { return f.SourceSeq == r.Seq })
	for _, v := range c.vectors {
		delete(v, r.Seq)
	}
	if c.meta.User != "" {
		tn := s.tenants[key.Tenant]
		if u := tn.users[c.meta.User]; u != nil {
			u.unindexMessage(key.ID, r.Seq, oldTerms)
			pruneFacts(u.facts, func(f chatmem.Fact) bool { return f.Conversation == key.ID && f.SourceSeq == r.Seq })
		}
		tn.indexForUser(c.meta.User, key.ID, []chatmem.Message{m}, [][]string{newTerms})
	}
	return c.meta, m, nil
}

// removeSeq returns the ascending list without seq.
func removeSeq(list []int64, seq int64) []int64 {
	if j, found := slices.BinarySearch(list, seq); found {
		return slices.Delete(list, j, j+1)
	}
	return list
}

// replace writes m over message i, keeping its place: the content goes
// into the chunks as a new one, the tokens and the tool calls change. The
// chunk that held the old content is replaced by a copy without it, so
// that the log no longer holds the old bytes (messages returned before
// keep the old chunk alive, unchanged, for as long as they are held).
func (l *messageLog) replace(i int, m chatmem.Message) {
	if old := l.loc[i]; old.n > 0 {
		c := l.chunks[old.chunk]
		fresh := make([]byte, len(c), cap(c))
		copy(fresh, c)
		clear(fresh[old.off : old.off+old.n])
		l.chunks[old.chunk] = fresh
	}
	l.loc[i] = l.addText(m.Content)
	l.tokens[i] = int64(m.Tokens)
	// The redacted message carries chatmem.MetaRedacted: it has extra
	// fields now if it had none.
	x := &extraFields{name: m.Name, toolCallID: m.ToolCallID, toolCalls: slices.Clone(m.ToolCalls), metadata: maps.Clone(m.Metadata)}
	if old := l.extras[i]; old != nil {
		x.role = old.role
	}
	if l.extras == nil {
		l.extras = make(map[int]*extraFields)
	}
	l.extras[i] = x
	l.roles[i] |= hasExtra
}

// unindexMessage drops message seq of conversation conv, indexed under
// terms, from u's index. The caller holds the write lock.
func (u *userRecord) unindexMessage(conv string, seq int64, terms []string) {
	for _, t := range terms {
		list := slices.DeleteFunc(u.index.postings[t], func(e userEntry) bool { return e.conv == conv && e.seq == seq })
		if len(list) == 0 {
			delete(u.index.postings, t)
		} else {
			u.index.postings[t] = list
		}
	}
}
