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
	"github.com/chatmem/chatmem/internal/progress"
	"github.com/chatmem/chatmem/internal/settings"
	"github.com/chatmem/chatmem/transfer"
)

// validTenant checks a --tenant value (exit 2 when bad).
func validTenant(t string) error {
	if err := chatmem.ValidateID(t); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--tenant: %w", err)}
	}
	return nil
}

// exportConfig is everything `chatmem export` can be told.
type exportConfig struct {
	store, dataDir, tenant, conversation, format, policy, out string
	budget, turns                                             int
}

// command is export's list of settings. The store is the deployment's
// (CHATMEM_STORE, CHATMEM_CONFIG), as serve's.
func (c *exportConfig) command() *settings.Command {
	s := storeSettings(&c.store, &c.dataDir, "", true)
	s = append(s,
		settings.Setting{Name: "tenant", Group: "export", Value: settings.String(&c.tenant, chatmem.DefaultTenant), Example: "acme",
			Help: "the tenant whose conversations to export"},
		settings.Setting{Name: "conversation", Group: "export", Value: settings.String(&c.conversation, ""), Example: "kavya-1",
			Help: "export only this conversation"},
		settings.Setting{Name: "format", Group: "export", Value: settings.Choice(&c.format, "chatmem", "chatmem", "openai"),
			Help: "chatmem (lossless NDJSON) or openai (lossy {\"id\",\"messages\"} transcripts)"},
		settings.Setting{Name: "policy", Group: "export", Value: settings.Choice(&c.policy, string(chatmem.PolicyAll), policyNames()...),
			Help: "with --format openai: the policy whose window to write"},
		settings.Setting{Name: "budget", Group: "export", Value: settings.Int(&c.budget, 0, 0, 1<<30),
			Help: "with --format openai: the policy's token budget"},
		settings.Setting{Name: "turns", Group: "export", Value: settings.Int(&c.turns, 0, 0, 1<<30),
			Help: "with --format openai: last_turns's turns"},
		settings.Setting{Name: "out", Group: "export", Value: settings.String(&c.out, "-"), Example: "backup.ndjson",
			Help: "output file (- is standard output)"},
	)
	return &settings.Command{
		Name:  "export",
		Usage: "export [--store URL] [--tenant T] [--conversation ID] [--format chatmem|openai] [--out FILE]",
		About: "Writes the tenant's conversations (or one) as chatmem/v1 NDJSON (docs/export-format.md):\n" +
			"every message with every field, summaries, and facts with their history. --format openai\n" +
			"writes {\"id\",\"messages\"} lines instead (lossy: no seq, times, tokens, metadata, summary\n" +
			"or facts); with --policy and --budget, each conversation's window under that policy.",
		Example:   "chatmem export --store sqlite:chatmem-data/chatmem.db --out backup.ndjson",
		EnvPrefix: "CHATMEM_EXPORT_", ConfigEnv: envConfig,
		Settings: s,
	}
}

// runExport writes a tenant's conversations as chatmem/v1 NDJSON, or as
// OpenAI-style transcripts.
func runExport(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c exportConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("export takes no arguments (got %q); run chatmem export --help", cmd.Args())
	}
	storeURL, dataDir, tenant, conversation, format, out := &c.store, &c.dataDir, &c.tenant, &c.conversation, &c.format, &c.out
	if err := validTenant(*tenant); err != nil {
		return err
	}
	var ids []string
	if *conversation != "" {
		if err := chatmem.ValidateID(*conversation); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--conversation: %w", err)}
		}
		ids = []string{*conversation}
	}
	p := chatmem.Policy{Kind: chatmem.PolicyKind(c.policy), Budget: c.budget, Turns: c.turns}
	if *format == "openai" {
		if err := p.Validate(); err != nil {
			return policyError("export", p, err)
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

// importConfig is everything `chatmem import` can be told.
type importConfig struct {
	store, dataDir, tenant, onConflict, format, conversation, tokenizer string
	maxContentBytes                                                     int64
}

// command is import's list of settings.
func (c *importConfig) command() *settings.Command {
	s := storeSettings(&c.store, &c.dataDir, "", true)
	s = append(s,
		settings.Setting{Name: "tenant", Group: "import", Value: settings.String(&c.tenant, chatmem.DefaultTenant), Example: "acme",
			Help: "the tenant to import into"},
		settings.Setting{Name: "on-conflict", Group: "import", Value: settings.Choice(&c.onConflict, "skip", "skip", "fail", "replace"),
			Help: "what to do with a conversation stored with other content: skip it, stop (fail) or replace it"},
		settings.Setting{Name: "format", Group: "import", Value: settings.Choice(&c.format, "chatmem", "chatmem", "openai"),
			Help: "chatmem (NDJSON from export) or openai (transcripts)"},
		settings.Setting{Name: "conversation", Group: "import", Value: settings.String(&c.conversation, ""), Example: "kavya-1",
			Help: "with --format openai and a file that is one JSON array: its conversation (default: the file's name)"},
		settings.Setting{Name: "tokenizer", Group: "import", Value: tokenizerSetting(&c.tokenizer, "o200k_base", false),
			Help: "with --format openai: the tokenizer that counts the messages"},
		settings.Setting{Name: "max-content-bytes", Group: "import", Value: settings.Size(&c.maxContentBytes, 256<<10, 1, 1<<30), Env: "CHATMEM_MAX_CONTENT_BYTES",
			Help: "largest message content a conversation may hold, as serve's setting (the same key and variable)"},
	)
	return &settings.Command{
		Name:  "import",
		Usage: "import [--store URL] [--tenant T] [--on-conflict skip|fail|replace] [--format chatmem|openai] FILE|-",
		About: "Reads chatmem/v1 NDJSON (as export writes it) into the tenant's conversations. Running it\n" +
			"twice changes nothing; a run that was killed is finished by running it again. A conversation\n" +
			"that exists with other content is a conflict: skipped and reported (skip), the end of the\n" +
			"import (fail), or deleted and imported (replace). A malformed line, or one over the limits\n" +
			"serve keeps (--max-content-bytes), refuses its conversation whole, naming the line, and the\n" +
			"import goes on. Prints each conflict and refusal, then a summary; exits 1 if there\n" +
			"were any. --format openai reads {\"id\",\"messages\"} lines, or one JSON array of messages\n" +
			"(its conversation named by --conversation or the file's name), counted with --tokenizer.",
		Example:   "chatmem import --store postgres://localhost/chatmem backup.ndjson",
		EnvPrefix: "CHATMEM_IMPORT_", ConfigEnv: envConfig,
		Settings: s,
	}
}

// runImport reads chatmem/v1 NDJSON (or OpenAI-style transcripts) into a
// store, reporting each conversation that is not created as new.
func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c importConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) != 1 {
		return usageErr("import takes one FILE (or - for standard input); run chatmem import --help")
	}
	storeURL, dataDir, tenant, format, conversation, tok := &c.store, &c.dataDir, &c.tenant, &c.format, &c.conversation, &c.tokenizer
	if err := validTenant(*tenant); err != nil {
		return err
	}
	policy, err := transfer.ParseConflict(c.onConflict)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	in, name := stdin, cmd.Args()[0]
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	warnInMemory(stderr, "import", *storeURL)
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
		opts := transfer.ImportOptions{OnConflict: policy, Limits: chatmem.Limits{MaxContentBytes: int(c.maxContentBytes)}, Tokenizer: knownTokenizer}
		totals, err = transfer.Import(ctx, store, *tenant, in, opts, report)
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

// migrateConfig is everything `chatmem migrate` can be told.
type migrateConfig struct {
	from, to, tenant, onConflict string
}

// command is migrate's list of settings.
func (c *migrateConfig) command() *settings.Command {
	return &settings.Command{
		Name:  "migrate",
		Usage: "migrate --from URL --to URL [--tenant T] [--on-conflict fail|skip|replace]",
		About: "Copies the tenant's conversations (messages, summaries, facts with history) from one store\n" +
			"to another, one conversation at a time, in memory that does not grow with the data, with a\n" +
			"progress bar on stderr. Killed, it continues where it stopped when run again. Then it\n" +
			"compares every conversation's digest in both stores and prints the counts; it exits 1 if\n" +
			"any conversation is missing or differs.",
		Example:   "chatmem migrate --from sqlite:chatmem-data/chatmem.db --to postgres://localhost/chatmem",
		EnvPrefix: "CHATMEM_MIGRATE_", ConfigEnv: envConfig,
		Settings: []settings.Setting{
			{Name: "from", Group: groupStore, Value: settings.String(&c.from, ""), Example: "sqlite:chatmem-data/chatmem.db",
				Help: "the source store's URL (required)"},
			{Name: "to", Group: groupStore, Value: settings.String(&c.to, ""), Example: "postgres://localhost/chatmem",
				Help: "the target store's URL (required)"},
			{Name: "tenant", Group: "migrate", Value: settings.String(&c.tenant, chatmem.DefaultTenant), Example: "acme",
				Help: "the tenant to migrate"},
			{Name: "on-conflict", Group: "migrate", Value: settings.Choice(&c.onConflict, "fail", "fail", "skip", "replace"),
				Help: "what to do with a conversation the target holds with other content"},
		},
	}
}

// runMigrate copies a tenant's conversations from one store to another and
// verifies them.
func runMigrate(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c migrateConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("migrate takes no arguments (got %q); run chatmem migrate --help", cmd.Args())
	}
	from, to, tenant := &c.from, &c.to, &c.tenant
	if *from == "" || *to == "" {
		return usageErr("migrate needs --from and --to; run chatmem migrate --help")
	}
	if *from == *to {
		return usageErr("--from and --to name the same store")
	}
	if err := validTenant(*tenant); err != nil {
		return err
	}
	policy, err := transfer.ParseConflict(c.onConflict)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	src, err := openStore(ctx, *from, "")
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer src.Close()
	warnInMemory(stderr, "migrate", *to)
	dst, err := openStore(ctx, *to, "")
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer dst.Close()
	var bar *progress.Bar
	rep, err := transfer.Migrate(ctx, src, dst, *tenant, transfer.MigrateOptions{OnConflict: policy, Progress: func(p transfer.Progress) {
		if bar == nil {
			bar = progress.New(stderr, fmt.Sprintf("migrating %d conversations, %d messages", p.TotalConversations, p.TotalMessages), int(max(p.TotalMessages, 1)))
		}
		bar.Set(int(p.Messages))
	}})
	if bar != nil {
		bar.Done()
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
