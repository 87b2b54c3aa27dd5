// Package vectors holds what the stores' VectorStore implementations
// share: input validation, cosine similarity and the top-k selection.
// It also holds the encoding the SQL stores keep a vector in: its
// components as little-endian float32s.
//
// Keeping one copy keeps the stores in step where chatmem.VectorStore
// requires them to agree: the same arguments are refused with the same
// errors, similarities are summed in float64 the same way, and equal
// similarities are ordered alike (the higher seq first).
package vectors

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/chatmem/chatmem"
)

// Check returns the error PutVectors gives for its arguments, or nil: an
// empty model, len(seqs) != len(vecs), a seq below 1 or given twice, an
// empty vector, vectors of different lengths and a NaN or infinite
// component each wrap chatmem.ErrInvalid.
func Check(model string, seqs []int64, vecs [][]float32) error {
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

// CheckQuery returns the error NearestVectors gives for its arguments, or
// nil: an empty model or query, a NaN or infinite component in query,
// span < 1 and limit < 1 each wrap chatmem.ErrInvalid.
func CheckQuery(model string, query []float32, span, limit int) error {
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

// Norm2 is the squared length of v, the qq that Cosine and CosineBytes
// take: computed once per query rather than once per stored vector.
func Norm2(v []float32) float64 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	return n
}

// Cosine is the cosine similarity of q (whose squared length is qq) and v,
// of the same length, summed in float64; 0 if either is zero.
func Cosine(q []float32, qq float64, v []float32) float32 {
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

// CosineBytes is the cosine similarity of q (whose squared length is qq)
// and the vector b encodes (little-endian float32s, as many as q has, as
// Encode writes them), summed in float64 as Cosine does, so that a vector
// gets the same similarity in every store; 0 if either is zero. It reads
// b in place, without decoding it into a slice first.
func CosineBytes(q []float32, qq float64, b []byte) float32 {
	b = b[:4*len(q)]
	var dot, vv float64
	for i, y := range q {
		x := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		dot += float64(y) * x
		vv += x * x
	}
	if qq == 0 || vv == 0 {
		return 0
	}
	return float32(min(max(dot/math.Sqrt(qq*vv), -1), 1))
}

// Encode writes v into the front of buf as little-endian float32s and
// returns those bytes and the rest of buf, so that one buffer can hold
// every vector of a call. buf must have room for 4*len(v) bytes; enc's
// capacity ends with it, so appending to enc cannot overwrite rest.
func Encode(buf []byte, v []float32) (enc, rest []byte) {
	enc = buf[: 4*len(v) : 4*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint32(enc[4*i:], math.Float32bits(x))
	}
	return enc, buf[4*len(v):]
}

// Nearest keeps the limit best hits it is given: a heap whose root is the
// worst of them, so a hit no better than the root costs one comparison.
// A hit is better than another if its similarity is higher or, equal, its
// seq is higher. It is not safe for concurrent use.
type Nearest struct {
	limit int
	hits  []chatmem.VectorHit
}

// NewNearest returns a Nearest that keeps the limit best hits; limit is at
// least 1, as CheckQuery requires.
func NewNearest(limit int) *Nearest {
	return &Nearest{limit: limit}
}

// better orders hits: the higher similarity, then the higher seq.
func better(a, b chatmem.VectorHit) bool {
	return a.Similarity > b.Similarity || a.Similarity == b.Similarity && a.Seq > b.Seq
}

// Add offers h, which is kept if fewer than limit hits are kept or it is
// better than the worst of them, which it then replaces.
func (n *Nearest) Add(h chatmem.VectorHit) {
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

// Sorted returns the hits kept, best first: an empty, non-nil slice if
// there are none. It sorts them in place and returns n's own slice, so it
// is the last call on n.
func (n *Nearest) Sorted() []chatmem.VectorHit {
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
