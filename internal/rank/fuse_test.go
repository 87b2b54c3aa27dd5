package rank

import (
	"slices"
	"testing"
)

// TestFuse: reciprocal rank fusion ranks first what both lists rank high,
// and breaks ties of score by the newer message.
func TestFuse(t *testing.T) {
	lexical := []Scored{{Seq: 10, Score: 9}, {Seq: 20, Score: 5}, {Seq: 30, Score: 1}}
	got := Fuse(lexical, []int64{20, 40})
	var seqs []int64
	for _, c := range got {
		seqs = append(seqs, c.Seq)
	}
	// 20: 1/62+1/61; 10: 1/61; 40: 1/62; 30: 1/63.
	if want := []int64{20, 10, 40, 30}; !slices.Equal(seqs, want) {
		t.Errorf("Fuse order = %v, want %v", seqs, want)
	}
	// Equal scores: the newer first.
	got = Fuse([]Scored{{Seq: 1}}, []int64{2})
	if got[0].Seq != 2 || got[1].Seq != 1 {
		t.Errorf("Fuse of two firsts = %v, want seq 2 then 1", got)
	}
}

// TestPassages: a term counts for its message and, less, for the two on
// each side, within 1..before-1.
func TestPassages(t *testing.T) {
	got := map[int64]float64{}
	for _, c := range Passages([][]int64{{3}}, 10, 5) {
		got[c.Seq] = c.Score
	}
	if len(got) != 4 || got[3] <= got[2] || got[2] <= got[1] || got[2] != got[4] {
		t.Errorf("Passages of one posting at 3 before 5 = %v, want 1..4 peaking at 3", got)
	}
	if _, ok := got[5]; ok {
		t.Error("Passages scored a message at before")
	}
}
