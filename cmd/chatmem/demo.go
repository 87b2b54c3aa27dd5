package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/tokenizer"
)

// runDemo replays the seed's conversation through a Memory with the seed's
// estimator, on the embedded default store (a SQLite file in a temporary
// directory, removed afterwards) unless --store names another, and prints
// the seed's lines.
func runDemo(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "demo [--store URL]", "chatmem demo", stderr)
	storeURL := fs.String("store", "", storeURLHelp+" (default: a temporary SQLite file)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("demo takes no arguments")
	}
	dir, err := os.MkdirTemp("", "chatmem-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := openStore(ctx, *storeURL, filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	defer store.Close()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		return err
	}
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "seed-demo"}
	if _, err := mem.Append(ctx, key, seed.History(), chatmem.AppendOptions{}); err != nil {
		return err
	}
	defer store.Delete(context.WithoutCancel(ctx), key)
	for _, budget := range seed.Budgets {
		w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: budget}, chatmem.ContextOptions{})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, seed.Line(budget, w))
	}
	return nil
}
