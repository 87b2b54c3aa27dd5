package offline

import (
	"regexp"
	"strings"
)

// relations are the people a user speaks for besides themselves, in the
// languages the rules know: a value said of them is not the user's own.
const relations = `wife|husband|partner|son|daughter|kids?|child|children|friend|mom|mum|mother|dad|father|brother|sister|` +
	`colleague|co-?worker|boss|manager|neighbou?r|grand(?:mother|father|ma|pa)|aunt|uncle|cousin|girlfriend|boyfriend|fianc[ée]e?|` +
	`esposa|esposo|marido|mujer|hij[oa]|amig[oa]|madre|padre|herman[oa]|jefe|` +
	`femme|mari|fils|fille|amie?|mère|père|frère|s[œo]eur|patron|collègue|` +
	`frau|mann|sohn|tochter|freund(?:in)?|mutter|vater|bruder|schwester|chef(?:in)?|kolleg(?:e|in)|` +
	`filh[oa]|mãe|pai|irmão|irmã|chefe|` +
	`moglie|marito|figli[oa]|amic[oa]|fratello|sorella|capo|collega`

// negated matches a word that negates what follows it in its clause.
var negated = regexp.MustCompile(`(?i)(?:^|[^\p{L}])(?:not|don['’]?t|do\s+not|never|no\s+longer|isn['’]?t|wasn['’]?t|won['’]?t|can['’]?t|cannot|didn['’]?t|doesn['’]?t|shouldn['’]?t|no|nicht|kein\p{L}*|nie|niemals|pas|jamais|nunca|não|nao|non|ne|n['’]|mai)(?:[^\p{L}]|$)`)

// past matches a word that marks a value as no longer current.
var past = regexp.MustCompile(`(?i)(?:^|[^\p{L}])(?:old|previous|former|earlier|used\s+to|antigu[oa]|anterior|ancienne?|alte[nrms]?|frühere?[nrms]?|vecchi[oa]|precedente)(?:[^\p{L}]|$)`)

// someoneElse matches, before a value in its clause, words that give it to
// another person: "my wife's", "his", "Ravi's".
var someoneElse = regexp.MustCompile(`(?i)(?:^|[^\p{L}])(?:his|her|hers|their|he|she|they|him|them|su|sus|él|ella|sa|ses|elle|sein\p{L}*|ihr\p{L}*|seu|sua|dele|dela|suo|` +
	`(?:my|our|mi|mis|ma|mon|mes|nuestr[oa]|notre|mein\p{L}*|unser\p{L}*|meu|minha|nosso|nossa|mio|mia|nostr[oa])\s+(?:` + relations + `)(?:['’]s)?|` +
	`(?:` + relations + `)['’]s)(?:[^\p{L}]|$)` + `|\p{Lu}\p{Ll}+['’]s(?:[^\p{L}]|$)`)

// possessiveNotOther are capitalized words ending in 's that are
// contractions, not someone's possessive.
var possessiveNotOther = regexp.MustCompile(`(?i)\b(?:it|that|what|here|there|let|he|she|who|where|how)['’]s\b`)

// forSomeoneElse matches, right after a value, "for my wife" and the like.
var forSomeoneElse = regexp.MustCompile(`(?i)^[\s,]*(?:for|para|pour|für|per)\s+(?:my|his|her|their|mi|ma|mon|mein\p{L}*|meu|minha|mio|mia|la\s+mia|il\s+mio)\s+(?:` + relations + `)(?:[^\p{L}]|$)`)

// clauseStart returns where the clause holding text[i] begins: after the
// previous comma, semicolon, colon, line break, sentence end or "but".
func clauseStart(text string, i int) int {
	start := 0
	for j := i - 1; j >= 0; j-- {
		c := text[j]
		if c == ',' || c == ';' || c == '\n' || c == '!' || c == '?' {
			start = j + 1
			break
		}
		if (c == '.') && j+1 < len(text) && (text[j+1] == ' ' || text[j+1] == '\n') {
			start = j + 1
			break
		}
	}
	prefix := strings.ToLower(text[start:i])
	for _, but := range []string{" but ", " pero ", " mais ", " aber ", " mas ", " ma ", " and "} {
		if k := strings.LastIndex(prefix, but); k >= 0 {
			start += k + len(but)
			prefix = prefix[k+len(but):]
		}
	}
	return start
}

// clauseEnd returns where the clause holding text[i] ends.
func clauseEnd(text string, i int) int {
	for j := i; j < len(text); j++ {
		switch text[j] {
		case ',', ';', '\n', '!', '?':
			return j
		case '.':
			if j+1 == len(text) || text[j+1] == ' ' || text[j+1] == '\n' {
				return j
			}
		}
	}
	return len(text)
}

// guarded reports whether the match text[start:end] is negated, past or
// someone else's by the words of its clause before it, or given to someone
// else right after it.
func guarded(text string, start, end int) bool {
	prefix := text[clauseStart(text, start):start]
	if negated.MatchString(prefix) || past.MatchString(prefix) {
		return true
	}
	if someoneElse.MatchString(possessiveNotOther.ReplaceAllString(prefix, " ")) {
		return true
	}
	return forSomeoneElse.MatchString(text[end:clauseEnd(text, end)])
}

// inQuestion reports whether the sentence holding text[i] ends with a
// question mark.
func inQuestion(text string, i int) bool {
	for j := i; j < len(text); j++ {
		switch text[j] {
		case '?':
			return true
		case '!', '\n':
			return false
		case '.':
			if j+1 == len(text) || text[j+1] == ' ' {
				return false
			}
		}
	}
	return false
}

// selfWords are the words by which a user speaks of themselves, in the
// languages the rules know.
var selfWords = regexp.MustCompile(`(?i)(?:^|[^\p{L}])(?:i|i['’](?:m|ve|d|ll)|me|my|mine|myself|we|us|our|ours|` +
	`yo|mi|mis|mí|nosotros|nosotras|nuestro|nuestra|` +
	`je|j['’]|moi|mon|ma|mes|nous|notre|nos|` +
	`ich|mich|mir|mein|meine|meinen|meinem|meiner|wir|uns|unser|unsere|` +
	`eu|meu|minha|meus|minhas|nós|nosso|nossa|` +
	`io|mio|mia|miei|mie|noi|ci|nostro|nostra)(?:[^\p{L}]|$)`)

// selfInSentence reports whether the sentence holding text[i] speaks of
// the user: it holds one of selfWords.
func selfInSentence(text string, i int) bool {
	start := 0
	for j := i - 1; j >= 0; j-- {
		if c := text[j]; c == '?' || c == '!' || c == '\n' || c == '.' && j+1 < len(text) && text[j+1] == ' ' {
			start = j + 1
			break
		}
	}
	end := len(text)
	for j := i; j < len(text); j++ {
		if text[j] == '?' || text[j] == '!' || text[j] == '\n' {
			end = j
			break
		}
	}
	return selfWords.MatchString(text[start:end])
}
