package offline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
)

// DefaultMaxChars is the summary cap a zero Options.MaxChars stands for:
// about 500 tokens of English.
const DefaultMaxChars = 2000

// DefaultMaxToolChars is the longest tool result a zero
// Options.MaxToolChars keeps.
const DefaultMaxToolChars = 200

// Options configures a Summarizer. The zero value means the defaults.
type Options struct {
	// MaxChars caps the summary's length in characters (Unicode code
	// points, newlines included). Zero means DefaultMaxChars; a negative
	// value means no cap.
	MaxChars int
	// MaxToolChars is the longest tool result kept, in characters; longer
	// ones are dropped whatever they hold. Zero means DefaultMaxToolChars;
	// a negative value drops every tool result.
	MaxToolChars int
}

// Summarizer is an extractive chatmem.Summarizer that needs no model. It
// keeps the sentences that tell the most within its cap (IDs, contacts,
// names, amounts, dates, numbers and content words not yet kept), each
// question with its answer, and under a small cap first what the user's
// last message asks, each line prefixed with who said it and dated when
// the transcript is, in conversation order. Its output is a function of
// its input alone, and it is safe for concurrent use. The zero value uses
// the default options.
type Summarizer struct {
	opts Options
}

var _ chatmem.BoundedSummarizer = (*Summarizer)(nil)

// NewSummarizer returns a Summarizer with opts.
func NewSummarizer(opts Options) *Summarizer {
	return &Summarizer{opts: opts}
}

// Name returns "offline".
func (*Summarizer) Name() string { return "offline" }

// candidate is one sentence that may go into the summary.
type candidate struct {
	role  string // "user", "assistant", "tool", or "" for a line of unknown origin
	text  string
	group int // the line it is printed on: one per message or previous line
	// pair links a user's question and the first sentence of the answer
	// that follows it (index into the candidates, -1: none): the summary
	// keeps both or neither, so that no question is printed above another
	// question's answer.
	pair int
	// heading marks a date heading ("[8 May 2023]"): the line that dates
	// the sentences after it, printed only above a kept one. head is the
	// heading of the candidate's own session (-1: none).
	heading bool
	head    int
	// concepts are what the sentence tells, weighted (see coverage.go),
	// and stance multiplies their weights (see stanceOf).
	concepts map[string]float64
	stance   float64
	// open marks the open request: the last question or request in the
	// user's last message (see openRequest), which the summary keeps first.
	open bool
	features
}

// Summarize returns the summary of prev followed by msgs. Each line of
// prev ("role: sentences") and each message is one line of the summary,
// holding the sentences (or, of a long statement, the clauses) kept from
// it. A line of prev without a role prefix (written by another summarizer)
// stays a candidate, printed without one, even if it carries nothing the
// scoring sees. A date stamp opening a message ("[1:56 pm on 8 May,
// 2023] ...") becomes a heading line ("[8 May 2023]") above the kept lines
// of that day, and relative dates under it are resolved ("yesterday (7 May
// 2023)"); a heading line of prev dates the messages that follow. System
// messages are not summarized (they are always sent), nor is an assistant
// message's list of tool calls.
//
// When the candidates overflow MaxChars, they are chosen by coverage (see
// coverage.go): next goes the sentence that adds the most concept weight
// not yet kept (IDs and contacts first, then names, numbers, dates and
// content words, what speakers say of themselves above remarks about the
// other) per character, newer before older at equal value; a question
// goes only with the other speaker's answer right after it (the answer may
// go alone), a dated sentence with its heading. Sentences that add nothing
// new fill what room is left, by score, an exact repeat never.
//
// Under a small cap (below smallSummaryChars, about 150 tokens) the open
// request goes in first: the last question or request ("please", "can
// you", "I need") of the user's last message, which the messages after
// the summary carry on, unless a reply reports it done ("Done:", "I've
// cancelled"). It may go without its answer, as the summary's last line:
// a summary that small cannot stand for the history, and the first
// sentences of a conversation seldom tell what it is about by now.
//
// If nothing is worth keeping, the summary is the open request, else the
// first user sentence (cut to MaxChars). Summarize returns an error
// wrapping chatmem.ErrInvalid if prev and msgs hold no text, and ctx's
// error if ctx is done.
func (s *Summarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	opts := s.options()
	cands, first := s.candidates(prev, msgs, opts)
	if first == nil {
		return "", fmt.Errorf("offline summary: %w: nothing to summarize (no previous summary and no message text)", chatmem.ErrInvalid)
	}
	kept := selectSentences(cands, opts.MaxChars)
	if !slices.ContainsFunc(kept, func(c candidate) bool { return !c.heading }) {
		line := first.line()
		if opts.MaxChars >= 0 && utf8.RuneCountInString(line) > opts.MaxChars {
			line = truncate(line, opts.MaxChars)
		}
		if strings.TrimSpace(line) == "" {
			return "", fmt.Errorf("offline summary: %w: MaxChars %d holds no text", chatmem.ErrInvalid, opts.MaxChars)
		}
		return line, nil
	}
	return render(kept), nil
}

// charsPerToken is how many characters a token is taken to hold when
// SummarizeWithin turns a token bound into a character cap: the seed's
// estimate, and about what tiktoken's encodings give for English.
const charsPerToken = 4

// summaryHeaderChars is what chatmem adds before a summary when it sends
// it ("Summary of messages 1-N:"), which counts against the bound too.
const summaryHeaderChars = 32

// SummarizeWithin is Summarize with the summary capped at about maxTokens
// tokens: at most maxTokens*4 characters, less chatmem's header line, in
// place of DefaultMaxChars, and never more than an Options.MaxChars set. chatmem.Memory calls it with the share of the
// budget a summary may take, and again with a smaller bound if the summary
// counts over it.
func (s *Summarizer) SummarizeWithin(ctx context.Context, prev string, msgs []chatmem.Message, maxTokens int) (string, error) {
	o := s.options()
	limit := max(maxTokens*charsPerToken-summaryHeaderChars, charsPerToken)
	if s == nil || s.opts.MaxChars <= 0 || o.MaxChars > limit {
		o.MaxChars = limit // the bound replaces the default cap, and an explicit one caps it
	}
	return (&Summarizer{opts: o}).Summarize(ctx, prev, msgs)
}

func (s *Summarizer) options() Options {
	var o Options
	if s != nil {
		o = s.opts
	}
	if o.MaxChars == 0 {
		o.MaxChars = DefaultMaxChars
	}
	if o.MaxToolChars == 0 {
		o.MaxToolChars = DefaultMaxToolChars
	}
	return o
}

// candidates reads prev and msgs into scored sentences, in conversation
// order. first is the fallback: the open request (see openRequest), else
// the first user sentence, else the first sentence of any kind; nil when
// there is no text at all.
func (s *Summarizer) candidates(prev string, msgs []chatmem.Message, opts Options) (cands []candidate, first *candidate) {
	var firstUser, firstAny *candidate
	var all []candidate // every sentence, scored or not
	speakers := make(map[string]bool)
	for _, m := range msgs {
		if f := strings.Fields(m.Name); len(f) > 0 && m.Role != chatmem.RoleTool {
			speakers[strings.ToLower(f[0])] = true
		}
	}
	group := 0
	head := -1       // the current date heading, an index into all
	var day dayStamp // its date, when known
	addHeading := func(text string, d dayStamp) {
		group++
		head = len(all)
		day = d
		all = append(all, candidate{text: text, group: group, pair: -1, head: -1, heading: true,
			concepts: conceptsOf(text, features{}, nil)})
	}
	addLine := func(role, text string, whole bool) {
		group++
		sentences := []string{strings.Join(strings.Fields(text), " ")}
		if !whole {
			sentences = nil
			for _, sent := range splitSentences(text) {
				sentences = append(sentences, splitClauses(sent)...)
			}
		}
		for _, sent := range sentences {
			if sent == "" {
				continue
			}
			if role != "tool" {
				sent = clip(sent)
			}
			c := candidate{role: role, text: sent, group: group, head: head}
			if firstAny == nil {
				firstAny = &candidate{role: role, text: sent}
			}
			if firstUser == nil && role == "user" {
				firstUser = &candidate{role: role, text: sent}
			}
			c.features = scoreSentence(role, sent)
			if role != "tool" {
				c.text = compress(stripFiller(sent), speakers)
				if day.ok && role != "" {
					c.text = resolveDates(c.text, day)
				}
			}
			c.concepts = conceptsOf(c.text, c.features, speakers)
			c.stance = stanceOf(c.text)
			if c.score > 0 && len(speakers) > 0 && onlySpeakerNames(c.entities, speakers) {
				// Naming the one spoken to ("Congrats, Melanie!") tells
				// nothing: the name does not count.
				c.score -= weightName
				if c.score <= weightUser {
					c.score = 0
				}
			}
			if c.score == 0 && role != "tool" && !pleasantry(sent, nil) && len(c.concepts) >= 2 {
				// A plain statement that tells something ("The transgender
				// stories were so inspiring!"): kept if it adds to what is
				// kept.
				c.score = 1
			}
			if role == "" && c.score == 0 && !pleasantry(sent, nil) {
				// Prose from another summarizer: keep it while there is room.
				c.score = 1
			}
			if role == "tool" && !s.keepTool(sent, c.features, opts) {
				c.score = 0
			}
			c.pair = -1
			all = append(all, c)
		}
	}
	for line := range strings.Lines(strings.ToValidUTF8(prev, "\uFFFD")) {
		if text, d, ok := dateHeading(line); ok && strings.TrimSpace(line) == text {
			addHeading(text, d)
			continue
		}
		role, text := splitRole(line)
		addLine(role, text, role == "tool")
	}
	for _, m := range msgs {
		switch m.Role {
		case chatmem.RoleUser, chatmem.RoleAssistant:
			content := strings.ToValidUTF8(m.Content, "\uFFFD")
			if text, d, ok := dateHeading(content); ok {
				addHeading(text, d)
				content = content[strings.Index(content, "]")+1:]
			}
			addLine(string(m.Role), content, false)
		case chatmem.RoleTool:
			addLine(string(m.Role), strings.ToValidUTF8(m.Content, "\uFFFD"), true)
		}
	}
	first = firstUser
	if first == nil {
		first = firstAny
	}
	if o := openRequest(all); o >= 0 {
		all[o].open = true
		first = &candidate{role: all[o].role, text: all[o].text}
	}
	return pairAnswers(all), first
}

// reRequest matches what asks for something besides a question mark:
// "please", "can you", "I need", "I'd like".
var reRequest = regexp.MustCompile(`(?i:\b(?:please|pls|can you|could you|would you|will you|can i|could i|may i|` +
	`i need|i want|i'd like|i would like|i'm looking for|i am looking for|help me|let me know)\b)`)

// reDone matches a reply that reports a request carried out ("Done: it is
// in your cart.", "I've cancelled the booking.", "Your refund has been
// processed."): the request it answers is closed.
var reDone = regexp.MustCompile(`(?i:^(?:all\s+)?(?:done|all set|you're all set|sorted|completed)\b|` +
	`\b(?:i've|i have|we've|we have)\s+(?:now\s+|just\s+)?(?:added|booked|cancel+ed|refunded|sent|processed|placed|updated|changed|scheduled|reset|fixed|issued|completed)\b|` +
	`\b(?:has|have)\s+(?:now\s+)?been\s+(?:added|booked|cancel+ed|refunded|sent|processed|placed|updated|changed|scheduled|reset|fixed|issued|completed|confirmed)\b|` +
	`\bis\s+(?:now\s+)?(?:in\s+your\s+(?:cart|basket|bag)|booked|confirmed|cancel+ed)\b)`)

// openRequest returns the index in all of the open request: the last
// question or request (reRequest) in the user's last message, the thread
// the messages after the summary carry on; -1 if that message asks
// nothing, or if a reply after it reports it done (reDone). It is what a
// summary at a small budget keeps first: the first sentences of a
// conversation tell how it began, the open request what it is about now.
func openRequest(all []candidate) int {
	last := -1 // the group of the user's last message
	for _, c := range all {
		if c.role == "user" && !c.heading {
			last = c.group
		}
	}
	open := -1
	for i, c := range all {
		t := strings.ReplaceAll(c.text, "’", "'")
		switch {
		case c.group == last && c.score > 0 && (strings.HasSuffix(strings.TrimRight(t, `"')]}”’» `), "?") || reRequest.MatchString(t)):
			open = i
		case open >= 0 && c.group > last && c.role == "assistant" && reDone.MatchString(t):
			return -1
		}
	}
	return open
}

// pairAnswers links each kept question (the last question of its line) to
// the first sentence of the other speaker's line right after it, which is
// kept with it even if it scores nothing on its own, and returns the
// candidates worth keeping (and the date headings), with pair and head
// indexes into what it returns. A sentence is in one pair at most: an
// answer that asks back is not paired again with the reply to it.
func pairAnswers(all []candidate) []candidate {
	answerOf := make(map[int]int) // question -> answer, indexes into all
	paired := make(map[int]bool)
	other := map[string]string{"user": "assistant", "assistant": "user"}
	for i := 0; i < len(all); i++ {
		q := all[i]
		if other[q.role] == "" || q.score == 0 || paired[i] || !strings.HasSuffix(q.text, "?") {
			continue
		}
		j := i + 1
		for j < len(all) && all[j].group == q.group {
			j++
		}
		if j < len(all) && all[j].group == q.group+1 && all[j].role == other[q.role] && !all[j].heading && !pleasantry(all[j].text, nil) {
			if i+1 < len(all) && all[i+1].group == q.group && strings.HasSuffix(all[i+1].text, "?") {
				continue // a later question of the same line gets the answer
			}
			answerOf[i] = j
			paired[i], paired[j] = true, true
			all[j].score = max(all[j].score, 1)
		}
	}
	index := make(map[int]int, len(all))
	var cands []candidate
	for i, c := range all {
		if c.score > 0 || c.heading {
			index[i] = len(cands)
			cands = append(cands, c)
		}
	}
	for k := range cands {
		if h := cands[k].head; h >= 0 {
			cands[k].head = index[h]
		}
	}
	for q, a := range answerOf {
		cands[index[q]].pair, cands[index[a]].pair = index[a], index[q]
	}
	return cands
}

// keepTool keeps a tool result only if it is short and carries an ID or a
// number: a status lookup, not a page of search results.
func (s *Summarizer) keepTool(text string, f features, opts Options) bool {
	return opts.MaxToolChars >= 0 && utf8.RuneCountInString(text) <= opts.MaxToolChars &&
		(len(f.entities) > 0 || reNumber.MatchString(text))
}

// splitRole parses a summary line "role: text". A line without a known role
// has role "".
func splitRole(line string) (role, text string) {
	line = strings.TrimSpace(line)
	for _, r := range []string{"user", "assistant", "tool"} {
		if rest, ok := strings.CutPrefix(line, r+":"); ok {
			return r, strings.TrimSpace(rest)
		}
	}
	return "", line
}

func (c candidate) line() string {
	if c.role == "" {
		return c.text
	}
	return c.role + ": " + c.text
}

// render prints kept sentences one line per group, "role: s1 s2".
func render(kept []candidate) string {
	var b strings.Builder
	for i, c := range kept {
		switch {
		case i > 0 && kept[i-1].group == c.group:
			b.WriteByte(' ')
		default:
			if i > 0 {
				b.WriteByte('\n')
			}
			if c.role != "" {
				b.WriteString(c.role + ": ")
			}
		}
		b.WriteString(c.text)
	}
	return b.String()
}

// maxSentenceChars is the longest sentence kept whole. A longer one (a
// pasted log, a run-on message) is clipped to this many characters around
// its first ID, contact, amount or date, so that what it carries can still
// fit the summary.
const maxSentenceChars = 280

// clipLead is how much of a clipped sentence comes before its first feature.
const clipLead = 60

func clip(s string) string {
	runes := []rune(s)
	if len(runes) <= maxSentenceChars {
		return s
	}
	at := len(s)
	for _, re := range []*regexp.Regexp{reID, reEmail, rePhone, reMoney, reDate} {
		if loc := re.FindStringIndex(s); loc != nil && loc[0] < at {
			at = loc[0]
		}
	}
	start := 0
	if at < len(s) {
		start = max(0, utf8.RuneCountInString(s[:at])-clipLead)
	}
	end := min(len(runes), start+maxSentenceChars-2)
	out := strings.TrimSpace(string(runes[start:end]))
	if start > 0 {
		out = "…" + out
	}
	if end < len(runes) {
		out += "…"
	}
	return out
}

// truncate cuts s to at most n characters, ending in "…" when it cuts.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	runes := []rune(s)
	if len(runes) <= n {
		return s
	}
	return strings.TrimSpace(string(runes[:n-1])) + "…"
}
