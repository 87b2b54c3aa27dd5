package chatmem_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestFactsNameTheLanguage checks the facts block as a model reads it: in
// a long support conversation whose user asked early to be answered in
// Tamil, every policy's window with facts at 256 tokens says "Tamil", with
// the code beside it, though the fact's stored value is the code.
func TestFactsNameTheLanguage(t *testing.T) {
	ctx := t.Context()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter:    tokenizer.Estimate{},
		Summarizer: offline.NewSummarizer(offline.Options{}),
		Extractors: []chatmem.Extractor{offline.DefaultExtractor()},
		Sync:       true,
	})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "support"}
	say := func(role chatmem.Role, text string) {
		t.Helper()
		if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: role, Content: text}}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	say(chatmem.RoleUser, "Hi, I'm Kavya. Please answer me in Tamil from now on.")
	say(chatmem.RoleAssistant, "Of course, Kavya. How can I help?")
	for i := range 40 {
		say(chatmem.RoleUser, fmt.Sprintf("Question %d about my order SE-10423: when does the parcel with the running socks arrive, and can I change the address?", i))
		say(chatmem.RoleAssistant, fmt.Sprintf("Answer %d: the parcel is with the courier; the address can be changed until it leaves the hub.", i))
	}
	facts, err := mem.Facts(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var stored string
	for _, f := range facts {
		if f.Key == "language" {
			stored = f.Value
		}
	}
	if stored != "ta" {
		t.Fatalf("language fact = %q, want the code ta (facts %v)", stored, facts)
	}
	for _, p := range []chatmem.Policy{
		{Kind: chatmem.PolicyAll, Budget: 0, Facts: true},
		{Kind: chatmem.PolicyLastTurns, Turns: 2, Budget: 256, Facts: true},
		{Kind: chatmem.PolicyTokenBudget, Budget: 256, Facts: true},
		{Kind: chatmem.PolicySummaryBuffer, Budget: 256, Facts: true},
		{Kind: chatmem.PolicyRecall, Budget: 256, Facts: true},
	} {
		w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatalf("%s: %v", p.Kind, err)
		}
		if len(w.Messages) == 0 || !strings.Contains(w.Messages[0].Content, "language=Tamil (ta)") {
			first := ""
			if len(w.Messages) > 0 {
				first = w.Messages[0].Content
			}
			t.Errorf("%s at 256 with facts: first message %q, want a facts block with language=Tamil (ta)", p.Kind, first)
		}
		if p.Budget > 0 && w.Tokens > p.Budget {
			t.Errorf("%s: window of %d tokens over the budget of %d", p.Kind, w.Tokens, p.Budget)
		}
	}
}
