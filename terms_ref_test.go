package chatmem

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"

	"github.com/chatmem/chatmem/internal/terms"
)

// The implementation of Terms before it built words in a reused buffer,
// kept as the reference the current one must agree with term for term:
// stores index messages by these terms, so a change in them would leave
// indexed messages unfindable.

func refIndexTerms(m Message) []string {
	if m.Role == RoleSystem {
		return nil
	}
	seen := make(map[string]bool)
	out := refAppendTerms(nil, m.Content, seen, MaxIndexTerms)
	for _, c := range m.ToolCalls {
		out = refAppendTerms(out, c.Function.Name, seen, MaxIndexTerms)
		out = refAppendTerms(out, c.Function.Arguments, seen, MaxIndexTerms)
	}
	return out
}

func refAppendTerms(out []string, text string, seen map[string]bool, limit int) []string {
	if seen == nil {
		seen = make(map[string]bool)
	}
	var b strings.Builder
	flush := func() {
		w := b.String()
		b.Reset()
		w = strings.Trim(w, "'")
		w = strings.TrimSuffix(w, "'s")
		if !refKeepWord(w) {
			return
		}
		if refIsASCIILetters(w) {
			w = english.Stem(w, true)
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

func refKeepWord(w string) bool {
	if w == "" || len(w) > terms.MaxTermBytes || terms.IsStopWord(w) {
		return false
	}
	if utf8.RuneCountInString(w) == 1 {
		r, _ := utf8.DecodeRuneInString(w)
		return unicode.IsDigit(r) || r > unicode.MaxLatin1 // a digit, or a CJK character
	}
	return true
}

func refIsASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// sameTerms checks Terms and IndexTerms against the reference on text.
func sameTerms(t *testing.T, text string) {
	t.Helper()
	if got, want := Terms(text), refAppendTerms(nil, text, nil, MaxIndexTerms); !slices.Equal(got, want) {
		t.Fatalf("Terms(%q) = %q, want %q (the reference)", text, got, want)
	}
	m := Message{Role: RoleUser, Content: text, ToolCalls: []ToolCall{{ID: "c", Type: "function",
		Function: FunctionCall{Name: "f_" + text, Arguments: text + " more"}}}}
	if got, want := IndexTerms(m), refIndexTerms(m); !slices.Equal(got, want) {
		t.Fatalf("IndexTerms(%q) = %q, want %q (the reference)", text, got, want)
	}
}

// TestTermsAsBefore compares every LoCoMo turn (when the data set is
// there) and a set of edge cases with the reference.
func TestTermsAsBefore(t *testing.T) {
	for _, text := range []string{
		"", "'", "''s", "it's", "'quoted'", "Ada's", "O’Brien’s", "don't", "x'y'z", "A1b2", "ÉCOLE école",
		"İstanbul", "ǅemal", "東京 大阪", "٣ digits ٤٥", "a\xffb", strings.Repeat("long", 20) + " word",
		strings.Repeat("w ", 3*MaxIndexTerms), "SE-10423, ORDER #99!", "über straße", "café's",
	} {
		sameTerms(t, text)
	}
	var words []string
	for i := range 2 * MaxIndexTerms {
		words = append(words, "w"+strings.Repeat("x", i%40)+string(rune('a'+i%26)))
	}
	sameTerms(t, strings.Join(words, " "))

	raw, err := os.ReadFile("/work/shared/data/locomo/locomo10.json")
	if err != nil {
		t.Logf("LoCoMo not found (%v); the edge cases alone were compared", err)
		return
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			texts = append(texts, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	walk(doc)
	for _, text := range texts {
		sameTerms(t, text)
	}
	t.Logf("%d LoCoMo strings agree with the reference", len(texts))
}

func FuzzTermsAsBefore(f *testing.F) {
	for _, s := range []string{"Where is my order SE-10423?", "it's O’Brien’s café", "東京 x 7", "a\xffb''s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		sameTerms(t, text)
	})
}
