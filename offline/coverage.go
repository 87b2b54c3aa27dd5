package offline

import (
	"cmp"
	"container/heap"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The summary is chosen as a budgeted coverage problem: each sentence
// carries concepts (its content words, names, numbers, dates, IDs and
// contacts, each with a weight), and under the character cap the summary
// takes, again and again, the unit (a sentence, or a question with its
// answer) that adds the most weight not yet covered per character it
// costs. A sentence that only repeats what is in already adds nothing, so
// the room goes to facts not yet kept, from any part of the conversation;
// since a rolling summary's own lines are candidates again, scored the
// same way, what it kept stays unless something adds more per character.

// Weights of a sentence's concepts.
const (
	conceptWord    = 1.0 // a content word: not a function word, not a pleasantry
	conceptNumber  = 2.0 // a number ("3", "2016")
	conceptName    = 3.0 // a capitalized word inside a sentence ("Sweden", "DryFit")
	conceptDate    = 2.0 // a date or time expression ("8 May", "last Friday")
	conceptContact = 8.0 // an ID, an email, a phone number
	// featureShare is how much of the sentence's feature score (see
	// scoreSentence: commitments, questions, the user's own words) counts
	// besides its concepts.
	featureShare = 0.5
	// unitOverhead is added to a unit's length when its gain per
	// character is reckoned, so that a one-word aside ("Stoked!") does not
	// beat a sentence that tells more at almost the same rate.
	unitOverhead = 10
)

// functionWords are English words that carry no fact of their own, left
// out of a sentence's concepts (with the stopwords of the other languages
// the language detector knows).
var functionWords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`a an the and or but if so as of to in on at by for from with about into over
		after before than then too very just also only even still again there here this that these those
		it its it's i i'm i've i'd i'll me my mine myself you you're you've you'd you'll your yours yourself
		we we're we've our ours us they they're their them he he's his him she she's her hers who whom whose
		what what's which where when why how whatever is are was were be been being am do does did doing done
		have has had having can could would should will shall may might must not no nor don't doesn't didn't
		isn't aren't wasn't weren't can't couldn't won't wouldn't shouldn't haven't hasn't hadn't let's that's
		there's here's all any some each every both more most much many few lot lots such own same other
		really so quite pretty kind sort thing things stuff way ways something anything everything nothing
		one ones get got getting gets go going goes went gone make made makes making see saw seen look looking
		know knew think thought feel felt say said tell told want wanted like liked love loved lol yeah yes
		wow oh ah hey hi hello thanks thank great good nice awesome cool amazing glad happy sure okay ok
		well now time times day today always never ever sometimes often also though although because while
		up down out off just totally definitely absolutely especially super`) {
		m[w] = true
	}
	for w := range stopwordLangs {
		m[w] = true
	}
	return m
}()

// conceptsOf returns the weighted concepts of sentence s (already scored
// into f): its entities (minus the names of the conversation's speakers,
// which say nothing new), its dates, numbers and content words, each once.
func conceptsOf(s string, f features, speakers map[string]bool) map[string]float64 {
	c := make(map[string]float64)
	for _, e := range f.entities {
		kind, v, _ := strings.Cut(e, ":")
		if kind == "name" {
			if speakerName(v, speakers) {
				continue
			}
			c["w:"+stem(strings.ToLower(v))] = conceptName
			continue
		}
		c[e] = conceptContact
	}
	t := strings.ReplaceAll(s, "’", "'")
	for _, d := range reDate.FindAllString(t, -1) {
		c["d:"+strings.ToLower(d)] = conceptDate
	}
	for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	}) {
		w = strings.TrimSuffix(strings.Trim(w, "'"), "'s")
		if w == "" || functionWords[w] || pleasantryWords[w] || speakers[w] {
			continue
		}
		key := "w:" + stem(w)
		if _, ok := c[key]; ok {
			continue
		}
		switch {
		case strings.IndexFunc(w, unicode.IsDigit) >= 0:
			c[key] = conceptNumber
		case utf8.RuneCountInString(w) >= 3 || !isLatin(w):
			c[key] = conceptWord
		}
	}
	return c
}

// Stance multipliers of a sentence's concepts: what speakers say of
// themselves ("I took this photo at Whispering Falls") is what a
// conversation's summary is asked about; a remark about the one spoken to
// ("Wow, you're killing it!") seldom is.
var (
	stanceSelf  = 1.5
	stanceOther = 0.5
)

var (
	reFirstPerson  = regexp.MustCompile(`(?i)\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|our|us)\b`)
	reSecondPerson = regexp.MustCompile(`(?i)\b(?:you|you're|you've|your|yours)\b`)
)

// stanceOf returns the multiplier of s's concepts (see stanceSelf).
func stanceOf(s string) float64 {
	t := strings.ReplaceAll(s, "’", "'")
	switch {
	case reFirstPerson.MatchString(t):
		return stanceSelf
	case reSecondPerson.MatchString(t):
		return stanceOther
	}
	return 1
}

// speakerName reports whether name is one of the speakers' names, or a
// short form of one ("Mel" for "Melanie").
func speakerName(name string, speakers map[string]bool) bool {
	n := strings.ToLower(name)
	if speakers[n] {
		return true
	}
	if utf8.RuneCountInString(n) < 3 {
		return false
	}
	for s := range speakers {
		if strings.HasPrefix(s, n) {
			return true
		}
	}
	return false
}

// onlySpeakerNames reports whether entities hold names, all of them the
// speakers'.
func onlySpeakerNames(entities []string, speakers map[string]bool) bool {
	names := 0
	for _, e := range entities {
		if v, ok := strings.CutPrefix(e, "name:"); ok {
			if !speakerName(v, speakers) {
				return false
			}
			names++
		}
	}
	return names > 0
}

func isLatin(w string) bool {
	for _, r := range w {
		if r > unicode.MaxLatin1 && !unicode.Is(unicode.Latin, r) {
			return false
		}
	}
	return true
}

// coverItem is one unit in the greedy choice: a candidate, or a question
// with its answer.
type coverItem struct {
	members []int
	ratio   float64 // the gain per character when last computed
	stamp   int     // the number of units chosen when ratio was computed
}

type coverHeap []*coverItem

func (h coverHeap) Len() int { return len(h) }
func (h coverHeap) Less(i, j int) bool {
	if h[i].ratio != h[j].ratio {
		return h[i].ratio > h[j].ratio
	}
	return h[i].members[0] > h[j].members[0] // newer first at equal ratio
}
func (h coverHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *coverHeap) Push(x any)   { *h = append(*h, x.(*coverItem)) }
func (h *coverHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// selectSentences picks the candidates to keep within maxChars (negative:
// no cap) and returns them in conversation order. It is greedy coverage
// (see the top of this file), lazily re-reckoned: the unit that adds the most uncovered concept weight
// per character goes in next, a question with its answer as one unit, a
// dated line with its date heading; once nothing adds anything, what room
// is left takes the remaining sentences by score, newer before older.
func selectSentences(cands []candidate, maxChars int) []candidate {
	used := -1 // the first line has no newline before it
	open := make(map[int]bool)
	keep := make([]bool, len(cands))
	covered := make(map[string]bool)
	cost := func(members []int) int {
		n := 0
		opened := make(map[int]bool)
		for _, k := range members {
			if keep[k] {
				continue
			}
			c := cands[k]
			if h := c.head; h >= 0 && !keep[h] && !opened[cands[h].group] {
				opened[cands[h].group] = true
				n += utf8.RuneCountInString(cands[h].text) + 1
			}
			n += utf8.RuneCountInString(c.text) + 1 // and a space or a newline
			if !open[c.group] && !opened[c.group] && c.role != "" {
				n += len(c.role) + 2
			}
			opened[c.group] = true
		}
		return n
	}
	gain := func(members []int) float64 {
		g := 0.0
		seen := make(map[string]bool)
		add := func(cs map[string]float64, m float64) {
			for k, w := range cs {
				if !covered[k] && !seen[k] {
					seen[k] = true
					g += w * m
				}
			}
		}
		for _, k := range members {
			if keep[k] {
				continue
			}
			c := cands[k]
			add(c.concepts, c.stance)
			g += featureShare * float64(c.score)
			if h := c.head; h >= 0 && !keep[h] {
				add(cands[h].concepts, 1)
			}
		}
		return g
	}
	fits := func(n int) bool { return maxChars < 0 || used+n <= maxChars }
	take := func(members []int) {
		used += cost(members)
		for _, k := range members {
			if keep[k] {
				continue
			}
			if h := cands[k].head; h >= 0 && !keep[h] {
				keep[h] = true
				open[cands[h].group] = true
				for c := range cands[h].concepts {
					covered[c] = true
				}
			}
			keep[k] = true
			open[cands[k].group] = true
			for c := range cands[k].concepts {
				covered[c] = true
			}
		}
	}
	// At a small cap the open request goes in first, alone: such a
	// summary cannot stand for the whole history, and what the messages
	// after it carry on is what they need most. Its answer then competes
	// like any other sentence, but nothing said after the request goes in
	// without it, so that the request is followed by its own answer or
	// ends the summary.
	after, answer := math.MaxInt, -1
	if o := slices.IndexFunc(cands, func(c candidate) bool { return c.open }); o >= 0 && maxChars >= 0 && maxChars < smallSummaryChars && fits(cost([]int{o})) {
		take([]int{o})
		if a := cands[o].pair; a > o {
			after, answer = cands[o].group, a
		}
	}
	var units [][]int
	for i, c := range cands {
		var u []int
		switch {
		case c.heading:
			continue
		case c.pair < 0:
			u = []int{i}
		case c.pair > i:
			u = []int{i, c.pair} // a question, only with its answer
		default:
			u = []int{i} // an answer, also without its question
		}
		if c.group > after && !slices.Contains(u, answer) {
			u = append([]int{answer}, u...)
		}
		units = append(units, u)
	}
	h := make(coverHeap, 0, len(units))
	for _, u := range units {
		h = append(h, &coverItem{members: u, ratio: gain(u) / float64(cost(u)+unitOverhead)})
	}
	heap.Init(&h)
	chosen := 0
	var rest [][]int
	for h.Len() > 0 {
		it := heap.Pop(&h).(*coverItem)
		if it.stamp != chosen {
			it.ratio, it.stamp = gain(it.members)/float64(cost(it.members)+unitOverhead), chosen
			heap.Push(&h, it)
			continue
		}
		n := cost(it.members)
		if !fits(n) {
			continue
		}
		if !hasNew(it.members, cands, covered) {
			rest = append(rest, it.members) // adds nothing new: only if room is left
			continue
		}
		take(it.members)
		chosen++
	}
	// Room left: the rest by score, newer first at equal score.
	slices.SortStableFunc(rest, func(a, b []int) int {
		return cmp.Or(cmp.Compare(cands[b[0]].score, cands[a[0]].score), cmp.Compare(b[0], a[0]))
	})
	kept := make(map[string]bool)
	for i, c := range cands {
		if keep[i] {
			kept[c.role+":"+c.text] = true
		}
	}
	for _, u := range rest {
		if n := cost(u); fits(n) && !slices.ContainsFunc(u, func(k int) bool { return !keep[k] && kept[cands[k].role+":"+cands[k].text] }) {
			take(u)
			for _, k := range u {
				kept[cands[k].role+":"+cands[k].text] = true
			}
		}
	}
	// The newest date heading goes in, if it fits: the next summary
	// dates what follows it by that heading.
	for i := len(cands) - 1; i >= 0; i-- {
		if cands[i].heading {
			if n := utf8.RuneCountInString(cands[i].text) + 1; !keep[i] && fits(n) {
				used += n
				keep[i] = true
			}
			break
		}
	}
	var out []candidate
	for i, c := range cands {
		if keep[i] {
			out = append(out, c)
		}
	}
	return out
}

// smallSummaryChars is the cap below which a summary keeps the open
// request first: about two of the longest sentences kept whole, about 150
// tokens with chatmem's header (summary_buffer budgets under 270 tokens).
// Above it the summary is chosen by coverage alone: on LoCoMo
// (docs/evaluation.md), keeping the open request first there too cost
// answer presence at every budget from 512 to 4,096 tokens (0.354 to 0.350
// at 512), as questions about the past reward covering more of it.
const smallSummaryChars = 2 * maxSentenceChars

// hasNew reports whether any of members carries a concept not covered.
func hasNew(members []int, cands []candidate, covered map[string]bool) bool {
	for _, k := range members {
		for c := range cands[k].concepts {
			if !covered[c] {
				return true
			}
		}
	}
	return false
}

// stem folds the common English endings of w, so that "paintings" and
// "painted" are one concept with "painting".
func stem(w string) string {
	for _, suf := range []string{"ings", "ing", "ies", "es", "ed", "s"} {
		if base, ok := strings.CutSuffix(w, suf); ok && utf8.RuneCountInString(base) >= 4 {
			return base
		}
	}
	return w
}
