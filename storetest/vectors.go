package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
)

// vectorTests lists the chatmem.VectorStore subtests in the order
// testVectors runs them.
var vectorTests = []subtest{
	{"Nearest", testVectorsNearest},
	{"Replace", testVectorsReplace},
	{"SpanAndBefore", testVectorsSpanAndBefore},
	{"Limit", testVectorsLimit},
	{"Models", testVectorsModels},
	{"Ties", testVectorsTies},
	{"OtherLength", testVectorsOtherLength},
	{"Invalid", testVectorsInvalid},
	{"NotFound", testVectorsNotFound},
	{"TenantIsolation", testVectorsTenantIsolation},
	{"Concurrent", testVectorsConcurrent},
	{"Endings", testVectorsEndings},
}

// testVectors runs the chatmem.VectorStore subtests if the harness's stores
// implement it.
var testVectors = optional[chatmem.VectorStore](vectorTests)

// vecModel is the model the subtests store vectors under.
const vecModel = "test:vec"

// mustPutVectors stores vecs under model, failing the test on an error.
func mustPutVectors(t *testing.T, s chatmem.Store, key chatmem.Key, model string, seqs []int64, vecs [][]float32) {
	t.Helper()
	if err := as[chatmem.VectorStore](t, s).PutVectors(t.Context(), key, model, seqs, vecs); err != nil {
		t.Fatalf("PutVectors(%s, %q, %v) error = %v, want nil", key, model, seqs, err)
	}
}

// wantNearest fails the test unless NearestVectors returns the seqs want,
// in order, with the similarities sims (to within 1e-5) when sims is not
// nil.
func wantNearest(t *testing.T, what string, s chatmem.Store, key chatmem.Key, model string, query []float32, before int64, span, limit int, want []int64, sims []float64) {
	t.Helper()
	hits, err := as[chatmem.VectorStore](t, s).NearestVectors(t.Context(), key, model, query, before, span, limit)
	if err != nil {
		t.Fatalf("%s: NearestVectors(%s, %q, %v, before %d, span %d, limit %d) error = %v", what, key, model, query, before, span, limit, err)
	}
	got := make([]int64, len(hits))
	for i, h := range hits {
		got[i] = h.Seq
	}
	if fmt.Sprint(got) != fmt.Sprint(want) && len(got)+len(want) > 0 {
		t.Errorf("%s: NearestVectors(%v, before %d, span %d, limit %d) = seqs %v, want %v (hits %+v)", what, query, before, span, limit, got, want, hits)
		return
	}
	for i := range sims {
		if math.Abs(float64(hits[i].Similarity)-sims[i]) > 1e-5 {
			t.Errorf("%s: similarity of seq %d = %v, want %v", what, hits[i].Seq, hits[i].Similarity, sims[i])
		}
	}
}

// newVectorConversation appends n messages to a fresh key and returns it.
func newVectorConversation(t *testing.T, s chatmem.Store, n int) chatmem.Key {
	t.Helper()
	key := randomKey("vectors")
	fill(t, t.Context(), s, key, n)
	return key
}

// cos is the cosine similarity of a and b, as the stores compute it.
func cos(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func testVectorsNearest(t *testing.T, h Harness) {
	s := h.New(t)
	key := newVectorConversation(t, s, 6)
	// The query is nearest to seq 1 by angle, but seq 2 is longer and
	// would win by dot product: the ranking is by cosine.
	vecs := [][]float32{{1, 0}, {3, 3}, {0, 2}, {-1, 0}, {0.5, 0.1}}
	mustPutVectors(t, s, key, vecModel, []int64{1, 2, 3, 4, 5}, vecs)
	q := []float32{1, 0.2}
	sims := []float64{cos(q, vecs[4]), cos(q, vecs[0]), cos(q, vecs[1]), cos(q, vecs[2]), cos(q, vecs[3])}
	want := []int64{5, 1, 2, 3, 4}
	wantNearest(t, "five vectors", s, key, vecModel, q, 7, 100, 10, want, sims)
	wantNearest(t, "another store over the same data", h.reopen(t, s), key, vecModel, q, 7, 100, 10, want, sims)
	// A message without a vector (seq 6) is never found; an opposite
	// vector is, last, with similarity -1.
	neg := []float32{-2, 0}
	wantNearest(t, "opposite", s, key, vecModel, neg, 7, 100, 10, []int64{4, 3, 2, 5, 1},
		[]float64{1, 0, cos(neg, vecs[1]), cos(neg, vecs[4]), -1})
}

func testVectorsReplace(t *testing.T, h Harness) {
	s := h.New(t)
	key := newVectorConversation(t, s, 3)
	mustPutVectors(t, s, key, vecModel, []int64{1, 2, 3}, [][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
	wantNearest(t, "before replacing", s, key, vecModel, []float32{1, 0, 0}, 4, 10, 1, []int64{1}, []float64{1})
	mustPutVectors(t, h.reopen(t, s), key, vecModel, []int64{2}, [][]float32{{2, 0, 0.01}})
	wantNearest(t, "after replacing", s, key, vecModel, []float32{0, 1, 0}, 4, 10, 3, []int64{3, 2, 1}, []float64{0, 0, 0})
	wantNearest(t, "after replacing", s, key, vecModel, []float32{1, 0, 0}, 4, 10, 3, []int64{1, 2, 3}, nil)
	// Replacing the same seqs again is idempotent.
	for range 2 {
		mustPutVectors(t, s, key, vecModel, []int64{3, 1}, [][]float32{{0, 1, 0}, {0, 0, 1}})
	}
	wantNearest(t, "after replacing twice", s, key, vecModel, []float32{0, 1, 0}, 4, 10, 3, []int64{3, 2, 1}, []float64{1, 0, 0})
}

func testVectorsSpanAndBefore(t *testing.T, h Harness) {
	s := h.New(t)
	key := newVectorConversation(t, s, 20)
	var seqs []int64
	var vecs [][]float32
	for seq := int64(1); seq <= 20; seq++ {
		// The angle grows with seq: a query along (1, 0) ranks them oldest
		// first.
		a := float64(seq) / 20
		seqs, vecs = append(seqs, seq), append(vecs, []float32{float32(math.Cos(a)), float32(math.Sin(a))})
	}
	// Two calls, so the vectors span batches.
	mustPutVectors(t, s, key, vecModel, seqs[:7], vecs[:7])
	mustPutVectors(t, s, key, vecModel, seqs[7:], vecs[7:])
	q := []float32{1, 0}
	wantNearest(t, "everything", s, key, vecModel, q, 21, 20, 3, []int64{1, 2, 3}, nil)
	wantNearest(t, "before 21, span 5", s, key, vecModel, q, 21, 5, 10, []int64{16, 17, 18, 19, 20}, nil)
	wantNearest(t, "before 10, span 3", s, key, vecModel, q, 10, 3, 2, []int64{7, 8}, nil)
	wantNearest(t, "before 10, span 1", s, key, vecModel, q, 10, 1, 10, []int64{9}, nil)
	wantNearest(t, "before past the end", s, key, vecModel, q, 1000, 985, 10, []int64{15, 16, 17, 18, 19, 20}, nil)
	wantNearest(t, "span past the start", s, key, vecModel, q, 4, 1000, 10, []int64{1, 2, 3}, nil)
	wantNearest(t, "before 1", s, key, vecModel, q, 1, 10, 10, nil, nil)
	wantNearest(t, "before 0", s, key, vecModel, q, 0, 10, 10, nil, nil)
}

func testVectorsLimit(t *testing.T, h Harness) {
	s := h.New(t)
	key := newVectorConversation(t, s, 40)
	// Seq k's vector is at angle |k-20|/40 from the query, so the nearest
	// are 20, then 19 and 21 (a tie: the newer first), and so on.
	var seqs []int64
	var vecs [][]float32
	for seq := int64(1); seq <= 40; seq++ {
		a := math.Abs(float64(seq-20)) / 40
		seqs, vecs = append(seqs, seq), append(vecs, []float32{float32(math.Cos(a)), float32(math.Sin(a)), 0, 0})
	}
	mustPutVectors(t, s, key, vecModel, seqs, vecs)
	q := []float32{1, 0, 0, 0}
	wantNearest(t, "limit 1", s, key, vecModel, q, 41, 40, 1, []int64{20}, []float64{1})
	wantNearest(t, "limit 5", s, key, vecModel, q, 41, 40, 5, []int64{20, 21, 19, 22, 18}, nil)
	all := []int64{20}
	for d := int64(1); d <= 19; d++ {
		all = append(all, 20+d, 20-d)
	}
	all = append(all, 40)
	wantNearest(t, "limit above the count", s, key, vecModel, q, 41, 40, 100, all, nil)
}

func testVectorsModels(t *testing.T, h Harness) {
	s := h.New(t)
	key := newVectorConversation(t, s, 4)
	mustPutVectors(t, s, key, "model-a", []int64{1, 2, 3}, [][]float32{{1, 0}, {0, 1}, {1, 1}})
	mustPutVectors(t, s, key, "model-b", []int64{2, 3, 4}, [][]float32{{0, 0, 1}, {1, 0, 0}, {0, 1, 0}})
	wantNearest(t, "model-a", s, key, "model-a", []float32{1, 0}, 5, 10, 10, []int64{1, 3, 2}, nil)
	wantNearest(t, "model-b", s, key, "model-b", []float32{1, 0, 0}, 5, 10, 10, []int64{3, 4, 2}, []float64{1, 0, 0})
	wantNearest(t, "a model with no vectors", s, key, "model-c", []float32{1, 0}, 5, 10, 10, nil, nil)
	// Model names are compared exactly.
	wantNearest(t, "model-A", s, key, "model-A", []float32{1, 0}, 5, 10, 10, nil, nil)
}

// Equal similarities put the newer message first, so the order is the same
// in every store and every run.
func testVectorsTies(t *testing.T, h Harness) {
	s := h.New(t)
	key := newVectorConversation(t, s, 6)
	mustPutVectors(t, s, key, vecModel, []int64{2, 5, 3, 1, 4, 6},
		[][]float32{{1, 1}, {2, 2}, {0, 1}, {3, 3}, {0, 5}, {1, 0}})
	wantNearest(t, "ties", s, key, vecModel, []float32{1, 1}, 7, 10, 10, []int64{5, 2, 1, 6, 4, 3}, nil)
	wantNearest(t, "ties cut by the limit", s, key, vecModel, []float32{1, 1}, 7, 10, 2, []int64{5, 2}, nil)
	// A zero query is at no angle to anything: all similarities are 0.
	wantNearest(t, "zero query", s, key, vecModel, []float32{0, 0}, 7, 10, 3, []int64{6, 5, 4}, []float64{0, 0, 0})
}

// Stored vectors of another length than the query are not comparable with
// it, and are skipped.
func testVectorsOtherLength(t *testing.T, h Harness) {
	s := h.New(t)
	key := newVectorConversation(t, s, 4)
	mustPutVectors(t, s, key, vecModel, []int64{1, 2}, [][]float32{{1, 0}, {0, 1}})
	mustPutVectors(t, s, key, vecModel, []int64{3, 4}, [][]float32{{1, 0, 0}, {0, 1, 0}})
	wantNearest(t, "two dimensions", s, key, vecModel, []float32{0, 1}, 5, 10, 10, []int64{2, 1}, nil)
	wantNearest(t, "three dimensions", s, key, vecModel, []float32{1, 0, 0}, 5, 10, 10, []int64{3, 4}, nil)
	wantNearest(t, "four dimensions", s, key, vecModel, []float32{1, 0, 0, 0}, 5, 10, 10, nil, nil)
}

func testVectorsInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	vs := as[chatmem.VectorStore](t, s)
	ctx := t.Context()
	key := newVectorConversation(t, s, 3)
	v := [][]float32{{1, 0}}
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		what  string
		key   chatmem.Key
		model string
		seqs  []int64
		vecs  [][]float32
	}{
		{"more seqs than vectors", key, vecModel, []int64{1, 2}, v},
		{"more vectors than seqs", key, vecModel, []int64{1}, [][]float32{{1, 0}, {0, 1}}},
		{"empty model", key, "", []int64{1}, v},
		{"empty vector", key, vecModel, []int64{1}, [][]float32{{}}},
		{"nil vector", key, vecModel, []int64{1, 2}, [][]float32{{1, 0}, nil}},
		{"lengths differ", key, vecModel, []int64{1, 2}, [][]float32{{1, 0}, {1, 0, 0}}},
		{"seq 0", key, vecModel, []int64{0}, v},
		{"negative seq", key, vecModel, []int64{-3}, v},
		{"seq twice", key, vecModel, []int64{2, 2}, [][]float32{{1, 0}, {0, 1}}},
		{"NaN", key, vecModel, []int64{1}, [][]float32{{1, nan}}},
		{"infinity", key, vecModel, []int64{1}, [][]float32{{inf, 0}}},
		{"empty ID", chatmem.Key{Tenant: key.Tenant}, vecModel, []int64{1}, v},
		{"empty tenant", chatmem.Key{ID: key.ID}, vecModel, []int64{1}, v},
	} {
		err := vs.PutVectors(ctx, tc.key, tc.model, tc.seqs, tc.vecs)
		wantErr(t, "PutVectors("+tc.what+")", err, chatmem.ErrInvalid)
	}
	// Nothing of the refused calls was stored.
	wantNearest(t, "after refused puts", s, key, vecModel, []float32{1, 0}, 4, 10, 10, nil, nil)

	mustPutVectors(t, s, key, vecModel, []int64{1}, v)
	for _, tc := range []struct {
		what        string
		key         chatmem.Key
		model       string
		query       []float32
		span, limit int
	}{
		{"empty model", key, "", []float32{1, 0}, 10, 10},
		{"empty query", key, vecModel, nil, 10, 10},
		{"NaN query", key, vecModel, []float32{nan, 1}, 10, 10},
		{"limit 0", key, vecModel, []float32{1, 0}, 10, 0},
		{"negative limit", key, vecModel, []float32{1, 0}, 10, -1},
		{"span 0", key, vecModel, []float32{1, 0}, 0, 10},
		{"negative span", key, vecModel, []float32{1, 0}, -5, 10},
		{"empty ID", chatmem.Key{Tenant: key.Tenant}, vecModel, []float32{1, 0}, 10, 10},
	} {
		_, err := vs.NearestVectors(ctx, tc.key, tc.model, tc.query, 4, tc.span, tc.limit)
		wantErr(t, "NearestVectors("+tc.what+")", err, chatmem.ErrInvalid)
	}
}

func testVectorsNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	vs := as[chatmem.VectorStore](t, s)
	ctx := t.Context()
	missing := randomKey("never-written")
	err := vs.PutVectors(ctx, missing, vecModel, []int64{1}, [][]float32{{1, 0}})
	wantErr(t, "PutVectors(missing conversation)", err, chatmem.ErrNotFound)
	err = vs.PutVectors(ctx, missing, vecModel, nil, nil)
	wantErr(t, "PutVectors(missing conversation, no vectors)", err, chatmem.ErrNotFound)
	_, err = vs.NearestVectors(ctx, missing, vecModel, []float32{1, 0}, 10, 10, 10)
	wantErr(t, "NearestVectors(missing conversation)", err, chatmem.ErrNotFound)

	// The refused put created nothing: the conversation is still missing.
	wantNotFound(t, s, missing)

	// An existing conversation without vectors is found, and empty; so
	// is an empty put.
	key := newVectorConversation(t, s, 2)
	mustPutVectors(t, s, key, vecModel, nil, nil)
	wantNearest(t, "no vectors", s, key, vecModel, []float32{1, 0}, 3, 10, 10, nil, nil)
}

func testVectorsTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	a := newVectorConversation(t, s, 2)
	b := chatmem.Key{Tenant: randomTenant(), ID: a.ID}
	c := chatmem.Key{Tenant: a.Tenant, ID: a.ID + "-other"}
	fill(t, t.Context(), s, b, 2)
	fill(t, t.Context(), s, c, 2)
	mustPutVectors(t, s, a, vecModel, []int64{1}, [][]float32{{1, 0}})
	mustPutVectors(t, s, b, vecModel, []int64{2}, [][]float32{{0, 1}})
	mustPutVectors(t, s, c, vecModel, []int64{1, 2}, [][]float32{{1, 1}, {1, -1}})
	q := []float32{1, 0}
	wantNearest(t, "tenant a", s, a, vecModel, q, 3, 10, 10, []int64{1}, []float64{1})
	wantNearest(t, "tenant b", s, b, vecModel, q, 3, 10, 10, []int64{2}, []float64{0})
	wantNearest(t, "another conversation", h.reopen(t, s), c, vecModel, q, 3, 10, 10, []int64{2, 1}, nil)
}

func testVectorsConcurrent(t *testing.T, h Harness) {
	s := h.New(t)
	const writers, each = 8, 10
	key := newVectorConversation(t, s, writers*each+1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			st := h.reopen(t, s)
			for i := range each {
				seq := int64(w*each + i + 2)
				// Every writer also rewrites seq 1, each time the same.
				err := as[chatmem.VectorStore](t, st).PutVectors(t.Context(), key, vecModel,
					[]int64{seq, 1}, [][]float32{{float32(seq), 1}, {1, 0}})
				if err != nil {
					t.Errorf("writer %d put %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Seq 1 is (1, 0) itself; of the others, the larger the seq, the
	// nearer.
	want := []int64{1}
	for seq := int64(writers*each + 1); seq >= 2; seq-- {
		want = append(want, seq)
	}
	n := writers*each + 1
	wantNearest(t, "after concurrent puts", s, key, vecModel, []float32{1, 0}, int64(n+1), n, n, want, nil)
}

func testVectorsEndings(t *testing.T, h Harness) {
	s := h.New(t)
	vs := as[chatmem.VectorStore](t, s)
	endings(t, s,
		func(key chatmem.Key) {
			mustPutVectors(t, s, key, vecModel, []int64{1, 2}, [][]float32{{1, 0}, {0, 1}})
		},
		func(how string, key chatmem.Key) {
			_, err := vs.NearestVectors(t.Context(), key, vecModel, []float32{1, 0}, 10, 10, 10)
			wantErr(t, fmt.Sprintf("NearestVectors(%s) after %s", key, how), err, chatmem.ErrNotFound)
			err = vs.PutVectors(t.Context(), key, vecModel, []int64{1}, [][]float32{{1, 0}})
			wantErr(t, fmt.Sprintf("PutVectors(%s) after %s", key, how), err, chatmem.ErrNotFound)
		},
		func(how string, key chatmem.Key) {
			wantNearest(t, "after "+how+" and a new append", s, key, vecModel, []float32{1, 0}, 10, 10, 10, nil, nil)
		})
}

// RandomVectors returns n vectors of dims components drawn from r, for
// stores' own vector tests and benchmarks.
func RandomVectors(r *rand.Rand, n, dims int) [][]float32 {
	vecs := make([][]float32, n)
	for i := range vecs {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		vecs[i] = v
	}
	return vecs
}

// PutRandomVectors stores a random vector of dims components for each of
// key's messages 1..n under model, 512 per call.
func PutRandomVectors(tb testing.TB, s chatmem.VectorStore, key chatmem.Key, model string, n, dims int, r *rand.Rand) {
	tb.Helper()
	for from := 1; from <= n; from += 512 {
		m := min(512, n-from+1)
		seqs := make([]int64, m)
		for i := range seqs {
			seqs[i] = int64(from + i)
		}
		if err := s.PutVectors(context.Background(), key, model, seqs, RandomVectors(r, m, dims)); err != nil {
			tb.Fatalf("PutVectors(%s, seqs %d..%d): %v", key, from, from+m-1, err)
		}
	}
}
