// Command seedreplay replays the seed's conversation on the embedded SQLite
// store, in a module of its own, through chatmem's public API only, and
// prints the seed's three lines. Its argument is the directory to keep the
// database in.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: seedreplay DIR")
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(os.Args[1], "chatmem.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		log.Fatal(err)
	}
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "kavya-1"}
	history := []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Hi, I'm Kavya. My order SE-10423 hasn't arrived."},
		{Role: chatmem.RoleAssistant, Content: "Sorry Kavya! It is out for delivery and should arrive by 8 pm."},
		{Role: chatmem.RoleUser, Content: "Ok. Also, do you have running socks?"},
		{Role: chatmem.RoleAssistant, Content: "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199."},
		{Role: chatmem.RoleUser, Content: "Add the DryFit ones to my cart please."},
	}
	if _, err := mem.Append(ctx, key, history, chatmem.AppendOptions{}); err != nil {
		log.Fatal(err)
	}
	for _, budget := range []int{100, 40, 25} {
		w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: budget}, chatmem.ContextOptions{})
		if err != nil {
			log.Fatal(err)
		}
		first := []rune(w.Messages[0].Content)
		first = first[:min(len(first), 30)]
		fmt.Printf("budget %3d: keeps %d messages (%d tokens), first: %s\n", budget, len(w.Messages), w.Tokens, repr(string(first)))
	}
}

// repr quotes s as Python's repr does for these texts (no escapes needed):
// in single quotes, unless s holds one and no double quote.
func repr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + s + "'"
}
