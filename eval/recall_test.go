package eval

import (
	"testing"

	"github.com/chatmem/chatmem"
)

// TestRecallAndBM25Rows: on the LoCoMo fixture at budgets that hold the
// last few turns, recall brings back turns the questions are about, which
// a recency window cannot, and the BM25 baseline gets a row per budget,
// within it.
func TestRecallAndBM25Rows(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	cfg := config([]chatmem.PolicyKind{chatmem.PolicyTokenBudget, chatmem.PolicyRecall}, []int{48, 64})
	cfg.BM25 = true
	res := run(t, d, cfg)
	rows := make(map[string]Row)
	for _, r := range res.Rows {
		rows[r.Label()] = r
		t.Logf("%-16s recall %.3f tokens %.1f", r.Label(), r.Overall.Recall, r.Overall.TokensMean)
	}
	for _, label := range []string{"token_budget@48", "recall@48", "bm25_turns@48", "bm25_turns@64"} {
		if _, ok := rows[label]; !ok {
			t.Fatalf("no row %s", label)
		}
	}
	for _, b := range []string{"48", "64"} {
		tb, rc, bm := rows["token_budget@"+b], rows["recall@"+b], rows["bm25_turns@"+b]
		if rc.Overall.Recall <= tb.Overall.Recall {
			t.Errorf("at %s tokens recall's evidence recall %.3f is not above the recency window's %.3f", b, rc.Overall.Recall, tb.Overall.Recall)
		}
		if bm.Overall.Recall <= 0 || bm.Overall.TokensMean > 64 {
			t.Errorf("bm25_turns@%s: recall %.3f, tokens %.1f; want some recall within the budget", b, bm.Overall.Recall, bm.Overall.TokensMean)
		}
		for _, r := range []Row{rc, bm} {
			if r.Overall.TokensP95 > map[string]int{"48": 48, "64": 64}[b] {
				t.Errorf("%s sends %d tokens at p95, over its budget", r.Label(), r.Overall.TokensP95)
			}
		}
	}
}
