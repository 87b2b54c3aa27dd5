package eval

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// adversarial is LoCoMo's category of questions about things never said,
// which are reported apart from the rest.
const adversarial = 5

// fill computes the row's groups from its samples.
func (r *Row) fill(samples []sample) {
	var overall, adv []sample
	byCat := make(map[int][]sample)
	for _, s := range samples {
		if s.failed {
			r.Failed++
		}
		if s.category == adversarial {
			adv = append(adv, s)
			continue
		}
		overall = append(overall, s)
		if s.category != 0 {
			byCat[s.category] = append(byCat[s.category], s)
		}
	}
	r.Overall = group(overall)
	cats := make([]int, 0, len(byCat))
	for c := range byCat {
		cats = append(cats, c)
	}
	slices.Sort(cats)
	for _, c := range cats {
		g := group(byCat[c])
		g.Category = c
		r.Categories = append(r.Categories, g)
	}
	if len(adv) > 0 {
		g := group(adv)
		g.Category = adversarial
		r.Adversarial = &g
	}
}

// group computes the metrics over samples.
func group(samples []sample) Group {
	g := Group{Questions: len(samples)}
	tokens := make([]int, 0, len(samples))
	durs := make([]time.Duration, 0, len(samples))
	sumTokens := 0
	for _, s := range samples {
		if s.recallOK {
			g.RecallQuestions++
			g.Recall += s.recall
			if s.hits == s.evidence {
				g.AllHit++
			}
			if s.hits > 0 {
				g.AnyHit++
			}
		}
		if s.presenceOK {
			g.AnswerQuestions++
			g.AnswerPresence += s.presence
		}
		if s.summary {
			g.SummarySent++
		}
		tokens = append(tokens, s.tokens)
		sumTokens += s.tokens
		durs = append(durs, s.dur)
	}
	if g.RecallQuestions > 0 {
		n := float64(g.RecallQuestions)
		g.Recall, g.AllHit, g.AnyHit = g.Recall/n, g.AllHit/n, g.AnyHit/n
	}
	if g.AnswerQuestions > 0 {
		g.AnswerPresence /= float64(g.AnswerQuestions)
	}
	if len(samples) > 0 {
		g.TokensMean = float64(sumTokens) / float64(len(samples))
		g.SummarySent /= float64(len(samples))
		g.TokensP50, g.TokensP95 = Percentile(tokens, 0.50), Percentile(tokens, 0.95)
		g.AssemblyP50us = float64(Percentile(durs, 0.50).Nanoseconds()) / 1e3
		g.AssemblyP99us = float64(Percentile(durs, 0.99).Nanoseconds()) / 1e3
	}
	return g
}

// Percentile returns the nearest-rank q-quantile of xs (0 < q <= 1): the
// smallest value with at least q of the values at or below it. It returns
// the zero value for no values, and does not modify xs.
func Percentile[T cmp.Ordered](xs []T, q float64) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
