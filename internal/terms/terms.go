// Package terms is chatmem's text indexing: how a text splits into the
// search terms stores index messages under and recall and search look up
// (chatmem.Terms and chatmem.IndexTerms are its public face). A change
// here changes what every stored index holds: chatmem's reference test
// (terms_ref_test.go) pins it term for term.
package terms

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// MaxTermBytes drops longer words (hashes, base64, URLs run together): they
// are never what a question is about and would only bloat the index.
const MaxTermBytes = 48

// Set is the set of terms found so far: a scan of the few found first,
// a map once there are more. The zero value is empty.
type Set struct {
	small [termSetSmall]string
	n     int // of small in use
	large map[string]struct{}
}

const termSetSmall = 32

func (s *Set) has(w string) bool {
	if s.large != nil {
		_, ok := s.large[w]
		return ok
	}
	for _, t := range s.small[:s.n] {
		if t == w {
			return true
		}
	}
	return false
}

// hasBytes is has for a word not made a string yet.
func (s *Set) hasBytes(w []byte) bool {
	if s.large != nil {
		_, ok := s.large[string(w)]
		return ok
	}
	for _, t := range s.small[:s.n] {
		if t == string(w) {
			return true
		}
	}
	return false
}

func (s *Set) add(w string) {
	if s.large == nil && s.n < termSetSmall {
		s.small[s.n] = w
		s.n++
		return
	}
	if s.large == nil {
		s.large = make(map[string]struct{}, 2*termSetSmall)
		for _, t := range s.small {
			s.large[t] = struct{}{}
		}
	}
	s.large[w] = struct{}{}
}

// Append appends text's terms not in seen to out, up to limit terms in all.
// It builds each word in one reused buffer and looks it up (stop words, the
// stem cache, seen) without making a string of it: only a term not met
// before allocates.
func Append(out []string, text string, seen *Set, limit int) []string {
	if seen == nil {
		seen = new(Set)
	}
	var arr [64]byte
	b := arr[:0]
	flush := func() {
		w := b
		b = b[:0]
		for len(w) > 0 && w[0] == '\'' {
			w = w[1:]
		}
		for len(w) > 0 && w[len(w)-1] == '\'' {
			w = w[:len(w)-1]
		}
		if n := len(w); n >= 2 && w[n-2] == '\'' && w[n-1] == 's' {
			w = w[:n-2]
		}
		if !keepWordBytes(w) {
			return
		}
		var term string
		if isASCIILetterBytes(w) {
			if term = stem(w); term == "" || seen.has(term) {
				return
			}
		} else {
			if seen.hasBytes(w) {
				return
			}
			term = string(w)
		}
		seen.add(term)
		out = append(out, term)
	}
	for i := 0; i < len(text); {
		if len(out) >= limit {
			return out
		}
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		i += size
		switch {
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			b = append(b, byte(r))
		case 'A' <= r && r <= 'Z':
			b = append(b, byte(r)+('a'-'A'))
		case r < utf8.RuneSelf && r != '\'':
			if len(b) > 0 {
				flush()
			}
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b = utf8.AppendRune(b, unicode.ToLower(r))
		case r == '\'' || r == '’':
			if len(b) > 0 {
				b = append(b, '\'')
			}
		default:
			if len(b) > 0 {
				flush()
			}
		}
	}
	if len(b) > 0 && len(out) < limit {
		flush()
	}
	return out
}

// keepWordBytes reports whether w is worth indexing: not empty, not too
// long, not a stop word, and not a single letter.
func keepWordBytes(w []byte) bool {
	if len(w) == 0 || len(w) > MaxTermBytes || stopWords[string(w)] {
		return false
	}
	if utf8.RuneCount(w) == 1 {
		r, _ := utf8.DecodeRune(w)
		return unicode.IsDigit(r) || r > unicode.MaxLatin1 // a digit, or a CJK character
	}
	return true
}

func isASCIILetterBytes(w []byte) bool {
	for _, c := range w {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// IsStopWord reports whether w (lower case) is an English stop word,
// never a term.
func IsStopWord(w string) bool { return stopWords[w] }

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

func stem(w []byte) string {
	sh := &stems[uint(len(w)+int(w[0])+int(w[len(w)-1]))%uint(len(stems))]
	sh.Lock()
	st, ok := sh.m[string(w)]
	sh.Unlock()
	if ok {
		return st
	}
	word := string(w)
	st = english.Stem(word, true)
	sh.Lock()
	if sh.m == nil || len(sh.m) >= stemShardSize {
		sh.m = make(map[string]string, 256)
	}
	sh.m[word] = st
	sh.Unlock()
	return st
}
