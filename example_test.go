package chatmem_test

import (
	"context"
	"fmt"
	"log"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// New wraps a store: here the in-process one, with the seed's estimator
// (max(1, len(text)/4) tokens a message). Append stores messages, counted
// once; Context returns the newest of them that fit a policy's budget.
func ExampleNew() {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		log.Fatal(err)
	}
	defer mem.Close()

	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "kavya-1"}
	res, err := mem.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Hi, I'm Kavya. My order SE-10423 hasn't arrived."},
		{Role: chatmem.RoleAssistant, Content: "Sorry Kavya! It is out for delivery and should arrive by 8 pm."},
		{Role: chatmem.RoleUser, Content: "Ok. Also, do you have running socks?"},
	}, chatmem.AppendOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("stored %d messages, %d tokens in all\n", len(res.Messages), res.Conversation.Tokens)

	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 30}, chatmem.ContextOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range w.Messages {
		fmt.Printf("#%d %s: %s\n", m.Seq, m.Role, m.Content)
	}
	fmt.Printf("%d tokens, %d older messages left out\n", w.Tokens, w.Dropped)
	// Output:
	// stored 3 messages, 36 tokens in all
	// #3 user: Ok. Also, do you have running socks?
	// 9 tokens, 2 older messages left out
}

// Turn is one call per chat turn: it stores the user's message and
// returns the window to send the model, the new message included. The
// model's reply is stored with Append.
func ExampleMemory_Turn() {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		log.Fatal(err)
	}
	defer mem.Close()

	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "kavya-1"}
	policy := chatmem.Policy{Kind: chatmem.PolicyLastTurns, Turns: 2}
	replies := []string{
		"Sorry Kavya! It is out for delivery and should arrive by 8 pm.",
		"Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.",
	}
	for i, text := range []string{
		"Hi, I'm Kavya. My order SE-10423 hasn't arrived.",
		"Ok. Also, do you have running socks?",
	} {
		user := chatmem.Message{Role: chatmem.RoleUser, Content: text}
		_, w, err := mem.Turn(ctx, key, []chatmem.Message{user}, chatmem.AppendOptions{}, policy, chatmem.ContextOptions{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("turn %d sends %d message(s), %d tokens:", i+1, len(w.Messages), w.Tokens)
		for _, m := range w.Messages {
			fmt.Printf(" #%d %s", m.Seq, m.Role)
		}
		fmt.Println()
		// Here the program sends w.Messages to its model.
		reply := chatmem.Message{Role: chatmem.RoleAssistant, Content: replies[i]}
		if _, err := mem.Append(ctx, key, []chatmem.Message{reply}, chatmem.AppendOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// turn 1 sends 1 message(s), 12 tokens: #1 user
	// turn 2 sends 3 message(s), 36 tokens: #1 user #2 assistant #3 user
}
