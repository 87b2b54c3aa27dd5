package main

import (
	"context"
	"fmt"
	"io"

	"chatmem"
	"chatmem/internal/seed"
	"chatmem/memory"
	"chatmem/tokenizer"
)

// runDemo replays the seed's conversation through a Memory over the
// in-process store with the seed's estimator, and prints the seed's lines.
func runDemo(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "demo", "chatmem demo", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("demo takes no arguments")
	}
	mem, err := chatmem.New(memory.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		return err
	}
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "seed"}
	if _, err := mem.Append(ctx, key, seed.History(), chatmem.AppendOptions{}); err != nil {
		return err
	}
	for _, budget := range seed.Budgets {
		w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: budget}, chatmem.ContextOptions{})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, seed.Line(budget, w))
	}
	return nil
}
