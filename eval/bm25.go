package eval

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
)

// BM25Row is the policy name of the BM25 baseline's rows (Config.BM25).
const BM25Row = "bm25_turns"

// BM25 parameters: the usual defaults.
const bm25K1, bm25B = 1.2, 0.75

// bm25 scores every question of c under the BM25 baseline at each of
// r.bm25Rows' budgets, into out.
func (r *runner) bm25(ctx context.Context, c Conversation, tc *textCache, out [][]sample) error {
	msgs := c.Messages
	docs := make([]map[string]int, len(msgs))
	lens := make([]float64, len(msgs))
	tokens := make([]int, len(msgs))
	df := make(map[string]int)
	avg := 0.0
	for i, m := range msgs {
		n, err := r.cfg.Counter.Count(ctx, m)
		if err != nil {
			return err
		}
		tokens[i] = n
		docs[i] = make(map[string]int)
		for _, t := range allTerms(m.Content) {
			docs[i][t]++
			lens[i]++
		}
		for t := range docs[i] {
			df[t]++
		}
		avg += lens[i]
	}
	avg /= float64(max(len(msgs), 1))
	overhead := 0
	if o, ok := r.cfg.Counter.(chatmem.RequestOverhead); ok {
		overhead = o.RequestOverhead()
	}
	n := float64(len(msgs))
	type hit struct {
		i     int
		score float64
	}
	for _, q := range c.Questions {
		t0 := time.Now()
		scores := make([]float64, len(msgs))
		for _, t := range chatmem.Terms(q.Question) {
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			for i, d := range docs {
				if tf := float64(d[t]); tf > 0 {
					scores[i] += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*lens[i]/avg))
				}
			}
		}
		var hits []hit
		for i, s := range scores {
			if s > 0 {
				hits = append(hits, hit{i, s})
			}
		}
		slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Compare(b.score, a.score) })
		qTokens, err := r.cfg.Counter.Count(ctx, chatmem.Message{Role: chatmem.RoleUser, Content: q.Question})
		if err != nil {
			return err
		}
		dur := time.Since(t0)
		for k, ri := range r.bm25Rows {
			left := r.cfg.Budgets[k] - qTokens - overhead
			s := sample{category: q.Category, dur: dur, tokens: r.cfg.Budgets[k] - max(left, 0)}
			if left < 0 {
				s.failed = true
				left = 0
			}
			found := make(map[string]bool)
			var texts []tokenSet
			for _, h := range hits {
				if tokens[h.i] > left {
					continue
				}
				left -= tokens[h.i]
				s.tokens += tokens[h.i]
				id := msgs[h.i].Metadata[TurnKey]
				found[id] = true
				texts = append(texts, tc.get(id))
			}
			s.recall, s.hits, s.recallOK = EvidenceRecall(q.Evidence, found)
			s.evidence = len(q.Evidence)
			s.presence, s.presenceOK = AnswerPresence(Normalize(q.Answer), texts)
			out[ri] = append(out[ri], s)
		}
	}
	return nil
}

// allTerms is chatmem.Terms with repeats, for term frequencies.
func allTerms(text string) []string {
	var out []string
	for _, w := range strings.Fields(text) {
		out = append(out, chatmem.Terms(w)...)
	}
	return out
}
