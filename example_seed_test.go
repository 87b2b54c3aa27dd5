package chatmem_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/tokenizer"
)

// The seed's token-budget window: keep the newest messages that fit the
// budget; the window must start with a user message. With the seed's
// estimator (max(1, len(text)//4)) this prints the seed's output exactly.
func Example_seed() {
	history := seedHistory()
	// Count once, as Memory.Append does; policies only add stored counts.
	for i := range history {
		history[i].Tokens, _ = tokenizer.Estimate{}.Count(context.Background(), history[i])
	}
	for _, budget := range []int{100, 40, 25} {
		w, err := chatmem.TokenBudget(history, budget)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(seedLine(budget, w))
	}
	// Output:
	// budget 100: keeps 5 messages (63 tokens), first: "Hi, I'm Kavya. My order SE-104"
	// budget  40: keeps 3 messages (36 tokens), first: 'Ok. Also, do you have running '
	// budget  25: keeps 1 messages (9 tokens), first: 'Add the DryFit ones to my cart'
}

// seedHistory returns the seed's five messages (testdata/seed.json).
func seedHistory() []chatmem.Message {
	return []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Hi, I'm Kavya. My order SE-10423 hasn't arrived."},
		{Role: chatmem.RoleAssistant, Content: "Sorry Kavya! It is out for delivery and should arrive by 8 pm."},
		{Role: chatmem.RoleUser, Content: "Ok. Also, do you have running socks?"},
		{Role: chatmem.RoleAssistant, Content: "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199."},
		{Role: chatmem.RoleUser, Content: "Add the DryFit ones to my cart please."},
	}
}

// seedLine formats a window as the seed's print statement does:
//
//	print(f"budget {budget:3}: keeps {len(kept)} messages ({used} tokens), first: {kept[0]['content'][:30]!r}")
//
// Its repr is enough for the seed's texts: quotes, and no escapes.
func seedLine(budget int, w chatmem.Window) string {
	first := ""
	if len(w.Messages) > 0 {
		first = w.Messages[0].Content
	}
	if r := []rune(first); len(r) > 30 {
		first = string(r[:30])
	}
	q := "'"
	if strings.Contains(first, "'") && !strings.Contains(first, `"`) {
		q = `"`
	}
	return fmt.Sprintf("budget %3d: keeps %d messages (%d tokens), first: %s", budget, len(w.Messages), w.Tokens, q+first+q)
}
