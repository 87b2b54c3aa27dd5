package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/chatmem/chatmem"
)

// runRecount recounts conversations under another tokenizer (issue 3): each
// conversation records the tokenizer its stored counts came from, a context
// read with another one counts on the fly, and this command makes the other
// one the conversation's.
func runRecount(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("recount",
		"recount --store URL [--data-dir DIR] [--tenant T] --tokenizer NAME ID...\n\n"+
			"Counts every message of each conversation with the tokenizer and stores the counts,\n"+
			"the running totals and the tokenizer's name in place of the old ones, so that context\n"+
			"reads use stored counts of that tokenizer instead of counting on the fly. It reads and\n"+
			"counts the whole conversation: maintenance, not something to run per request. Stored\n"+
			"summaries keep their counts until the next summary is written. Prints one line per\n"+
			"conversation with its new totals; a conversation that fails is reported on standard\n"+
			"error and the others are still recounted (exit 1).",
		"chatmem recount --store postgres://localhost/chatmem --tenant acme --tokenizer o200k_base c1 c2", stderr)
	storeURL := fs.String("store", "", storeURLHelp)
	dataDir := fs.String("data-dir", defaultDataDir, "data directory of the default SQLite store")
	tenant := fs.String("tenant", chatmem.DefaultTenant, "tenant of the conversations")
	tok := fs.String("tokenizer", "", "tokenizer to recount with (required): "+strings.Join(tokenizerNames(), ", "))
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tok == "" {
		return usageErr("recount needs --tokenizer")
	}
	if fs.NArg() == 0 {
		return usageErr("recount needs at least one conversation ID")
	}
	keys := make([]chatmem.Key, fs.NArg())
	for i, id := range fs.Args() {
		keys[i] = chatmem.Key{Tenant: *tenant, ID: id}
		if err := keys[i].Validate(); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	counter, err := newCounter(*tok)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	store, err := openStore(ctx, *storeURL, *dataDir)
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
		// counter.Name, not *tok: "anthropic" resolves to "anthropic:MODEL".
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
