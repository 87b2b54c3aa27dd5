package offline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
)

// Rule is one named regular expression: every match in a user message
// becomes a fact Key = value. The value is the subexpression named "value"
// when Pattern has one, else submatch Group (0: the whole match).
type Rule struct {
	Key     string
	Pattern *regexp.Regexp
	Group   int
	// Confidence is given to every fact the rule finds, in (0, 1]. Where
	// two rules capture overlapping text, the more confident one wins.
	Confidence float64
	// Check, if set, vets a captured value: it returns the value to store
	// (possibly trimmed or normalized) and whether to keep it at all.
	Check func(value string) (string, bool)
	// NotInQuestion drops a match in a sentence that ends with a question
	// mark: "Do you ship to 14 Lake Road?" states no address.
	NotInQuestion bool
	// QuestionAboutSelf drops a match in a question that does not speak
	// of the user (no "I", "me", "my", "we", ... in any language the rules
	// know): "Can I get 200 dollars back?" is about the user's money, "Is
	// the CushionRun Rs 1,499?" quotes a price.
	QuestionAboutSelf bool
}

// RulesOptions configures a Rules extractor. The zero value applies the
// rules only.
type RulesOptions struct {
	// Language adds a "written_language" fact to each user message
	// DetectLanguage is confident about: the language the message is
	// written in, which is not the language the user asks to be answered
	// in (the "language" fact of DefaultRules).
	Language bool
}

// Rules is an Extractor that applies regular expressions, and optionally a
// language detector, to user messages only: what the assistant, a tool or
// the system says is never taken as a fact about the user. A match is
// dropped when its clause (the text back to the previous comma, semicolon,
// sentence end or "but") negates it ("please don't deliver to ..."), gives
// it to someone else ("my wife's email is ...", "his number is ...",
// "... for my son") or marks it as past ("my old address was ..."). It
// needs no model and is safe for concurrent use.
type Rules struct {
	rules    []Rule
	groups   []int // the submatch each rule's value comes from
	language bool
}

var _ chatmem.Extractor = (*Rules)(nil)

// NewRules returns an extractor that applies rules in order. It returns an
// error wrapping chatmem.ErrInvalid for a rule with an invalid key, no
// pattern, a group the pattern does not have, or a confidence outside
// (0, 1].
func NewRules(rules []Rule, opts RulesOptions) (*Rules, error) {
	r := &Rules{rules: slices.Clone(rules), groups: make([]int, len(rules)), language: opts.Language}
	for i, rule := range rules {
		if err := chatmem.ValidateFactKey(rule.Key); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		if rule.Pattern == nil {
			return nil, fmt.Errorf("%w: rule %d (%s) has no pattern", chatmem.ErrInvalid, i, rule.Key)
		}
		if !(rule.Confidence > 0 && rule.Confidence <= 1) {
			return nil, fmt.Errorf("%w: rule %d (%s) confidence %v is outside (0, 1]", chatmem.ErrInvalid, i, rule.Key, rule.Confidence)
		}
		g := rule.Pattern.SubexpIndex("value")
		if g < 0 {
			g = rule.Group
		}
		if g < 0 || g > rule.Pattern.NumSubexp() {
			return nil, fmt.Errorf("%w: rule %d (%s) uses group %d of a pattern with %d", chatmem.ErrInvalid, i, rule.Key, g, rule.Pattern.NumSubexp())
		}
		r.groups[i] = g
	}
	return r, nil
}

// DefaultExtractor returns the extractor chatmem uses without a model:
// DefaultRules. The language a message is written in is not a fact it
// keeps (the model reads the messages themselves); the language the user
// asks for is.
func DefaultExtractor() *Rules {
	r, err := NewRules(DefaultRules(), RulesOptions{})
	if err != nil {
		panic(err) // DefaultRules is fixed and tested; this cannot happen.
	}
	return r
}

// Name returns "rules", the SetBy of every fact it finds.
func (*Rules) Name() string { return "rules" }

// Extract returns the facts the rules find in the user messages of msgs, in
// message order and, within a message, in the order their values appear,
// with the written_language fact last. Each fact carries the message's Seq and
// CreatedAt. A value is reported once per message, and overlapping captures
// of different rules are resolved in favour of the more confident rule (then
// the earlier rule). It fails only if ctx is done.
func (r *Rules) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	var facts []chatmem.Fact
	for _, m := range msgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if m.Role != chatmem.RoleUser {
			continue
		}
		facts = append(facts, r.extract(m)...)
	}
	return facts, nil
}

// capture is one rule's match in a message, before overlaps are resolved.
type capture struct {
	rule       int
	key, value string
	conf       float64
	start, end int
}

func (r *Rules) extract(m chatmem.Message) []chatmem.Fact {
	text := strings.ToValidUTF8(m.Content, "\uFFFD")
	var caps []capture
	for i, rule := range r.rules {
		g := r.groups[i]
		for _, loc := range rule.Pattern.FindAllStringSubmatchIndex(text, -1) {
			start, end := loc[2*g], loc[2*g+1]
			if start < 0 {
				continue
			}
			if guarded(text, loc[0], end) || rule.NotInQuestion && inQuestion(text, start) ||
				rule.QuestionAboutSelf && inQuestion(text, start) && !selfInSentence(text, start) {
				continue
			}
			raw := text[start:end]
			v := strings.TrimSpace(raw)
			if rule.Check != nil {
				var ok bool
				if v, ok = rule.Check(v); !ok {
					continue
				}
				// A value Check cut short claims only the text it kept,
				// so that other rules may take the rest.
				if i := strings.Index(raw, v); i >= 0 {
					start, end = start+i, start+i+len(v)
				}
			}
			if !validValue(v) {
				continue
			}
			caps = append(caps, capture{rule: i, key: rule.Key, value: v, conf: rule.Confidence, start: start, end: end})
		}
	}
	// The most confident capture of a span wins; ties go to the earlier
	// rule, then the earlier match.
	slices.SortStableFunc(caps, func(a, b capture) int {
		switch {
		case a.conf != b.conf:
			if a.conf > b.conf {
				return -1
			}
			return 1
		case a.rule != b.rule:
			return a.rule - b.rule
		}
		return a.start - b.start
	})
	var kept []capture // sorted by start, never overlapping
	seen := make(map[[2]string]bool)
	for _, c := range caps {
		if seen[[2]string{c.key, c.value}] {
			continue
		}
		i, _ := slices.BinarySearchFunc(kept, c.start, func(k capture, start int) int { return k.start - start })
		if i > 0 && kept[i-1].end > c.start || i < len(kept) && kept[i].start < c.end {
			continue
		}
		seen[[2]string{c.key, c.value}] = true
		kept = slices.Insert(kept, i, c)
	}
	facts := make([]chatmem.Fact, 0, len(kept)+1)
	for _, c := range kept {
		facts = append(facts, chatmem.Fact{
			Key: c.key, Value: c.value, SourceSeq: m.Seq, SetBy: r.Name(),
			Confidence: c.conf, CreatedAt: m.CreatedAt,
		})
	}
	if r.language {
		if code, conf, ok := DetectLanguage(text); ok {
			facts = append(facts, chatmem.Fact{
				Key: "written_language", Value: code, SourceSeq: m.Seq, SetBy: r.Name(),
				Confidence: conf, CreatedAt: m.CreatedAt,
			})
		}
	}
	return facts
}

// maxValueLen bounds a captured value: longer ones are not facts a user
// states about themselves but runs of text a pattern swallowed.
const maxValueLen = 256

func validValue(v string) bool {
	return v != "" && len(v) <= maxValueLen && utf8.ValidString(v) && !strings.ContainsRune(v, 0)
}

// Confidences of the default rules: a phrase that says what the value is
// ("my name is", "order number") beats one that only suggests it.
const (
	confNameStated = 0.9
	confNameIntro  = 0.8
	confNameThisIs = 0.6
	confOrderLabel = 0.9
	confOrder      = 0.85
	confEmail      = 0.95
	confPhone      = 0.8
)

// nameValue is one to three capitalized words, each of two or more letters,
// followed by something that is not part of a word (so "SE" in "SE-10423"
// is not a name). An optional title (Mr, Dr, ...) is not part of the value.
const nameValue = `(?:(?:Mr|Mrs|Ms|Miss|Dr|Prof)\.?\s+)?` +
	`(?P<value>\p{Lu}[\p{L}\p{M}]+(?:['’-]\p{L}+)*(?: \p{Lu}[\p{L}\p{M}]+(?:['’-]\p{L}+)*){0,2})` +
	`(?:[^\p{L}\p{N}_@-]|$)`

// idValue is an order number: letters then at least three digits
// ("SE-10423", "AB12345") or, when minDigits allows, digits alone.
func idValue(minDigits int) string {
	return fmt.Sprintf(`(?P<value>[A-Za-z]{1,6}[-_]?\d{3,}(?:[-_]?[A-Za-z0-9]+)*|\d{%d,}(?:[-_]?[A-Za-z0-9]+)*)(?:[^\p{L}\p{N}_@-]|$)`, minDigits)
}

// orderWord is "order" in the languages DetectLanguage knows.
const orderWord = `\b(?:order|pedido|commande|bestellung|encomenda|ordine)`

// DefaultRules returns the rules chatmem applies without a model, by key:
//
//   - name: "my name is X", "call me X" (and the Spanish, French, German,
//     Portuguese and Italian equivalents), "I'm X", "I am X", "this is X",
//     where X is one to three capitalized words that are not a common word
//     ("I'm Fine", "I am Not sure", "I'm Looking") or a role ("Admin").
//   - order_id: an ID after "order" ("order SE-10423", "order #12345",
//     "order number 12345"); digits alone need five or more unless labelled
//     ("number", "no.", "#", "id").
//   - email: an email address.
//   - phone: 7 to 15 digits, optionally with a "+" country code, an area
//     code in parentheses and separators (space, dot, hyphen), not shaped
//     like a date.
//
// and, for what users state about themselves (see statedRules for the
// phrasings, in English, Spanish, French, German, Portuguese and Italian):
//
//   - language: the language asked for ("answer me in Tamil", "en español
//     por favor", "can we speak German"), as a BCP 47 code; not the
//     language the message is written in.
//   - address: what follows "my address is", "deliver to (my office at)",
//     "I live at", "change my address to", up to the end of the sentence
//     or ", not ...", when it has a number in it.
//   - diet ("vegetarian", "vegan", "halal", "no pork", ...) and allergy
//     ("peanuts").
//   - contact_channel: "email", "phone", "sms", "whatsapp", "telegram",
//     "signal", from "contact me by ...", "I prefer ...".
//   - size: "my size is M", "I wear a size 42", "mi talla es M".
//   - amount: a number with a currency ("4,000 USD", "$12.50", "Rs 249").
//   - date: "12 May 2024", "May 12", "2024-05-12", "12/05/2024", "12 de
//     mayo".
//   - flight: "flight AI 302" as "AI302".
//   - ticket_id: an ID after "ticket", "case number", "reference number".
//
// Address, diet, allergy, contact_channel and size are not taken from a
// question ("Do you ship to 14 Lake Road?"). Each call returns new values,
// which the caller may change.
func DefaultRules() []Rule {
	return append([]Rule{
		{
			Key: "name", Confidence: confNameStated, Check: checkName,
			Pattern: regexp.MustCompile(`(?i:\bmy\s+name\s+is|\bcall\s+me|\bme\s+llamo|\bmi\s+nombre\s+es|\bje\s+m['’]appelle|\bmon\s+nom\s+est|\bich\s+hei(?:ß|ss)e|\bmein\s+name\s+ist|\bmeu\s+nome\s+é|\bme\s+chamo|\bmi\s+chiamo|\bil\s+mio\s+nome\s+è)\s*:?\s+` + nameValue),
		},
		{
			Key: "name", Confidence: confNameIntro, Check: checkName,
			Pattern: regexp.MustCompile(`(?i:\bi['’]m|\bi\s+am)\s+` + nameValue),
		},
		{
			Key: "name", Confidence: confNameThisIs, Check: checkName,
			Pattern: regexp.MustCompile(`(?i:\bthis\s+is)\s+` + nameValue),
		},
		{
			Key: "order_id", Confidence: confOrderLabel,
			Pattern: regexp.MustCompile(`(?i:` + orderWord + `\s*(?:number|no\.?|num|nr\.?|id|#|n[úu]mero|numéro|nummer)(?:\s+is)?)\s*[:#]?\s*#?` + idValue(3)),
		},
		{
			Key: "order_id", Confidence: confOrder,
			Pattern: regexp.MustCompile(`(?i:` + orderWord + `(?:\s+(?:is|was|es|est|ist|é|è))?)\s*:?\s*#?` + idValue(5)),
		},
		{
			Key: "email", Confidence: confEmail,
			Pattern: regexp.MustCompile(`(?P<value>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})`),
		},
		{
			Key: "phone", Confidence: confPhone, Check: checkPhone,
			Pattern: regexp.MustCompile(phonePattern),
		},
	}, statedRules()...)
}

// phonePattern matches a phone number not glued to a word, an ID ("SE-",
// "#") or a decimal. The value is checked by checkPhone.
const phonePattern = `(?:^|[^\p{L}\p{N}#+/.@_-])(?P<value>(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,5}\)[ .-]?)?\d{1,5}(?:[ .-]\d{1,8}){0,5}|\+?\d{7,15})\b`

// notPhone matches values shaped like a date or a decimal number.
var notPhone = regexp.MustCompile(`^(?:\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d{4}[./-]\d{1,2}[./-]\d{1,2}|\d{1,2}\.\d+)$`)

// checkPhone keeps 7 to 15 digits, with at least one group of three or more
// when there are fewer than ten ("42 43 44 45" is a list of sizes, "06 12
// 34 56 78" a French number), that do not look like a date or a decimal
// number.
func checkPhone(v string) (string, bool) {
	digits, run, longest := 0, 0, 0
	for _, r := range v {
		if r >= '0' && r <= '9' {
			digits++
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if digits < 7 || digits > 15 || longest < 3 && digits < 10 || notPhone.MatchString(v) {
		return "", false
	}
	return v, true
}

// notNames are words that follow "I'm", "I am", "this is" or "call me"
// capitalized without being a name (lowercase). A value whose first word is
// one of them is dropped; later words from the first of them on are cut
// ("Kavya From Delhi" keeps "Kavya"). Role words are here so that "I am
// Admin" or "my name is System" never becomes a name.
var notNames = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`
		fine good ok okay great well alright sorry not no yes looking trying going having getting doing
		here there back just so very really also still sure glad happy new interested writing calling
		asking wondering waiting hoping planning afraid confused frustrated upset angry done ready busy
		tired unable able from in at on with by for to of and or but the a an your my our this that it
		hi hello hey thanks thank please sir madam maam ma'am dear team customer client buyer user
		admin administrator system root assistant bot ai moderator developer support agent staff owner
		manager operator ignore disregard override the one someone somebody nobody everyone
		monday tuesday wednesday thursday friday saturday sunday today tomorrow tonight yesterday now
		later soon asap anytime again
		english american british indian canadian australian french german spanish italian portuguese
		chinese japanese korean russian arabic hindi brazilian mexican
		urgent important serious ridiculous unacceptable terrible awful amazing strange weird crazy wrong
		correct true false what why how who where when which
		a.m p.m am pm vegetarian vegan allergic celiac halal kosher jain size`) {
		m[w] = true
	}
	return m
}()

// checkName drops common words and possessives ("Kavya's") and cuts a name
// at the first common word.
func checkName(v string) (string, bool) {
	words := strings.Fields(v)
	for i, w := range words {
		lw := strings.ToLower(strings.ReplaceAll(w, "’", "'"))
		if notNames[lw] || strings.HasSuffix(lw, "'s") || !hasLower(w) && utf8.RuneCountInString(w) <= 2 {
			if i == 0 {
				return "", false
			}
			return strings.Join(words[:i], " "), true
		}
	}
	return strings.Join(words, " "), true
}

// hasLower reports whether s has a lowercase letter, to tell names from
// short acronyms ("OK", "AI").
func hasLower(s string) bool {
	return strings.IndexFunc(s, unicode.IsLower) >= 0
}
