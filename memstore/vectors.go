package memstore

import (
	"context"
	"slices"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/vectors"
)

var _ chatmem.VectorStore = (*Store)(nil)

// PutVectors stores vecs[i] as message seqs[i]'s vector under model,
// replacing any stored one; see chatmem.VectorStore. The vectors are
// copied. The arguments are checked first, as chatmem.VectorStore says,
// and nothing is stored if one is wrong. A missing or expired conversation
// wraps chatmem.ErrNotFound.
func (s *Store) PutVectors(ctx context.Context, key chatmem.Key, model string, seqs []int64, vecs [][]float32) error {
	if err := vectors.Check(model, seqs, vecs); err != nil {
		return err
	}
	// Copy before taking the lock, as Append does.
	own := make([][]float32, len(vecs))
	for i, v := range vecs {
		own[i] = slices.Clone(v)
	}
	c, err := s.getForWrite(ctx, key)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if len(seqs) == 0 {
		return nil
	}
	if c.vectors == nil {
		c.vectors = make(map[string]map[int64][]float32)
	}
	m := c.vectors[model]
	if m == nil {
		m = make(map[int64][]float32, len(seqs))
		c.vectors[model] = m
	}
	for i, seq := range seqs {
		m[seq] = own[i]
	}
	return nil
}

// NearestVectors returns the limit messages with before-span <= Seq <
// before whose vectors under model are most similar to query, best first;
// see chatmem.VectorStore. Equal similarities put the higher seq first;
// stored vectors of another length than query are skipped. It visits
// min(span, vectors stored under model) entries and keeps the best in a
// heap of limit. The arguments are checked as chatmem.VectorStore says; a
// missing or expired conversation wraps chatmem.ErrNotFound.
func (s *Store) NearestVectors(ctx context.Context, key chatmem.Key, model string, query []float32, before int64, span, limit int) ([]chatmem.VectorHit, error) {
	if err := vectors.CheckQuery(model, query, span, limit); err != nil {
		return nil, err
	}
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	vecs := c.vectors[model]
	if before <= 1 || len(vecs) == 0 {
		return []chatmem.VectorHit{}, nil
	}
	lo := max(before-int64(span), 1)
	top := vectors.NewNearest(limit)
	qq := vectors.Norm2(query)
	add := func(seq int64, v []float32) {
		if len(v) == len(query) {
			top.Add(chatmem.VectorHit{Seq: seq, Similarity: vectors.Cosine(query, qq, v)})
		}
	}
	if int64(len(vecs)) < before-lo {
		for seq, v := range vecs {
			if lo <= seq && seq < before {
				add(seq, v)
			}
		}
	} else {
		for seq := lo; seq < before; seq++ {
			if v, ok := vecs[seq]; ok {
				add(seq, v)
			}
		}
	}
	return top.Sorted(), nil
}
