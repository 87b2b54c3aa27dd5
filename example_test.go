package chatmem_test

import (
	"context"
	"fmt"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/tokenizer"
)

// The seed's token-budget window: keep the newest messages that fit the
// budget; the window must start with a user message. With the seed's
// estimator (max(1, len(text)//4)) this prints the seed's output exactly.
func Example_seed() {
	history := []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Hi, I'm Kavya. My order SE-10423 hasn't arrived."},
		{Role: chatmem.RoleAssistant, Content: "Sorry Kavya! It is out for delivery and should arrive by 8 pm."},
		{Role: chatmem.RoleUser, Content: "Ok. Also, do you have running socks?"},
		{Role: chatmem.RoleAssistant, Content: "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199."},
		{Role: chatmem.RoleUser, Content: "Add the DryFit ones to my cart please."},
	}
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
		fmt.Println(seed.Line(budget, w))
	}
	// Output:
	// budget 100: keeps 5 messages (63 tokens), first: "Hi, I'm Kavya. My order SE-104"
	// budget  40: keeps 3 messages (36 tokens), first: 'Ok. Also, do you have running '
	// budget  25: keeps 1 messages (9 tokens), first: 'Add the DryFit ones to my cart'
}
