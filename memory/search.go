package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/chatmem/chatmem"
)

// Postings returns the newest messages indexed under each term; see
// chatmem.Searcher. Each term is a binary search in its posting list and a
// copy of at most limit entries.
func (s *Store) Postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: postings limit must be at least 1, not %d", chatmem.ErrInvalid, limit)
	}
	if i := slices.Index(terms, ""); i >= 0 {
		return nil, fmt.Errorf("%w: search term %d is empty", chatmem.ErrInvalid, i)
	}
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make([][]int64, len(terms))
	for i, t := range terms {
		list := c.postings[t]
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
		if seq >= 1 && seq <= int64(len(c.msgs)) {
			out = append(out, c.msgs[seq-1].Clone())
		}
	}
	return out, nil
}
