// Package rank is the ranking math of chatmem's recall and search, over a
// search index's postings (for each query term, the sequence numbers of
// the messages indexed under it): BM25 with binary term frequency and no
// length normalization, per message (Terms) or per passage of five
// messages around each one (Passages); the k best of many candidates
// (Best); and reciprocal rank fusion with another ranking (Fuse). It
// reads nothing and knows no message: the callers number the candidates.
package rank

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
)

// Scored is one candidate message, by its number, and its score.
type Scored struct {
	Seq   int64
	Score float64
}

// A query term found in a message counts for its neighbours too: at near1
// of its weight for the messages next to it, near2 for those two away,
// because the answer to a question is often the turn after the one that
// matches it.
const near1, near2 = 0.6, 0.4

// rrfK is the rank constant of reciprocal rank fusion.
const rrfK = 60

// Passages scores the messages from 1 to before-1 for postings (over n
// messages in all): each message scores as the passage of five around it,
// every query term found in that passage adding its inverse document
// frequency once, weighted by how far from the message its nearest
// occurrence is (1 in the message itself, near1 next to it, near2 two
// away). It returns the candidates in no order (see Better and Best).
func Passages(postings [][]int64, n, before int64) []Scored {
	// Sized for about three positions per posting (five at most, fewer
	// where postings are near each other): growing the map as it fills
	// cost more than the scoring.
	total, longest := 0, 0
	for _, list := range postings {
		total, longest = total+len(list), max(longest, len(list))
	}
	score := make(map[int64]float64, 3*total)
	nearest := make(map[int64]float64, 5*longest) // of one term: position -> weight
	for _, list := range postings {
		df := float64(len(list))
		idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
		clear(nearest)
		for _, seq := range list {
			for d, w := range [...]float64{1, near1, near2} {
				for _, at := range [...]int64{seq - int64(d), seq + int64(d)} {
					if at >= 1 && at < before && w > nearest[at] {
						nearest[at] = w
					}
				}
			}
		}
		// Each position gets one addition per term, in the terms' order:
		// the sums do not depend on map order.
		for at, w := range nearest {
			score[at] += w * idf
		}
	}
	out := make([]Scored, 0, len(score))
	for seq, s := range score {
		out = append(out, Scored{seq, s})
	}
	return out
}

// Better orders candidates best first: by score, then newer first among
// equals. Two candidates are never equal (their seqs differ).
func Better(a, b Scored) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return cmp.Compare(b.Seq, a.Seq)
}

// Best returns the k best of candidates (all of them if there are
// no more than k), best first, as sorting them all by Better and taking
// the first k would, reordering candidates: a heap of the k best so far
// (container/heap, its root the worst of them), so that the cost follows
// len(candidates) and not len(candidates) times its logarithm, since most
// candidates lose to the root at once.
func Best(candidates []Scored, k int) []Scored {
	if k <= 0 {
		return candidates[:0]
	}
	if len(candidates) <= k {
		slices.SortFunc(candidates, Better)
		return candidates
	}
	h := worstFirst(candidates[:k])
	heap.Init(&h)
	for _, c := range candidates[k:] {
		if Better(c, h[0]) < 0 {
			h[0] = c
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(h, Better)
	return h
}

// worstFirst is Best's heap: a fixed number of candidates, the
// worst at the root (Push and Pop are never called).
type worstFirst []Scored

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return Better(h[i], h[j]) > 0 }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(Scored)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Terms scores each message of postings (a Postings answer over n
// messages) with the summed inverse document frequency of the terms it is
// indexed under: BM25 with binary term frequency and no length
// normalization.
func Terms(postings [][]int64, n int64) map[int64]float64 {
	base := make(map[int64]float64)
	for _, list := range postings {
		df := float64(len(list))
		idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
		for _, seq := range list {
			base[seq] += idf
		}
	}
	return base
}

// Fuse merges ranked (best first) with others, another ranking of the
// same candidates best first, by reciprocal rank fusion: each list adds
// 1/(rrfK+rank) to a candidate's score. It returns the candidates best
// first (see Better).
func Fuse(ranked []Scored, others []int64) []Scored {
	fused := make(map[int64]float64, len(ranked)+len(others))
	for i, c := range ranked {
		fused[c.Seq] += 1 / float64(rrfK+i+1)
	}
	for i, seq := range others {
		fused[seq] += 1 / float64(rrfK+i+1)
	}
	out := make([]Scored, 0, len(fused))
	for seq, sc := range fused {
		out = append(out, Scored{seq, sc})
	}
	slices.SortFunc(out, Better)
	return out
}
