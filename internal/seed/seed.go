// Package seed holds the seed text's conversation and its output format, so
// that `chatmem demo` and the tests reproduce the seed's lines exactly.
package seed

import (
	"fmt"
	"strings"

	"github.com/chatmem/chatmem"
)

// History returns the seed's five messages.
func History() []chatmem.Message {
	return []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Hi, I'm Kavya. My order SE-10423 hasn't arrived."},
		{Role: chatmem.RoleAssistant, Content: "Sorry Kavya! It is out for delivery and should arrive by 8 pm."},
		{Role: chatmem.RoleUser, Content: "Ok. Also, do you have running socks?"},
		{Role: chatmem.RoleAssistant, Content: "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199."},
		{Role: chatmem.RoleUser, Content: "Add the DryFit ones to my cart please."},
	}
}

// Budgets are the budgets the seed prints.
var Budgets = []int{100, 40, 25}

// Line formats one window as the seed's print statement does:
//
//	print(f"budget {budget:3}: keeps {len(kept)} messages ({used} tokens), first: {kept[0]['content'][:30]!r}")
func Line(budget int, w chatmem.Window) string {
	first := ""
	if len(w.Messages) > 0 {
		first = w.Messages[0].Content
	}
	return fmt.Sprintf("budget %3d: keeps %d messages (%d tokens), first: %s", budget, len(w.Messages), w.Tokens, PyRepr(prefix(first, 30)))
}

// prefix returns the first n code points of s, as Python's s[:n].
func prefix(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// PyRepr quotes s as Python's repr does for a str: single quotes unless s
// holds a single quote and no double quote, with backslash escapes for the
// quote, backslash and control characters.
func PyRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\' || r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}
