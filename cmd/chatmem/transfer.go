package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/transfer"
)

// validTenant checks a --tenant value (exit 2 when bad).
func validTenant(t string) error {
	if err := chatmem.ValidateID(t); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("tenant: %w", err)}
	}
	return nil
}

// runExport writes a tenant's conversations as chatmem/v1 NDJSON, or as
// OpenAI-style transcripts.
func runExport(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("export",
		"export --store URL [--tenant T] [--conversation ID] [--format chatmem|openai] [--out FILE]\n\n"+
			"Writes the tenant's conversations (or one) as chatmem/v1 NDJSON (docs/export-format.md):\n"+
			"every message with every field, summaries, and facts with their history. --format openai\n"+
			"writes {\"id\",\"messages\"} lines instead (lossy: no seq, times, tokens, metadata, summary\n"+
			"or facts); with --policy and --budget, each conversation's window under that policy.",
		"chatmem export --store sqlite:chatmem-data/chatmem.db --out backup.ndjson", stderr)
	storeURL := fs.String("store", "", storeURLHelp)
	dataDir := fs.String("data-dir", defaultDataDir, "data directory of the default SQLite store")
	tenant := fs.String("tenant", chatmem.DefaultTenant, "the tenant whose conversations to export")
	conversation := fs.String("conversation", "", "export only this conversation")
	format := fs.String("format", "chatmem", "chatmem (lossless NDJSON) or openai (lossy transcripts)")
	policy := fs.String("policy", "all", "with --format openai: the policy whose window to write")
	budget := fs.Int("budget", 0, "with --format openai: the policy's token budget")
	turns := fs.Int("turns", 0, "with --format openai: the last_turns policy's turns")
	out := fs.String("out", "-", "output file (- is standard output)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("export takes no arguments (got %q)", fs.Args())
	}
	if err := validTenant(*tenant); err != nil {
		return err
	}
	var ids []string
	if *conversation != "" {
		if err := chatmem.ValidateID(*conversation); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("conversation: %w", err)}
		}
		ids = []string{*conversation}
	}
	if *format != "chatmem" && *format != "openai" {
		return usageErr("--format %q: want chatmem or openai", *format)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyKind(*policy), Budget: *budget, Turns: *turns}
	if *format == "openai" {
		if err := p.Validate(); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	store, err := openStore(ctx, *storeURL, *dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	w, finish, err := createOut(*out, stdout)
	if err != nil {
		return err
	}
	if *format == "chatmem" {
		err = transfer.Export(ctx, store, *tenant, w, transfer.ExportOptions{IDs: ids})
	} else {
		opts := transfer.OpenAIExportOptions{IDs: ids}
		if p.Kind != chatmem.PolicyAll {
			// Each conversation's window is counted with its own tokenizer;
			// Counter is for new conversations, which an export makes none of.
			counter, cerr := newCounter("estimate")
			if cerr != nil {
				return cerr
			}
			mem, merr := chatmem.New(store, chatmem.Options{Counter: counter, Counters: newCounter, TailCacheBytes: -1})
			if merr != nil {
				return merr
			}
			opts.Window = func(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error) {
				win, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
				return win.Messages, err
			}
		}
		err = transfer.ExportOpenAI(ctx, store, *tenant, w, opts)
	}
	return finish(err)
}

// createOut opens the output file (or stdout for "-"); finish flushes and
// closes it, and removes a file whose export failed.
func createOut(path string, stdout io.Writer) (io.Writer, func(error) error, error) {
	if path == "-" || path == "" {
		bw := bufio.NewWriterSize(stdout, 1<<16)
		return bw, func(err error) error {
			if ferr := bw.Flush(); err == nil {
				err = ferr
			}
			return err
		}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	return bw, func(err error) error {
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
		return err
	}, nil
}

// runImport reads chatmem/v1 NDJSON (or OpenAI-style transcripts) into a
// store, reporting each conversation that is not created as new.
func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("import",
		"import --store URL [--tenant T] [--on-conflict skip|fail|replace] [--format chatmem|openai] FILE|-\n\n"+
			"Reads chatmem/v1 NDJSON (as export writes it) into the tenant's conversations. Running it\n"+
			"twice changes nothing; a run that was killed is finished by running it again. A conversation\n"+
			"that exists with other content is a conflict: skipped and reported (skip), the end of the\n"+
			"import (fail), or deleted and imported (replace). A malformed line refuses its conversation\n"+
			"whole, naming the line. Prints each conflict and refusal, then a summary; exits 1 if there\n"+
			"were any. --format openai reads {\"id\",\"messages\"} lines, or one JSON array of messages\n"+
			"(its conversation named by --conversation or the file's name), counted with --tokenizer.",
		"chatmem import --store postgres://localhost/chatmem backup.ndjson", stderr)
	storeURL := fs.String("store", "", storeURLHelp)
	dataDir := fs.String("data-dir", defaultDataDir, "data directory of the default SQLite store")
	tenant := fs.String("tenant", chatmem.DefaultTenant, "the tenant to import into")
	onConflict := fs.String("on-conflict", "skip", "skip, fail or replace a conversation stored with other content")
	format := fs.String("format", "chatmem", "chatmem (NDJSON from export) or openai (transcripts)")
	conversation := fs.String("conversation", "", "with --format openai and a JSON array: the conversation's id (default: the file's name)")
	tok := fs.String("tokenizer", "o200k_base", "with --format openai: the tokenizer that counts the messages ("+strings.Join(tokenizerNames(), ", ")+")")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("import takes one FILE (or - for standard input)")
	}
	if err := validTenant(*tenant); err != nil {
		return err
	}
	policy, err := transfer.ParseConflict(*onConflict)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if *format != "chatmem" && *format != "openai" {
		return usageErr("--format %q: want chatmem or openai", *format)
	}
	in, name := stdin, fs.Arg(0)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	store, err := openStore(ctx, *storeURL, *dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	report := func(r transfer.Result) error {
		if r.Status == transfer.StatusConflict || r.Status == transfer.StatusInvalid {
			fmt.Fprintf(stderr, "%s %s: %s\n", r.Status, orDash(r.Conversation), r.Error)
		}
		return nil
	}
	var totals transfer.Totals
	if *format == "chatmem" {
		totals, err = transfer.Import(ctx, store, *tenant, in, transfer.ImportOptions{OnConflict: policy}, report)
	} else {
		counter, cerr := newCounter(*tok)
		if cerr != nil {
			return &exitError{code: 2, err: cerr}
		}
		mem, merr := chatmem.New(store, chatmem.Options{Counter: counter, Counters: newCounter})
		if merr != nil {
			return merr
		}
		id := *conversation
		if id == "" && name != "-" {
			id = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
		}
		totals, err = transfer.ImportOpenAI(ctx, mem, store, *tenant, in, transfer.OpenAIImportOptions{ID: id, OnConflict: policy}, report)
	}
	b, _ := json.Marshal(totals)
	fmt.Fprintf(stdout, "%s\n", b)
	if err != nil {
		return err
	}
	if totals.Conflicts > 0 || totals.Invalid > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d conflicts, %d refused conversations", totals.Conflicts, totals.Invalid)}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runMigrate copies a tenant's conversations from one store to another and
// verifies them.
func runMigrate(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate",
		"migrate --from URL --to URL [--tenant T] [--on-conflict fail|skip|replace]\n\n"+
			"Copies the tenant's conversations (messages, summaries, facts with history) from one store\n"+
			"to another, one conversation at a time, in memory that does not grow with the data, with a\n"+
			"progress bar on stderr. Killed, it continues where it stopped when run again. Then it\n"+
			"compares every conversation's digest in both stores and prints the counts; it exits 1 if\n"+
			"any conversation is missing or differs.",
		"chatmem migrate --from sqlite:chatmem-data/chatmem.db --to postgres://localhost/chatmem", stderr)
	from := fs.String("from", "", "the source store's URL (required)")
	to := fs.String("to", "", "the target store's URL (required)")
	tenant := fs.String("tenant", chatmem.DefaultTenant, "the tenant to migrate")
	onConflict := fs.String("on-conflict", "fail", "fail, skip or replace a conversation the target holds with other content")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("migrate takes no arguments (got %q)", fs.Args())
	}
	if *from == "" || *to == "" {
		return usageErr("migrate needs --from and --to")
	}
	if *from == *to {
		return usageErr("--from and --to name the same store")
	}
	if err := validTenant(*tenant); err != nil {
		return err
	}
	policy, err := transfer.ParseConflict(*onConflict)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	src, err := openStore(ctx, *from, "")
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer src.Close()
	dst, err := openStore(ctx, *to, "")
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer dst.Close()
	var bar *progress
	rep, err := transfer.Migrate(ctx, src, dst, *tenant, transfer.MigrateOptions{OnConflict: policy, Progress: func(p transfer.Progress) {
		if bar == nil {
			bar = newProgress(stderr, fmt.Sprintf("migrating %d conversations, %d messages", p.TotalConversations, p.TotalMessages), int(max(p.TotalMessages, 1)))
		}
		bar.set(int(p.Messages))
	}})
	if bar != nil {
		bar.done()
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintf(stdout, "%s\n", b)
	if err != nil {
		return err
	}
	if len(rep.Missing) > 0 || len(rep.Mismatched) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("verification: %d missing, %d differ (run migrate again once the source is quiet)", len(rep.Missing), len(rep.Mismatched))}
	}
	fmt.Fprintf(stderr, "verified %d conversations: every digest matches\n", rep.Verified)
	return nil
}
