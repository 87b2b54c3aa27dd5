package chatmem

import "github.com/chatmem/chatmem/internal/terms"

// MaxIndexTerms caps the terms IndexTerms returns for one message: a very
// long message is indexed under the first MaxIndexTerms distinct terms it
// has.
const MaxIndexTerms = 512

// Terms returns the distinct search terms of text, in order of first
// appearance: words and numbers, lower-cased, without English stop words,
// stemmed with the Snowball English stemmer ("ordered" and "orders" are both
// "order"). Identifiers split at punctuation: "SE-10423" is "se" and
// "10423". Stores index messages by these terms and PolicyRecall searches
// them, so both sides agree on what a word is.
func Terms(text string) []string {
	return terms.Append(nil, text, nil, MaxIndexTerms)
}

// IndexTerms returns the terms a store indexes m under: those of its content
// and of its tool calls' names and arguments, at most MaxIndexTerms. System
// messages are pinned into every window and never searched: they have none.
func IndexTerms(m Message) []string {
	if m.Role == RoleSystem {
		return nil
	}
	var seen terms.Set
	// Room for about one term in seven bytes: a few growths at most.
	out := make([]string, 0, min(MaxIndexTerms, 4+len(m.Content)/7))
	out = terms.Append(out, m.Content, &seen, MaxIndexTerms)
	for _, c := range m.ToolCalls {
		out = terms.Append(out, c.Function.Name, &seen, MaxIndexTerms)
		out = terms.Append(out, c.Function.Arguments, &seen, MaxIndexTerms)
	}
	return out
}
