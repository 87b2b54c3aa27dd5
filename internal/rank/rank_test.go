package rank

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBest checks that Best returns what sorting all the
// candidates by Better and taking the first k returns, ties of score
// included.
func TestBest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ n, k int }{{0, 5}, {3, 5}, {5, 5}, {6, 5}, {1000, 1}, {1000, 200}, {5000, 200}, {10, 0}} {
		candidates := make([]Scored, tc.n)
		for i := range candidates {
			// Few distinct scores, so that many ties are broken by seq.
			candidates[i] = Scored{Seq: int64(i) * 7 % 10007, Score: float64(r.IntN(20)) / 4}
		}
		r.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
		want := slices.Clone(candidates)
		slices.SortFunc(want, Better)
		want = want[:min(tc.k, len(want))]
		if got := Best(candidates, tc.k); !slices.Equal(got, want) {
			t.Errorf("Best(%d candidates, %d) = %v, want %v", tc.n, tc.k, got, want)
		}
	}
}
