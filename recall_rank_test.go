package chatmem

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBestScored checks that bestScored returns what sorting all the
// candidates by better and taking the first k returns, ties of score
// included.
func TestBestScored(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ n, k int }{{0, 5}, {3, 5}, {5, 5}, {6, 5}, {1000, 1}, {1000, 200}, {5000, 200}, {10, 0}} {
		candidates := make([]scored, tc.n)
		for i := range candidates {
			// Few distinct scores, so that many ties are broken by seq.
			candidates[i] = scored{seq: int64(i) * 7 % 10007, score: float64(r.IntN(20)) / 4}
		}
		r.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
		want := slices.Clone(candidates)
		slices.SortFunc(want, better)
		want = want[:min(tc.k, len(want))]
		if got := bestScored(candidates, tc.k); !slices.Equal(got, want) {
			t.Errorf("bestScored(%d candidates, %d) = %v, want %v", tc.n, tc.k, got, want)
		}
	}
}
