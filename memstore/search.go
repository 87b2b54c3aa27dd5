package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// searchIndex is a conversation's recall index: the inverted index
// Postings searches. Append does not touch it; whatever reads it first
// brings it up to date from its watermark (catchUpIndex), under the
// store's lock, so a message is found from the next read on and none is
// ever left out, and each message is indexed once, as when the append did
// it.
type searchIndex struct {
	// mu guards the fields below. It is taken with s.mu held, read or
	// write: readers of the index hold only the read lock, and appends
	// (under the write lock) never take it.
	mu sync.Mutex
	// indexed is the watermark: messages [0, indexed) are in postings.
	indexed int
	// postings maps each term to the sequence numbers of the messages
	// indexed under it, ascending.
	postings map[string][]int64
}

// catchUpIndex indexes the conversation's messages past the index's
// watermark, each under chatmem.IndexTerms, and moves the watermark to the
// end. This is where per-message indexing happens: a reader of the index
// calls it first. The caller holds s.mu (read or write) and c.index.mu.
func (c *conversation) catchUpIndex() {
	x := &c.index
	n := c.msgs.len()
	if x.indexed == n {
		return
	}
	if x.postings == nil {
		x.postings = make(map[string][]int64)
	}
	for i := x.indexed; i < n; i++ {
		seq := int64(i) + 1
		for _, t := range chatmem.IndexTerms(c.msgs.view(i)) {
			x.postings[t] = append(x.postings[t], seq)
		}
	}
	x.indexed = n
}

// Postings returns the newest messages indexed under each term; see
// chatmem.Searcher. Each term is a binary search in its posting list and a
// copy of at most limit entries, once the index has caught up with the
// messages appended since the last read of it.
func (s *Store) Postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, error) {
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, err
	}
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	c.index.mu.Lock()
	defer c.index.mu.Unlock()
	c.catchUpIndex()
	out := make([][]int64, len(terms))
	for i, t := range terms {
		list := c.index.postings[t]
		end, _ := slices.BinarySearch(list, before)
		seqs := make([]int64, 0, min(limit, end))
		for j := end - 1; j >= 0 && len(seqs) < limit; j-- {
			seqs = append(seqs, list[j])
		}
		out[i] = seqs
	}
	return out, nil
}

// MessagesAt returns copies of the messages with the given sequence
// numbers; see chatmem.Searcher.
func (s *Store) MessagesAt(ctx context.Context, key chatmem.Key, seqs []int64) ([]chatmem.Message, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	want := slices.Clone(seqs)
	slices.Sort(want)
	want = slices.Compact(want)
	out := make([]chatmem.Message, 0, len(want))
	for _, seq := range want {
		if seq >= 1 && seq <= int64(c.msgs.len()) {
			out = append(out, c.msgs.at(int(seq-1)))
		}
	}
	return out, nil
}
