package memory

import (
	"context"
	"fmt"
	"math"
	"slices"

	"chatmem"
)

var _ chatmem.VectorStore = (*Store)(nil)

// PutVectors stores vecs[i] as message seqs[i]'s vector under model,
// replacing any stored one; see chatmem.VectorStore. The vectors are
// copied. Besides mismatched lengths, an empty model and an empty vector,
// a seq below 1 or given twice, vectors of different lengths in one call
// and a NaN or infinite component wrap chatmem.ErrInvalid, and nothing is
// stored. A missing or expired conversation wraps chatmem.ErrNotFound.
func (s *Store) PutVectors(ctx context.Context, key chatmem.Key, model string, seqs []int64, vecs [][]float32) error {
	if err := checkVectors(model, seqs, vecs); err != nil {
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
// heap of limit. An empty model or query, a NaN or infinite component in
// query, span < 1 or limit < 1 wraps chatmem.ErrInvalid; a missing or
// expired conversation wraps chatmem.ErrNotFound.
func (s *Store) NearestVectors(ctx context.Context, key chatmem.Key, model string, query []float32, before int64, span, limit int) ([]chatmem.VectorHit, error) {
	if err := checkQuery(model, query, span, limit); err != nil {
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
	top := nearest{limit: limit}
	qq := norm2(query)
	add := func(seq int64, v []float32) {
		if len(v) == len(query) {
			top.add(chatmem.VectorHit{Seq: seq, Similarity: cosine(query, qq, v)})
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
	return top.sorted(), nil
}

// checkVectors returns the error PutVectors gives for its arguments, or
// nil.
func checkVectors(model string, seqs []int64, vecs [][]float32) error {
	if model == "" {
		return fmt.Errorf("%w: vector model is empty", chatmem.ErrInvalid)
	}
	if len(seqs) != len(vecs) {
		return fmt.Errorf("%w: %d seqs for %d vectors", chatmem.ErrInvalid, len(seqs), len(vecs))
	}
	seen := make(map[int64]bool, len(seqs))
	for i, v := range vecs {
		switch seq := seqs[i]; {
		case seq < 1:
			return fmt.Errorf("%w: vector %d is for seq %d", chatmem.ErrInvalid, i, seq)
		case seen[seq]:
			return fmt.Errorf("%w: two vectors for seq %d", chatmem.ErrInvalid, seq)
		case len(v) == 0:
			return fmt.Errorf("%w: vector %d (seq %d) is empty", chatmem.ErrInvalid, i, seq)
		case len(v) != len(vecs[0]):
			return fmt.Errorf("%w: vector %d (seq %d) has %d dimensions, vector 0 has %d", chatmem.ErrInvalid, i, seq, len(v), len(vecs[0]))
		case !finite(v):
			return fmt.Errorf("%w: vector %d (seq %d) has a NaN or infinite component", chatmem.ErrInvalid, i, seq)
		}
		seen[seqs[i]] = true
	}
	return nil
}

// checkQuery returns the error NearestVectors gives for its arguments, or
// nil.
func checkQuery(model string, query []float32, span, limit int) error {
	switch {
	case model == "":
		return fmt.Errorf("%w: vector model is empty", chatmem.ErrInvalid)
	case len(query) == 0:
		return fmt.Errorf("%w: query vector is empty", chatmem.ErrInvalid)
	case !finite(query):
		return fmt.Errorf("%w: query vector has a NaN or infinite component", chatmem.ErrInvalid)
	case span < 1:
		return fmt.Errorf("%w: vector search span must be at least 1, not %d", chatmem.ErrInvalid, span)
	case limit < 1:
		return fmt.Errorf("%w: vector search limit must be at least 1, not %d", chatmem.ErrInvalid, limit)
	}
	return nil
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// norm2 is the squared length of v.
func norm2(v []float32) float64 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	return n
}

// cosine is the cosine similarity of q (whose squared length is qq) and v,
// of the same length, summed in float64; 0 if either is zero.
func cosine(q []float32, qq float64, v []float32) float32 {
	var dot, vv float64
	for i, x := range v {
		dot += float64(q[i]) * float64(x)
		vv += float64(x) * float64(x)
	}
	if qq == 0 || vv == 0 {
		return 0
	}
	return float32(min(max(dot/math.Sqrt(qq*vv), -1), 1))
}

// nearest keeps the limit best hits it is given: a heap whose root is the
// worst of them, so a hit no better than the root costs one comparison.
type nearest struct {
	limit int
	hits  []chatmem.VectorHit
}

// better orders hits: the higher similarity, then the higher seq.
func better(a, b chatmem.VectorHit) bool {
	return a.Similarity > b.Similarity || a.Similarity == b.Similarity && a.Seq > b.Seq
}

func (n *nearest) add(h chatmem.VectorHit) {
	hs := n.hits
	if len(hs) < n.limit {
		hs = append(hs, h)
		for i := len(hs) - 1; i > 0; {
			p := (i - 1) / 2
			if !better(hs[p], hs[i]) {
				break
			}
			hs[p], hs[i] = hs[i], hs[p]
			i = p
		}
		n.hits = hs
		return
	}
	if !better(h, hs[0]) {
		return
	}
	hs[0] = h
	for i := 0; ; {
		w := 2*i + 1 // the worse child
		if w >= len(hs) {
			break
		}
		if r := w + 1; r < len(hs) && better(hs[w], hs[r]) {
			w = r
		}
		if !better(hs[i], hs[w]) {
			break
		}
		hs[i], hs[w] = hs[w], hs[i]
		i = w
	}
}

// sorted returns the hits kept, best first.
func (n *nearest) sorted() []chatmem.VectorHit {
	if n.hits == nil {
		return []chatmem.VectorHit{}
	}
	slices.SortFunc(n.hits, func(a, b chatmem.VectorHit) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	return n.hits
}
