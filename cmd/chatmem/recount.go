package main

import (
	"context"
	"fmt"
	"io"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/settings"
)

// recountConfig is everything `chatmem recount` can be told.
type recountConfig struct {
	store, dataDir, tenant, tokenizer string
}

// command is recount's list of settings. The store is the deployment's
// (CHATMEM_STORE, CHATMEM_CONFIG), as serve's.
func (c *recountConfig) command() *settings.Command {
	s := storeSettings(&c.store, &c.dataDir, "", true)
	s = append(s,
		settings.Setting{Name: "tenant", Group: "recount", Value: settings.String(&c.tenant, chatmem.DefaultTenant), Example: "acme",
			Help: "tenant of the conversations"},
		settings.Setting{Name: "tokenizer", Group: "recount", Value: tokenizerSetting(&c.tokenizer, "", true), Example: "o200k_base",
			Help: "tokenizer to recount with (required)"},
	)
	return &settings.Command{
		Name:  "recount",
		Usage: "recount [--store URL] [--data-dir DIR] [--tenant T] --tokenizer NAME ID...",
		About: "Counts every message of each conversation with the tokenizer and stores the counts,\n" +
			"the running totals and the tokenizer's name in place of the old ones, so that context\n" +
			"reads use stored counts of that tokenizer instead of counting on the fly. It reads and\n" +
			"counts the whole conversation: maintenance, not something to run per request. Stored\n" +
			"summaries keep their counts until the next summary is written. Prints one line per\n" +
			"conversation with its new totals; a conversation that fails is reported on standard\n" +
			"error and the others are still recounted (exit 1).",
		Example:   "chatmem recount --store postgres://localhost/chatmem --tenant acme --tokenizer o200k_base c1 c2",
		EnvPrefix: "CHATMEM_RECOUNT_", ConfigEnv: envConfig,
		Settings: s,
	}
}

// runRecount recounts conversations under another tokenizer: each
// conversation records the tokenizer its stored counts came from, a context
// read with another one counts on the fly, and this command makes the other
// one the conversation's.
func runRecount(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c recountConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if c.tokenizer == "" {
		return usageErr("recount needs --tokenizer; run chatmem recount --help")
	}
	ids := cmd.Args()
	if len(ids) == 0 {
		return usageErr("recount needs at least one conversation ID; run chatmem recount --help")
	}
	keys := make([]chatmem.Key, len(ids))
	for i, id := range ids {
		keys[i] = chatmem.Key{Tenant: c.tenant, ID: id}
		if err := keys[i].Validate(); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	counter, err := newCounter(c.tokenizer)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	store, err := openStore(ctx, c.store, c.dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	mem, err := chatmem.New(store, chatmem.Options{Counter: counter})
	if err != nil {
		return err
	}

	failed := 0
	for _, key := range keys {
		// counter.Name, not c.tokenizer: "anthropic" resolves to "anthropic:MODEL".
		conv, err := mem.Recount(ctx, key, counter.Name())
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			fmt.Fprintln(stderr, "chatmem:", err)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "%s tokenizer=%s messages=%d tokens=%d system_tokens=%d\n",
			key.ID, conv.Tokenizer, conv.LastSeq, conv.Tokens, conv.SystemTokens)
	}
	if failed > 0 {
		return fmt.Errorf("recount: %d of %d conversations failed", failed, len(keys))
	}
	return nil
}
