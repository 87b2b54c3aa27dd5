package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/chatmem/chatmem"
)

// runPurge deletes conversations by age with chatmem.Purger.
func runPurge(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("purge",
		"purge --store URL [--data-dir DIR] --older-than DURATION [--tenant T]\n\n"+
			"Deletes the conversations not updated for longer than --older-than, with their\n"+
			"messages, summaries and facts: the tenant's, or every tenant's without --tenant.\n"+
			"Prints how many it deleted. On an error it still prints how many it deleted before.",
		"chatmem purge --store redis://localhost:6379 --older-than 720h --tenant acme", stderr)
	storeURL := fs.String("store", "", storeURLHelp)
	dataDir := fs.String("data-dir", defaultDataDir, "data directory of the default SQLite store")
	olderThan := fs.Duration("older-than", 0, "delete conversations not updated for this long (required; 720h is 30 days)")
	tenant := fs.String("tenant", "", "purge only this tenant (default: every tenant)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *olderThan <= 0 {
		return usageErr("purge needs a positive --older-than (such as 720h)")
	}
	if fs.NArg() > 0 {
		return usageErr("purge takes no arguments (got %q)", fs.Args())
	}
	if *tenant != "" {
		if err := chatmem.ValidateID(*tenant); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("tenant: %w", err)}
		}
	}
	store, err := openStore(ctx, *storeURL, *dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	p, ok := store.(chatmem.Purger)
	if !ok {
		return fmt.Errorf("the %s store cannot purge by age", storeName(*storeURL))
	}
	before := time.Now().Add(-*olderThan)
	n, err := p.PurgeInactive(ctx, *tenant, before)
	fmt.Fprintf(stdout, "deleted %d conversations not updated since %s\n", n, before.UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return nil
}
