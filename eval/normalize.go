package eval

import (
	"strings"
	"unicode"
)

// Normalize splits text into the tokens answer presence compares, as SQuAD's
// evaluation normalizes answers: lowercase, punctuation and symbols deleted
// (so "don't" is "dont" and "8 May, 2023" is "8 may 2023"), the articles
// a, an and the removed, split on white space.
func Normalize(text string) []string {
	var b strings.Builder
	b.Grow(len(text))
	for _, r := range strings.ToLower(text) {
		if unicode.IsPunct(r) || unicode.IsSymbol(r) {
			continue
		}
		b.WriteRune(r)
	}
	fields := strings.Fields(b.String())
	out := fields[:0]
	for _, f := range fields {
		if f != "a" && f != "an" && f != "the" {
			out = append(out, f)
		}
	}
	return out
}

// tokenSet is the set of normalized tokens of a text.
type tokenSet map[string]struct{}

func newTokenSet(text string) tokenSet {
	toks := Normalize(text)
	s := make(tokenSet, len(toks))
	for _, t := range toks {
		s[t] = struct{}{}
	}
	return s
}

// AnswerPresence returns the share of answer's normalized tokens (counted
// with repetition) found among the tokens of the context, given as the
// token sets of its parts. ok is false when the answer normalizes to
// nothing: such a question is not scored.
func AnswerPresence(answer []string, context []tokenSet) (share float64, ok bool) {
	if len(answer) == 0 {
		return 0, false
	}
	found := 0
	for _, t := range answer {
		for _, s := range context {
			if _, in := s[t]; in {
				found++
				break
			}
		}
	}
	return float64(found) / float64(len(answer)), true
}
