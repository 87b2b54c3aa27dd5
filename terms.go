package chatmem

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// MaxIndexTerms caps the terms IndexTerms returns for one message: a very
// long message is indexed under the first MaxIndexTerms distinct terms it
// has.
const MaxIndexTerms = 512

// maxTermBytes drops longer words (hashes, base64, URLs run together): they
// are never what a question is about and would only bloat the index.
const maxTermBytes = 48

// Terms returns the distinct search terms of text, in order of first
// appearance: words and numbers, lower-cased, without English stop words,
// stemmed with the Snowball English stemmer ("ordered" and "orders" are both
// "order"). Identifiers split at punctuation: "SE-10423" is "se" and
// "10423". Stores index messages by these terms and PolicyRecall searches
// them, so both sides agree on what a word is.
func Terms(text string) []string {
	return appendTerms(nil, text, nil, MaxIndexTerms)
}

// IndexTerms returns the terms a store indexes m under: those of its content
// and of its tool calls' names and arguments, at most MaxIndexTerms. System
// messages are pinned into every window and never searched: they have none.
func IndexTerms(m Message) []string {
	if m.Role == RoleSystem {
		return nil
	}
	seen := make(map[string]bool)
	out := appendTerms(nil, m.Content, seen, MaxIndexTerms)
	for _, c := range m.ToolCalls {
		out = appendTerms(out, c.Function.Name, seen, MaxIndexTerms)
		out = appendTerms(out, c.Function.Arguments, seen, MaxIndexTerms)
	}
	return out
}

// appendTerms appends text's terms not in seen to out, up to limit terms in
// all.
func appendTerms(out []string, text string, seen map[string]bool, limit int) []string {
	if seen == nil {
		seen = make(map[string]bool)
	}
	var b strings.Builder
	flush := func() {
		w := b.String()
		b.Reset()
		w = strings.Trim(w, "'")
		w = strings.TrimSuffix(w, "'s")
		if !keepWord(w) {
			return
		}
		if isASCIILetters(w) {
			w = stem(w)
		}
		if w == "" || seen[w] {
			return
		}
		seen[w] = true
		out = append(out, w)
	}
	for _, r := range text {
		if len(out) >= limit {
			return out
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case r == '\'' || r == '’':
			if b.Len() > 0 {
				b.WriteByte('\'')
			}
		default:
			if b.Len() > 0 {
				flush()
			}
		}
	}
	if b.Len() > 0 && len(out) < limit {
		flush()
	}
	return out
}

// keepWord reports whether w is worth indexing: not empty, not too long,
// not a stop word, and not a single letter.
func keepWord(w string) bool {
	if w == "" || len(w) > maxTermBytes || stopWords[w] {
		return false
	}
	if utf8.RuneCountInString(w) == 1 {
		r, _ := utf8.DecodeRuneInString(w)
		return unicode.IsDigit(r) || r > unicode.MaxLatin1 // a digit, or a CJK character
	}
	return true
}

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// stopWords are English function words and chat fillers: they match nearly
// every message and carry nothing a search could use.
var stopWords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`a about above after again against all am an and any are aren't as at be
		because been before being below between both but by can can't cannot could couldn't did didn't do does
		doesn't doing don't down during each few for from further had hadn't has hasn't have haven't having he
		he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is
		isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only or other
		ought our ours ourselves out over own same shan't she she'd she'll she's should shouldn't so some such
		than that that's the their theirs them themselves then there there's these they they'd they'll they're
		they've this those through to too under until up very was wasn't we we'd we'll we're we've were weren't
		what what's when when's where where's which while who who's whom why why's with won't would wouldn't you
		you'd you'll you're you've your yours yourself yourselves also just really yeah yes oh wow like get got
		much many thing things one lot ok okay`) {
		m[w] = true
	}
	return m
}()

// stems caches the Snowball stems of recent words: stemming is most of
// what indexing a message costs, and chat vocabulary repeats. It is
// sharded to keep concurrent appends apart, and each shard is cleared when
// full, so its size stays bounded whatever the text.
var stems [16]struct {
	sync.Mutex
	m map[string]string
}

const stemShardSize = 8192

func stem(w string) string {
	sh := &stems[uint(len(w)+int(w[0])+int(w[len(w)-1]))%uint(len(stems))]
	sh.Lock()
	st, ok := sh.m[w]
	sh.Unlock()
	if ok {
		return st
	}
	st = english.Stem(w, true)
	sh.Lock()
	if sh.m == nil || len(sh.m) >= stemShardSize {
		sh.m = make(map[string]string, 256)
	}
	sh.m[w] = st
	sh.Unlock()
	return st
}
