package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UserSearcher = (*Store)(nil)

// userIndex is a user's inverted index across their conversations: each
// term's entries ordered oldest first by (at, conv, seq), so the newest are
// at the end of the slice and a search reads them back from there. terms
// remembers which terms each conversation added, so dropping a
// conversation touches only its own terms' lists.
type userIndex struct {
	postings map[string][]userEntry
	terms    map[string]map[string]struct{} // conversation ID -> its terms
}

// userEntry is one indexed message of a user's conversation.
type userEntry struct {
	at   time.Time // the message's CreatedAt
	conv string
	seq  int64
}

// compareEntries orders entries oldest first (by at, then conversation ID,
// then seq), the reverse of the order UserPostings returns.
func compareEntries(a, b userEntry) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	if c := cmp.Compare(a.conv, b.conv); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// indexForUser adds the messages msgs of conversation conv, just appended,
// to the index of their user under terms[i] for msgs[i]. The caller holds
// the write lock; the conversation is bound to user. Messages mostly come
// newest, so each entry is inserted near the end of its list.
func (tn *tenant) indexForUser(user, conv string, msgs []chatmem.Message, terms [][]string) {
	u := tn.user(user)
	if u.index.postings == nil {
		u.index.postings = make(map[string][]userEntry)
		u.index.terms = make(map[string]map[string]struct{})
	}
	known := u.index.terms[conv]
	if known == nil {
		known = make(map[string]struct{})
		u.index.terms[conv] = known
	}
	for i, m := range msgs {
		e := userEntry{at: m.CreatedAt, conv: conv, seq: m.Seq}
		for _, t := range terms[i] {
			known[t] = struct{}{}
			list := u.index.postings[t]
			j, _ := slices.BinarySearchFunc(list, e, compareEntries)
			u.index.postings[t] = slices.Insert(list, j, e)
		}
	}
}

// unindexForUser drops conversation conv's entries from user u's index.
// The caller holds the write lock. Its cost is the length of the lists of
// conv's terms, which span all the user's conversations: fine for one
// conversation, quadratic for all of them, so DeleteUser drops the whole
// index first instead.
func (u *userRecord) unindexForUser(conv string) {
	for t := range u.index.terms[conv] {
		list := slices.DeleteFunc(u.index.postings[t], func(e userEntry) bool { return e.conv == conv })
		if len(list) == 0 {
			delete(u.index.postings, t)
		} else {
			u.index.postings[t] = list
		}
	}
	delete(u.index.terms, conv)
}

// UserPostings returns, for each term, the newest messages of the user's
// live conversations indexed under it; see chatmem.UserSearcher. Each term
// reads its list back from the newest entry; entries of conversations that
// expired and were not swept yet are passed over.
func (s *Store) UserPostings(ctx context.Context, user chatmem.Key, terms []string, limit int) ([][]chatmem.UserHit, error) {
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, err
	}
	u, err := s.readUser(ctx, user)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make([][]chatmem.UserHit, len(terms))
	if u == nil {
		for i := range out {
			out[i] = []chatmem.UserHit{}
		}
		return out, nil
	}
	tn, now := s.tenants[user.Tenant], time.Now()
	for i, t := range terms {
		list := u.index.postings[t]
		hits := make([]chatmem.UserHit, 0, min(limit, len(list)))
		for j := len(list) - 1; j >= 0 && len(hits) < limit; j-- {
			e := list[j]
			if c := tn.convs[e.conv]; c == nil || c.expired(now) {
				continue
			}
			hits = append(hits, chatmem.UserHit{Conversation: e.conv, Seq: e.seq})
		}
		out[i] = hits
	}
	return out, nil
}

// UserMessagesAt returns copies of the messages named by hits that belong
// to the user's live conversations, ordered by conversation and seq; see
// chatmem.UserSearcher.
func (s *Store) UserMessagesAt(ctx context.Context, user chatmem.Key, hits []chatmem.UserHit) ([]chatmem.UserMessage, error) {
	u, err := s.readUser(ctx, user)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := []chatmem.UserMessage{}
	if u == nil {
		return out, nil
	}
	want := slices.Clone(hits)
	slices.SortFunc(want, func(a, b chatmem.UserHit) int {
		return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Seq, b.Seq))
	})
	want = slices.Compact(want)
	tn, now := s.tenants[user.Tenant], time.Now()
	for _, h := range want {
		c := tn.convs[h.Conversation]
		if c == nil || c.expired(now) || c.meta.User != user.ID || h.Seq < 1 || h.Seq > int64(c.msgs.len()) {
			continue
		}
		out = append(out, chatmem.UserMessage{Conversation: h.Conversation, Message: c.msgs.at(int(h.Seq - 1))})
	}
	return out, nil
}
