package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/settings"
)

// purgeConfig is everything `chatmem purge` can be told.
type purgeConfig struct {
	store, dataDir, tenant string
	olderThan              time.Duration
}

// command is purge's list of settings. The store is the deployment's
// (CHATMEM_STORE, CHATMEM_CONFIG), as serve's.
func (c *purgeConfig) command() *settings.Command {
	s := storeSettings(&c.store, &c.dataDir, "", true)
	s = append(s,
		settings.Setting{Name: "older-than", Group: "purge", Value: settings.Duration(&c.olderThan, 0, true), Example: "30d",
			Help: "delete conversations not updated for this long (required)"},
		settings.Setting{Name: "tenant", Group: "purge", Value: settings.String(&c.tenant, ""), Example: "acme",
			Help: "purge only this tenant (empty: every tenant)"},
	)
	return &settings.Command{
		Name:  "purge",
		Usage: "purge [--store URL] [--data-dir DIR] --older-than DURATION [--tenant T]",
		About: "Deletes the conversations not updated for longer than --older-than, with their\n" +
			"messages, summaries and facts: the tenant's, or every tenant's without --tenant.\n" +
			"Prints how many it deleted. On an error it still prints how many it deleted before.",
		Example:   "chatmem purge --store redis://localhost:6379 --older-than 30d --tenant acme",
		EnvPrefix: "CHATMEM_PURGE_", ConfigEnv: envConfig,
		Settings: s,
	}
}

// runPurge deletes conversations by age with chatmem.Purger.
func runPurge(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c purgeConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if c.olderThan <= 0 {
		return usageErr("purge needs a positive --older-than (such as 30d); run chatmem purge --help")
	}
	if len(cmd.Args()) > 0 {
		return usageErr("purge takes no arguments (got %q); run chatmem purge --help", cmd.Args())
	}
	if c.tenant != "" {
		if err := chatmem.ValidateID(c.tenant); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--tenant: %w", err)}
		}
	}
	store, err := openStore(ctx, c.store, c.dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	p, ok := store.(chatmem.Purger)
	if !ok {
		return fmt.Errorf("the %s store cannot purge by age", storeName(c.store))
	}
	before := time.Now().Add(-c.olderThan)
	n, err := p.PurgeInactive(ctx, c.tenant, before)
	fmt.Fprintf(stdout, "deleted %d conversations not updated since %s\n", n, before.UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return nil
}
