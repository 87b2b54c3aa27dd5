package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/internal/settings"
	"github.com/chatmem/chatmem/tokenizer"
)

// demoConfig is everything `chatmem demo` can be told.
type demoConfig struct{ store string }

// command is demo's list of settings.
func (c *demoConfig) command() *settings.Command {
	return &settings.Command{
		Name: "demo", Usage: "demo [--store URL]", Example: "chatmem demo", EnvPrefix: "CHATMEM_DEMO_",
		About: "Replays the seed's conversation with the seed's estimator and prints the seed's three lines.",
		Settings: []settings.Setting{
			{Name: "store", Group: groupStore, Value: settings.String(&c.store, ""), Example: "memory:",
				Help: storeURLHelp + "\n(empty: a temporary SQLite file, removed afterwards)"},
		},
	}
}

// runDemo replays the seed's conversation through a Memory with the seed's
// estimator, on the embedded default store (a SQLite file in a temporary
// directory, removed afterwards) unless --store names another, and prints
// the seed's lines.
func runDemo(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c demoConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("demo takes no arguments; run chatmem demo --help")
	}
	storeURL := &c.store
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
