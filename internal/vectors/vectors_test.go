package vectors_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/vectors"
)

func TestCosine(t *testing.T) {
	tests := []struct {
		name string
		q, v []float32
		want float32
	}{
		{"same", []float32{1, 2, 3}, []float32{1, 2, 3}, 1},
		{"scaled", []float32{1, 2, 3}, []float32{2, 4, 6}, 1},
		{"opposite", []float32{1, 2, 3}, []float32{-1, -2, -3}, -1},
		{"orthogonal", []float32{1, 0}, []float32{0, 1}, 0},
		{"45 degrees", []float32{1, 0}, []float32{1, 1}, float32(1 / math.Sqrt2)},
		{"zero stored", []float32{1, 2}, []float32{0, 0}, 0},
		{"zero query", []float32{0, 0}, []float32{1, 2}, 0},
	}
	for _, tt := range tests {
		qq := vectors.Norm2(tt.q)
		if got := vectors.Cosine(tt.q, qq, tt.v); got != tt.want {
			t.Errorf("%s: Cosine(%v, %v) = %v, want %v", tt.name, tt.q, tt.v, got, tt.want)
		}
		enc, rest := vectors.Encode(make([]byte, 4*len(tt.v)+3), tt.v)
		if len(enc) != 4*len(tt.v) || cap(enc) != len(enc) || len(rest) != 3 {
			t.Errorf("%s: Encode gave %d bytes (cap %d) and %d left, want %d (cap %d) and 3", tt.name, len(enc), cap(enc), len(rest), 4*len(tt.v), 4*len(tt.v))
		}
		if got := vectors.CosineBytes(tt.q, qq, enc); got != tt.want {
			t.Errorf("%s: CosineBytes(%v, Encode(%v)) = %v, want %v", tt.name, tt.q, tt.v, got, tt.want)
		}
	}
}

// TestCosineBytesMatchesCosine checks that the SQL stores, which score the
// encoded bytes, agree to the bit with the memory store, which scores the
// slice.
func TestCosineBytesMatchesCosine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		n := 1 + r.IntN(64)
		q, v := make([]float32, n), make([]float32, n)
		for i := range n {
			q[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		qq := vectors.Norm2(q)
		enc, _ := vectors.Encode(make([]byte, 4*n), v)
		if a, b := vectors.Cosine(q, qq, v), vectors.CosineBytes(q, qq, enc); a != b {
			t.Fatalf("Cosine = %v, CosineBytes = %v for q=%v v=%v", a, b, q, v)
		}
	}
}

func TestNearestTieOrder(t *testing.T) {
	n := vectors.NewNearest(3)
	for _, seq := range []int64{4, 9, 1, 7, 5} {
		n.Add(chatmem.VectorHit{Seq: seq, Similarity: 0.5})
	}
	n.Add(chatmem.VectorHit{Seq: 2, Similarity: 0.25})
	got := n.Sorted()
	want := []chatmem.VectorHit{{Seq: 9, Similarity: 0.5}, {Seq: 7, Similarity: 0.5}, {Seq: 5, Similarity: 0.5}}
	if !slices.Equal(got, want) {
		t.Errorf("Sorted() = %v, want %v (equal similarities: newer seq first)", got, want)
	}
}

func TestNearestEmpty(t *testing.T) {
	got := vectors.NewNearest(5).Sorted()
	if got == nil || len(got) != 0 {
		t.Errorf("Sorted() with nothing added = %#v, want an empty non-nil slice", got)
	}
}

// TestNearestTopK checks the heap against a full sort, over limits below,
// at and above the number of hits, with many tied similarities.
func TestNearestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 500 {
		count := r.IntN(60)
		limit := 1 + r.IntN(20)
		hits := make([]chatmem.VectorHit, count)
		for i, seq := range r.Perm(count) {
			// Few distinct similarities, so ties are common.
			hits[i] = chatmem.VectorHit{Seq: int64(seq + 1), Similarity: float32(r.IntN(7)-3) / 3}
		}
		n := vectors.NewNearest(limit)
		for _, h := range hits {
			n.Add(h)
		}
		got := n.Sorted()
		want := slices.Clone(hits)
		slices.SortFunc(want, func(a, b chatmem.VectorHit) int {
			if a.Similarity != b.Similarity {
				if a.Similarity > b.Similarity {
					return -1
				}
				return 1
			}
			return int(b.Seq - a.Seq)
		})
		want = want[:min(limit, count)]
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: top %d of %d hits = %v, want %v", trial, limit, count, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(-1))
	tests := []struct {
		name  string
		model string
		seqs  []int64
		vecs  [][]float32
		want  string // "" for nil, else the message after chatmem.ErrInvalid's
	}{
		{"ok", "m", []int64{1, 2}, [][]float32{{1, 2}, {3, 4}}, ""},
		{"none", "m", nil, nil, ""},
		{"empty model", "", []int64{1}, [][]float32{{1}}, "vector model is empty"},
		{"lengths", "m", []int64{1, 2}, [][]float32{{1}}, "2 seqs for 1 vectors"},
		{"seq 0", "m", []int64{1, 0}, [][]float32{{1}, {2}}, "vector 1 is for seq 0"},
		{"twice", "m", []int64{3, 3}, [][]float32{{1}, {2}}, "two vectors for seq 3"},
		{"empty vector", "m", []int64{5}, [][]float32{{}}, "vector 0 (seq 5) is empty"},
		{"dimensions", "m", []int64{1, 2}, [][]float32{{1, 2}, {3}}, "vector 1 (seq 2) has 1 dimensions, vector 0 has 2"},
		{"NaN", "m", []int64{1, 2}, [][]float32{{1}, {nan}}, "vector 1 (seq 2) has a NaN or infinite component"},
		{"Inf", "m", []int64{4}, [][]float32{{inf}}, "vector 0 (seq 4) has a NaN or infinite component"},
	}
	for _, tt := range tests {
		checkErr(t, tt.name, vectors.Check(tt.model, tt.seqs, tt.vecs), tt.want)
	}
}

func TestCheckQuery(t *testing.T) {
	tests := []struct {
		name        string
		model       string
		query       []float32
		span, limit int
		want        string
	}{
		{"ok", "m", []float32{1}, 1, 1, ""},
		{"empty model", "", []float32{1}, 1, 1, "vector model is empty"},
		{"empty query", "m", nil, 1, 1, "query vector is empty"},
		{"NaN", "m", []float32{float32(math.NaN())}, 1, 1, "query vector has a NaN or infinite component"},
		{"Inf", "m", []float32{1, float32(math.Inf(1))}, 1, 1, "query vector has a NaN or infinite component"},
		{"span", "m", []float32{1}, 0, 1, "vector search span must be at least 1, not 0"},
		{"limit", "m", []float32{1}, 1, -2, "vector search limit must be at least 1, not -2"},
	}
	for _, tt := range tests {
		checkErr(t, tt.name, vectors.CheckQuery(tt.model, tt.query, tt.span, tt.limit), tt.want)
	}
}

func checkErr(t *testing.T, name string, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: error %v, want nil", name, err)
		}
		return
	}
	if !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("%s: error %v, want one wrapping chatmem.ErrInvalid", name, err)
		return
	}
	if got := strings.TrimPrefix(err.Error(), chatmem.ErrInvalid.Error()+": "); got != want {
		t.Errorf("%s: error %q, want %q", name, got, want)
	}
}
