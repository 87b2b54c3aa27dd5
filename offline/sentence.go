package offline

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// splitSentences splits text into sentences: after ".", "!", "?" or "…"
// (with any closing quotes or brackets) followed by a space, after the CJK
// and Devanagari full stops, and at line breaks. A period after a common
// abbreviation ("Mr.", "e.g.", "p.m.") or a single letter does not end a
// sentence, and neither does "no." or "Rs." before a number. Whitespace
// inside a sentence is collapsed to single spaces.
func splitSentences(text string) []string {
	var (
		out []string
		cur strings.Builder
	)
	flush := func() {
		if s := strings.Join(strings.Fields(cur.String()), " "); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029':
			flush()
			continue
		case r == '。' || r == '！' || r == '？' || r == '।' || r == '॥':
			cur.WriteRune(r)
			i += copyClosers(&cur, text[i:])
			flush()
			continue
		}
		cur.WriteRune(r)
		if r != '.' && r != '!' && r != '?' && r != '…' {
			continue
		}
		// Take the rest of a run like "?!" or "..." and any closers.
		for i < len(text) {
			r2, size2 := utf8.DecodeRuneInString(text[i:])
			if r2 != '.' && r2 != '!' && r2 != '?' && r2 != '…' {
				break
			}
			cur.WriteRune(r2)
			i += size2
		}
		i += copyClosers(&cur, text[i:])
		next, _ := utf8.DecodeRuneInString(text[i:])
		if i < len(text) && !unicode.IsSpace(next) {
			continue
		}
		if r == '.' && abbreviation(cur.String(), text[i:]) {
			continue
		}
		flush()
	}
	flush()
	return out
}

// copyClosers copies the closing quotes and brackets at the start of s into
// b and returns how many bytes it took.
func copyClosers(b *strings.Builder, s string) int {
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if !strings.ContainsRune(`"')]}”’»`, r) {
			break
		}
		b.WriteRune(r)
		n += size
	}
	return n
}

// abbrevs never end a sentence; abbrevsBeforeNumber do not when a number
// follows ("order no. 12345", "Rs. 249").
var (
	abbrevs = map[string]bool{
		"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "sr": true, "jr": true, "st": true,
		"vs": true, "etc": true, "e.g": true, "i.e": true, "approx": true, "inc": true, "ltd": true,
		"co": true, "dept": true, "a.m": true, "p.m": true, "u.s": true, "u.k": true,
	}
	abbrevsBeforeNumber = map[string]bool{"no": true, "nos": true, "rs": true, "nr": true, "vol": true, "p": true, "pp": true, "ph": true, "tel": true}
)

// abbreviation reports whether the period ending sentence belongs to an
// abbreviation rather than ending it; rest is the text after it.
func abbreviation(sentence, rest string) bool {
	s := strings.TrimRight(sentence, ".")
	word := s[strings.LastIndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '(' || r == '"' })+1:]
	w := strings.ToLower(word)
	if abbrevs[w] {
		return true
	}
	if utf8.RuneCountInString(w) == 1 && unicode.IsLetter([]rune(w)[0]) {
		return true // an initial: "J. Smith"
	}
	if abbrevsBeforeNumber[w] {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		return rest != "" && rest[0] >= '0' && rest[0] <= '9'
	}
	return false
}

// The features that make a sentence worth keeping. They are matched on the
// sentence with typographic apostrophes folded to ASCII.
var (
	reID = regexp.MustCompile(`(?:\b[A-Za-z]{1,6}[-_]?\d{3,}(?:[-_]?[A-Za-z0-9]+)*\b|\b\d{3,}[-_]?[A-Za-z]{1,6}\d+\b|#\d{3,}\b|` +
		`(?i:\b(?:order|ticket|invoice|case|ref|reference|booking|tracking|account|awb|pnr)\s*(?:number|no\.?|id|#)?\s*[:#]?\s*)\d{3,}\b|\b\d{5,}\b)`)
	reEmail = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	rePhone = regexp.MustCompile(phonePattern)
	reMoney = regexp.MustCompile(`(?i:[$€£¥₹]\s?\d[\d,]*(?:\.\d+)?|\b(?:rs|inr|usd|eur|gbp|aud|cad|sgd|aed|us\$)\.?\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s?(?:dollars?|euros?|rupees?|pounds?|usd|eur|inr|gbp|bucks)\b)`)
	months  = `(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?`
	reDate  = regexp.MustCompile(`(?i:\b\d{1,2}(?::\d{2})?\s?(?:(?:am|pm)\b|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|` +
		`\b(?:today|tomorrow|tonight|yesterday|noon|midnight|weekend)\b|\b(?:next|this|last)\s+(?:week|month|year)\b|` +
		`\b\d{1,2}(?:st|nd|rd|th)?\s+` + months + `(?:\s+\d{4})?\b|\b` + months + `\s+\d{1,2}(?:st|nd|rd|th)?\b(?:,?\s+\d{4})?|` +
		`\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d+\s+(?:minutes?|hours?|days?|weeks?|months?|years?|business\s+days)\b)`)
	reCommit = regexp.MustCompile(`(?i:\b(?:i will|i'll|we will|we'll|i'm going to|we're going to|i am going to|will be|should arrive|will arrive|` +
		`should be|should reach|will reach|please|can you|could you|would you|let me know|i need|i want|i'd like|i would like|` +
		`need to|remind|follow up|promise|refund|cancel|replace|return|deliver)\b)`)
	reNumber = regexp.MustCompile(`\d`)
	// rePleasantry matches the set phrases of politeness; see pleasantry.
	rePleasantry = regexp.MustCompile(`(?i:\b(?:is there anything else(?: (?:i|we) can (?:help|do|assist)(?: you)?(?: with)?)?|` +
		`anything else(?: (?:i|we) can (?:help|do|assist)(?: you)?(?: with)?)?|how (?:can|may) (?:i|we) (?:help|assist)(?: you)?|` +
		`(?:i'm |i am |we're |we are )?(?:happy|glad) to help|have a (?:great|good|nice|lovely) (?:day|evening|weekend|one)|` +
		`you're welcome|you are welcome|thank you(?: so much| very much)?|thanks(?: a lot| so much)?|no problem|my pleasure|` +
		`(?:i'm |i am |so |very )?sorry(?: about that| for the (?:trouble|inconvenience|delay|wait))?|` +
		`(?:we |i )?apologi[sz]e(?: for the (?:trouble|inconvenience|delay|wait))?|that's all|that is all|` +
		`let me know if you need anything(?: else)?|hello|hi there|good (?:morning|afternoon|evening)|bye|goodbye)(?: today)?\b)`)
)

// filler are words that open a sentence without adding to it ("Hi,",
// "Ok.", "Yes:"); stripFiller removes them from kept sentences.
var filler = map[string]bool{
	"hi": true, "hello": true, "hey": true, "ok": true, "okay": true, "oh": true, "well": true, "um": true,
	"uh": true, "so": true, "also": true, "yes": true, "sure": true, "great": true, "thanks": true,
	"alright": true, "right": true, "hmm": true, "dear": true, "cool": true, "perfect": true, "yeah": true,
	"wow": true, "whoa": true, "aw": true, "aww": true, "haha": true, "lol": true, "omg": true, "yay": true,
}

// pleasantryWords make up sentences that are pleasantry and nothing else
// ("Ok.", "Thanks a lot!", "Sorry Kavya!" once its name is set aside).
var pleasantryWords = map[string]bool{
	"hi": true, "hello": true, "hey": true, "ok": true, "okay": true, "thanks": true, "thank": true, "you": true,
	"so": true, "much": true, "a": true, "lot": true, "sorry": true, "great": true, "sure": true, "yes": true,
	"no": true, "problem": true, "cool": true, "awesome": true, "perfect": true, "fine": true, "good": true,
	"nice": true, "bye": true, "goodbye": true, "welcome": true, "got": true, "it": true, "noted": true,
	"understood": true, "alright": true, "right": true, "yeah": true, "yep": true, "nope": true, "there": true,
	"again": true, "very": true, "all": true, "the": true, "best": true, "cheers": true, "oh": true, "hmm": true,
	"morning": true, "evening": true, "afternoon": true, "dear": true, "sir": true, "madam": true, "ma'am": true,
	"really": true, "glad": true, "happy": true, "help": true, "to": true,
	// chit-chat agreement and praise ("No worries, Mel!", "I totally agree!")
	"agree": true, "agreed": true, "worries": true, "congrats": true, "congratulations": true, "sounds": true,
	"fun": true, "stoked": true, "wow": true, "amazing": true, "wonderful": true, "fantastic": true,
	"lovely": true, "sweet": true, "exactly": true, "totally": true, "absolutely": true, "definitely": true,
	"indeed": true, "true": true, "haha": true, "lol": true, "yay": true, "omg": true, "whoa": true,
	"cute": true, "beautiful": true, "love": true, "i": true, "me": true, "too": true, "that": true,
	"that's": true, "this": true, "is": true, "it's": true, "hear": true, "same": true, "cool,": true,
	"wish": true, "luck": true, "take": true, "care": true, "see": true, "soon": true, "talk": true, "later": true,
}

// stripFiller removes leading filler words with their punctuation ("Hi, ",
// "Ok. ", "Yes: ") and capitalizes what is left. It returns s unchanged if
// nothing else would be left.
func stripFiller(s string) string {
	out := s
	for {
		i := strings.IndexFunc(out, func(r rune) bool { return !unicode.IsLetter(r) })
		if i <= 0 || !filler[strings.ToLower(out[:i])] {
			break
		}
		rest := out[i:]
		// The word must be set off by punctuation, not run into the sentence
		// ("So the order..." keeps its "So"; "So, the order..." does not).
		p := strings.IndexFunc(rest, func(r rune) bool { return !strings.ContainsRune(",.!:;-–— ", r) })
		if p < 0 || !strings.ContainsAny(rest[:p], ",.!:;-–—") {
			break
		}
		out = rest[p:]
	}
	if out == s || out == "" {
		return s
	}
	r, size := utf8.DecodeRuneInString(out)
	return string(unicode.ToUpper(r)) + out[size:]
}

// entityWords are capitalized words that are not names: pronouns, days and
// months (dates count on their own), currencies and clock words.
var entityWords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`i i'm i'll i've i'd ok okay rs inr usd eur gbp am pm a.m p.m
		monday tuesday wednesday thursday friday saturday sunday january february march april may june
		july august september october november december mr mrs ms dr sir madam`) {
		m[w] = true
	}
	return m
}()

// names returns the words of s that look like names: capitalized words not
// at the start of the sentence (nor after a colon), and words with an inner
// capital ("DryFit") anywhere. Non-alphabetic and common words are skipped.
func names(s string) []string {
	var out []string
	fields := strings.Fields(s)
	for i, f := range fields {
		w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
		w = strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "'")
		if utf8.RuneCountInString(w) < 2 || strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' && r != '-' }) >= 0 {
			continue
		}
		if entityWords[strings.ToLower(w)] {
			continue
		}
		first, _ := utf8.DecodeRuneInString(w)
		inner := strings.IndexFunc(w[utf8.RuneLen(first):], unicode.IsUpper) >= 0 && hasLower(w)
		atStart := i == 0 || strings.HasSuffix(fields[i-1], ":") || strings.HasSuffix(fields[i-1], ".")
		if inner || unicode.IsUpper(first) && !atStart {
			out = append(out, w)
		}
	}
	return out
}

// features is what a sentence carries, found once when it is read.
type features struct {
	entities []string // IDs, emails, phones and names, as dedupe keys
	score    int
}

// Weights of the features in a sentence's score.
const (
	weightID       = 5
	weightContact  = 5
	weightName     = 3
	weightMoney    = 3
	weightDate     = 2
	weightCommit   = 2
	weightQuestion = 2
	weightNumber   = 1
	weightUser     = 1 // the user's own words, when they carry something
)

// scoreSentence finds the features of s, spoken by role. A sentence with no
// feature, or pleasantry alone, scores 0 and is never kept.
func scoreSentence(role, s string) features {
	t := strings.ReplaceAll(s, "’", "'")
	var f features
	add := func(kind string, vals []string) {
		for _, v := range vals {
			f.entities = append(f.entities, kind+":"+v)
		}
	}
	ids := reID.FindAllString(t, -1)
	for i, id := range ids {
		ids[i] = normalizeID(id)
	}
	emails := reEmail.FindAllString(t, -1)
	var phones []string
	for _, m := range rePhone.FindAllStringSubmatch(t, -1) {
		if p, ok := checkPhone(m[1]); ok {
			phones = append(phones, digitsOf(p))
		}
	}
	nms := names(t)
	add("id", ids)
	add("email", emails)
	add("phone", phones)
	add("name", nms)
	money := reMoney.MatchString(t)
	date := reDate.MatchString(t)
	if len(ids) > 0 {
		f.score += weightID
	}
	if len(emails)+len(phones) > 0 {
		f.score += weightContact
	}
	if len(nms) > 0 {
		f.score += weightName
	}
	if money {
		f.score += weightMoney
	}
	if date {
		f.score += weightDate
	}
	if f.score == 0 && reNumber.MatchString(t) {
		f.score += weightNumber
	}
	if reCommit.MatchString(t) {
		f.score += weightCommit
	}
	if strings.HasSuffix(strings.TrimRight(t, `"')]}”’» `), "?") {
		f.score += weightQuestion
	}
	if pleasantry(t, nms) {
		return features{}
	}
	if f.score > 0 && role == "user" {
		f.score += weightUser
	}
	return f
}

// pleasantry reports whether s is politeness only: once its set phrases
// ("thank you", "how can I help you today") are taken out, nothing is left
// but pleasantry words and names ("Sorry Kavya!"). A sentence with a digit
// or an email, or one that introduces someone, is never a pleasantry.
func pleasantry(s string, nms []string) bool {
	if strings.ContainsAny(s, "0123456789@") || introduces(s) {
		return false
	}
	isName := make(map[string]bool, len(nms))
	for _, n := range nms {
		isName[n] = true
	}
	rest := rePleasantry.ReplaceAllString(s, " ")
	for _, w := range strings.FieldsFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
		if !pleasantryWords[strings.ToLower(w)] && !isName[w] {
			return false
		}
	}
	return true
}

// normalizeID makes "se-10423", "#10423" and "order no. 10423" one entity.
func normalizeID(id string) string {
	if i := strings.LastIndexFunc(id, func(r rune) bool { return r == ' ' || r == '#' || r == ':' }); i >= 0 {
		id = id[i+1:]
	}
	return strings.ToUpper(id)
}

func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// nameRules are the default name rules, for introduces.
var nameRules = func() []Rule {
	var out []Rule
	for _, r := range DefaultRules() {
		if r.Key == "name" {
			out = append(out, r)
		}
	}
	return out
}()

// introduces reports whether s introduces someone ("Hi, I'm Kavya"): a
// greeting around it does not make it a pleasantry.
func introduces(s string) bool {
	for _, r := range nameRules {
		for _, m := range r.Pattern.FindAllStringSubmatch(s, -1) {
			if _, ok := r.Check(m[r.Pattern.SubexpIndex("value")]); ok {
				return true
			}
		}
	}
	return false
}

// minClauseChars is the shortest clause splitClauses makes a sentence of.
const minClauseChars = 20

// clauseSeparators set off the clauses splitClauses splits at.
var clauseSeparators = []string{" - ", " – ", " — ", "; "}

// splitClauses splits a long statement into its clauses (at a dash or a
// semicolon; commas set off too much that means nothing alone), each ended as a
// sentence ("I'm keen on counseling - I'd love to help." gives "I'm keen
// on counseling." and "I'd love to help."), so that the summary can keep
// the clause that tells something without the one that does not. A
// question, a short sentence, or one whose clauses would be shorter than
// minClauseChars stays whole.
func splitClauses(s string) []string {
	if utf8.RuneCountInString(s) < 2*minClauseChars || strings.HasSuffix(strings.TrimRight(s, `"')]}”’» `), "?") {
		return []string{s}
	}
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		for _, sep := range clauseSeparators {
			if !strings.HasPrefix(s[i:], sep) {
				continue
			}
			head, tail := strings.TrimSpace(s[start:i]), strings.TrimSpace(s[i+len(sep):])
			if utf8.RuneCountInString(head) >= minClauseChars && utf8.RuneCountInString(tail) >= minClauseChars {
				out = append(out, capitalize(endSentence(head)))
				start = i + len(sep)
			}
			break
		}
	}
	if len(out) == 0 {
		return []string{s}
	}
	return append(out, capitalize(strings.TrimSpace(s[start:])))
}

func capitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}

// endSentence ends a clause with a period unless it ends with punctuation.
func endSentence(s string) string {
	r, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsPunct(r) && r != ',' && r != ')' && r != '"' {
		return s
	}
	return strings.TrimRight(s, ",") + "."
}

// reHollow matches words and phrases that add nothing a summary needs:
// intensifiers and hedges ("really", "so", "kinda"), and openers ("By the
// way,", "Guess what?"). compress removes them.
var reHollow = regexp.MustCompile(`(?i)(?:^|\b)(?:(?:by the way|anyway|on a different note|on another note|guess what|you know what|oh|wow|aw+|yeah|hey|haha|lol|omg|whoa)[,!.?]*\s+|` +
	`(?:really|so|just|super|totally|pretty|very|actually|kinda|kind of|sort of|definitely|absolutely|literally|honestly|basically|truly)\s+)`)

// compress removes from s what reHollow matches and the names of the
// speakers when they only address someone ("Thanks, Mel!", "Caroline, look
// at this"), and capitalizes what then starts the sentence. It returns s
// unchanged if little would be left.
func compress(s string, speakers map[string]bool) string {
	out := reHollow.ReplaceAllStringFunc(s, func(m string) string {
		if strings.ContainsAny(m, "0123456789") {
			return m
		}
		return ""
	})
	if len(speakers) > 0 {
		out = reVocative.ReplaceAllStringFunc(out, func(m string) string {
			name := strings.Trim(m, " ,!.?")
			if !speakerName(name, speakers) {
				return m
			}
			switch {
			case strings.HasPrefix(m, ","): // ", Mel!" -> "!"
				return strings.TrimLeft(strings.TrimPrefix(m, ","), " ")[len(name):]
			default: // "Mel, " at the start
				return ""
			}
		})
	}
	out = strings.Join(strings.Fields(out), " ")
	if utf8.RuneCountInString(out) < minClauseChars/2 {
		return s
	}
	if strings.HasPrefix(s, out) || strings.Fields(s)[0] == strings.Fields(out)[0] {
		return out // the same start: as it was written
	}
	return capitalize(out)
}

// reVocative matches a capitalized word set off as someone addressed: ",
// Mel!" (before the end of a clause) or "Mel, " at the start.
var reVocative = regexp.MustCompile(`,\s*\p{Lu}\p{Ll}+[!.?,]|^\p{Lu}\p{Ll}+,\s+`)
