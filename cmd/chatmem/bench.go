package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/postgresfloor"
	"github.com/chatmem/chatmem/internal/floor/redisfloor"
	"github.com/chatmem/chatmem/internal/floor/sqlitefloor"
	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/internal/settings"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// benchConfig is everything `chatmem bench` can be told.
type benchConfig struct {
	store, dataDir, policy, scope string
	sizes                         []int
	budget, turns                 int
	facts, asJSON, replies        bool
	iterations                    int
	httpURL, apiKey               string
	conversations                 int
	duration                      time.Duration
	maxTurns                      int
	baseline, soak                bool
	workers                       int
	sample                        time.Duration
	rssGrowth                     float64
}

// command is bench's list of settings. Its store is its own
// (CHATMEM_BENCH_STORE), never the deployment's by accident.
func (c *benchConfig) command() *settings.Command {
	const maxInt32 = 1<<31 - 1
	s := storeSettings(&c.store, &c.dataDir, "", false)
	s = append(s, []settings.Setting{
		{Name: "messages", Group: "bench", Value: settings.IntList(&c.sizes, []int{1000, 100000, 1000000}, 1), Example: "1000,1000000", Help: "conversation sizes"},
		{Name: "policy", Group: "bench", Value: settings.Choice(&c.policy, string(chatmem.PolicyTokenBudget), policyNames()...), Help: "policy of the context reads"},
		{Name: "scope", Group: "bench", Value: settings.Choice(&c.scope, chatmem.ScopeConversation, chatmem.ScopeConversation, chatmem.ScopeUser), Example: "user",
			Help: "recall scope: user spreads each size's messages over conversations of one user (1 per 100\nmessages, at most 1,000) and measures a new conversation of theirs recalling from all of them"},
		{Name: "budget", Group: "bench", Value: settings.Int(&c.budget, 4000, 0, maxInt32), Help: "token budget"},
		{Name: "turns", Group: "bench", Value: settings.Int(&c.turns, 0, 0, maxInt32), Example: "10", Help: "turns (last_turns)"},
		{Name: "facts", Group: "bench", Value: settings.Bool(&c.facts, false), Example: "true", Help: "add the facts block (runs the rule extractor in the worker)"},
		{Name: "iterations", Group: "bench", Value: settings.Int(&c.iterations, 300, 1, maxInt32), Help: "measured turns per size"},
		{Name: "replies", Group: "bench", Value: settings.Bool(&c.replies, false), Example: "true",
			Help: "measure the turn as a chatbot makes it: messages of 20 to 400 characters, the reply\nappended between turns, the worker's indexing counted, with the store's time per turn\n(Redis main-thread CPU, PostgreSQL pg_stat_statements) and the ratios to the floor"},
		{Name: "json", Group: "bench", Value: settings.Bool(&c.asJSON, false), Example: "true", Help: "print one JSON object per size (per target with --http)"},

		{Name: "http", Group: "load test", Value: settings.String(&c.httpURL, ""), Example: "http://127.0.0.1:8080", Help: "load-test a running server at this URL instead of a store"},
		{Name: "api-key", Group: "load test", Env: "CHATMEM_API_KEY", Value: settings.String(&c.apiKey, ""), Secret: true, Example: "k1", Help: "API key for --http"},
		{Name: "conversations", Group: "load test", Value: settings.Int(&c.conversations, 1000, 1, maxInt32),
			Help: "with --http: concurrent clients, one conversation each (--soak: conversations, default 10000)"},
		{Name: "duration", Group: "load test", Value: settings.Duration(&c.duration, 30*time.Second, true), Help: "with --http: how long to drive the load (--soak: default 30m)"},
		{Name: "max-turns", Group: "load test", Value: settings.Int(&c.maxTurns, 100000, 1, maxInt32), Help: "with --http: most turns per conversation"},
		{Name: "baseline", Group: "load test", Value: settings.Bool(&c.baseline, false), Example: "true", Help: "with --http: also drive a bare net/http handler the same way and print the throughput ratio"},

		{Name: "soak", Group: "soak", Value: settings.Bool(&c.soak, false), Example: "true",
			Help: "with --http: soak test (mixed appends, context, summary and facts reads, deletes)"},
		{Name: "workers", Group: "soak", Value: settings.Int(&c.workers, loadtest.DefaultSoakWorkers, 1, 1<<16), Help: "with --soak: concurrent clients"},
		{Name: "sample", Group: "soak", Value: settings.Duration(&c.sample, loadtest.DefaultSoakSample, true), Help: "with --soak: how often to scrape the server's /metrics"},
		{Name: "max-rss-growth", Group: "soak", Value: settings.Float(&c.rssGrowth, loadtest.DefaultSoakRSSGrowth, 0),
			Help: "with --soak: allowed growth of the server's RSS, last quarter over first (plus 16 MiB)"},
	}...)
	return &settings.Command{
		Name: "bench",
		Usage: "bench [--store URL] [--messages 1000,100000,1000000] [--budget 4000] [--policy P] [--scope conversation|user] [--turns N]\n" +
			"       [--iterations 300] [--replies] [--json]\n" +
			"       chatmem bench --http URL [--api-key K] [--conversations 1000] [--duration 30s] [--baseline]\n" +
			"       chatmem bench --http URL --soak [--conversations 10000] [--duration 30m] [--workers 64] [--sample 10s] [--max-rss-growth 0.25]",
		About: "For each size, fills one conversation with that many messages (with a progress bar on\n" +
			"standard error), then measures per-turn cost: append one message and read the context\n" +
			"under the policy. Prints p50 and p99 per size; with --json one JSON object per size.\n" +
			"With token_budget (no facts), also the same turn as one Memory.Turn, the store's raw floor\n" +
			"of it and a new process's first turn, measured alternately, with their ratios.\n" +
			"With --replies, measures a chat turn as users make it instead (token_budget): the user's\n" +
			"message and the window, then the assistant's reply appended, as Append + Context and as\n" +
			"Memory.Turn, against the store's floor doing the same, with the worker's catching up and\n" +
			"the server's time per turn where the store reports it (on a server of its own).\n" +
			"The benchmark conversations are deleted afterwards.\n\n" +
			"With --http, load-tests a running server instead: one client per conversation appends a\n" +
			"message and reads the context, over and over, for --duration (at most --max-turns turns),\n" +
			"then every conversation is read back and checked: each acknowledged append present once, in\n" +
			"order. Exits 1 on any error or lost message. Only point it at servers you run.\n\n" +
			"With --http and --soak, soak-tests it: --workers clients make a mix of appends, context reads\n" +
			"(every policy), summary and facts reads and deletes over --conversations conversations for\n" +
			"--duration, scraping /metrics every --sample; then every conversation is checked against\n" +
			"what the clients were told. Exits 1 on any error, any difference, or resident memory or\n" +
			"goroutines not flat. Start the server with a summarizer, a low --summary-trigger (600) and a\n" +
			"small --tail-cache-bytes (4MiB).",
		Example:   "chatmem bench --store sqlite:/tmp/bench.db --messages 1000,1000000 --budget 4000",
		EnvPrefix: "CHATMEM_BENCH_",
		Settings:  s,
	}
}

func runBench(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c benchConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("bench takes no arguments (got %q); run chatmem bench --help", cmd.Args())
	}
	if c.soak && c.httpURL == "" {
		return usageErr("--soak needs --http URL: it soaks a running server; run chatmem bench --help")
	}
	p := chatmem.Policy{Kind: chatmem.PolicyKind(c.policy), Budget: c.budget, Turns: c.turns}
	if c.httpURL != "" {
		if err := p.Validate(); err != nil {
			return &exitError{code: 2, err: err}
		}
		url := strings.TrimRight(c.httpURL, "/")
		if c.soak {
			cfg := loadtest.SoakConfig{URL: url, APIKey: c.apiKey, Conversations: c.conversations, Workers: c.workers,
				Duration: c.duration, Sample: c.sample, MaxRSSGrowth: c.rssGrowth}
			if !cmd.IsSet("conversations") {
				cfg.Conversations = loadtest.DefaultSoakConversations
			}
			if !cmd.IsSet("duration") {
				cfg.Duration = loadtest.DefaultSoakDuration
			}
			return benchSoak(ctx, cfg, c.asJSON, stdout, stderr)
		}
		cfg := loadtest.LoadConfig{URL: url, APIKey: c.apiKey, Conversations: c.conversations, Duration: c.duration, MaxTurns: c.maxTurns, Policy: p, Verify: true}
		results, err := loadtest.LoadAndCompare(ctx, cfg, c.baseline, stderr)
		if len(results) > 0 {
			if werr := loadtest.WriteLoad(stdout, results, c.asJSON); werr != nil && err == nil {
				err = werr
			}
		}
		return err
	}
	p.Facts = c.facts
	if c.scope == chatmem.ScopeUser {
		p.Scope = c.scope
	}
	if err := p.Validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	store, err := openStore(ctx, c.store, c.dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	if p.Kind == chatmem.PolicySummaryBuffer || p.Facts {
		// As a server runs it: the offline summarizer and rule extractor in
		// the worker, off the measured path.
		opts.Summarizer = offline.NewSummarizer(offline.Options{})
		opts.Extractors = []chatmem.Extractor{offline.DefaultExtractor()}
	}
	mem, err := chatmem.New(store, opts)
	if err != nil {
		return err
	}
	if err := mem.Start(); err != nil {
		return err
	}
	defer mem.Close()

	if c.replies {
		if p.Kind != chatmem.PolicyTokenBudget || p.Facts {
			return usageErr("--replies measures token_budget without facts; run chatmem bench --help")
		}
		return benchChat(ctx, mem, store, c, stdout, stderr)
	}
	var results []loadtest.BenchResult
	for _, n := range c.sizes {
		cfg := loadtest.BenchConfig{Policy: p, Messages: n, Iterations: c.iterations, Floor: storeFloor(store, opts.Counter, p.Budget)}
		if _, inProcess := store.(*memstore.Store); !inProcess {
			cfg.Reopen = func(ctx context.Context) (chatmem.Store, error) { return openStore(ctx, c.store, c.dataDir) }
		}
		r, err := loadtest.Bench(ctx, mem, cfg, stderr)
		if err != nil {
			return err
		}
		r.Store = storeName(c.store)
		results = append(results, r)
		if c.asJSON { // each size as soon as it is measured
			if err := loadtest.WriteBench(stdout, []loadtest.BenchResult{r}, true); err != nil {
				return err
			}
		}
	}
	if !c.asJSON {
		return loadtest.WriteBench(stdout, results, false)
	}
	return nil
}

// benchChat runs loadtest.ChatBench for each size and prints the results.
func benchChat(ctx context.Context, mem *chatmem.Memory, store chatmem.Store, c benchConfig, stdout, stderr io.Writer) error {
	var results []loadtest.ChatResult
	for _, n := range c.sizes {
		cfg := loadtest.ChatConfig{Messages: n, Turns: c.iterations, Budget: c.budget,
			Floor: chatFloor(store, tokenizer.Estimate{}, c.budget), Server: serverClock(ctx, store, stderr)}
		r, err := loadtest.ChatBench(ctx, mem, cfg, stderr)
		if err != nil {
			return err
		}
		r.Store = storeName(c.store)
		results = append(results, r)
		if c.asJSON {
			if err := loadtest.WriteChat(stdout, []loadtest.ChatResult{r}, true); err != nil {
				return err
			}
		}
	}
	if !c.asJSON {
		return loadtest.WriteChat(stdout, results, false)
	}
	return nil
}

// chatFloor returns the raw floor of a chat turn on store's backend for
// loadtest.ChatConfig.Floor: the store's floor from internal/floor, or
// the Go loop for the in-process store.
func chatFloor(store chatmem.Store, counter chatmem.Counter, budget int) func(context.Context, int, string) (loadtest.ChatFloor, error) {
	switch s := store.(type) {
	case *memstore.Store:
		return loadtest.ChatLoopFloor(counter, budget)
	case *sqlite.Store:
		return func(ctx context.Context, n int, content string) (loadtest.ChatFloor, error) {
			return asChatFloor(sqlitefloor.New(ctx, s.Path(), n, content))
		}
	case *redis.Store:
		return func(ctx context.Context, n int, content string) (loadtest.ChatFloor, error) {
			return asChatFloor(redisfloor.New(ctx, s.Client(), s.Prefix(), n, content))
		}
	case *postgres.Store:
		return func(ctx context.Context, n int, content string) (loadtest.ChatFloor, error) {
			return asChatFloor(postgresfloor.New(ctx, s.Pool(), s.Schema(), n, content))
		}
	}
	return nil
}

// asChatFloor returns f as a loadtest.ChatFloor, and a nil one (not a nil
// *F) with an error.
func asChatFloor[F loadtest.ChatFloor](f F, err error) (loadtest.ChatFloor, error) {
	if err != nil {
		return nil, err
	}
	return f, nil
}

// serverClock returns the clock of store's server's time for
// loadtest.ChatConfig.Server: Redis's main-thread CPU, PostgreSQL's
// pg_stat_statements where the server keeps it (else it says so on
// stderr); nil for the stores in the process.
func serverClock(ctx context.Context, store chatmem.Store, stderr io.Writer) loadtest.ServerClock {
	switch s := store.(type) {
	case *redis.Store:
		return func(ctx context.Context) (time.Duration, error) { return redisfloor.ServerTime(ctx, s.Client()) }
	case *postgres.Store:
		if _, err := postgresfloor.ServerTime(ctx, s.Pool()); err != nil {
			fmt.Fprintf(stderr, "no server time, wall time only: %v\n", err)
			return nil
		}
		return func(ctx context.Context) (time.Duration, error) { return postgresfloor.ServerTime(ctx, s.Pool()) }
	}
	return nil
}

// benchSoak runs the soak, prints its result and fails unless it was clean.
func benchSoak(ctx context.Context, cfg loadtest.SoakConfig, asJSON bool, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "soak: %d workers over %d conversations against %s for %s, /metrics every %s\n",
		cfg.Workers, cfg.Conversations, cfg.URL, cfg.Duration, cfg.Sample)
	res, err := loadtest.Soak(ctx, cfg, stderr)
	if asJSON {
		if jerr := json.NewEncoder(stdout).Encode(res); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		fmt.Fprintln(stdout, res.Line())
	}
	return err
}

// storeFloor returns the raw floor of a turn on store's backend for
// loadtest.BenchConfig.Floor: chatFloor's, whose replies Bench does not
// make.
func storeFloor(store chatmem.Store, counter chatmem.Counter, budget int) func(context.Context, int, string) (loadtest.StoreFloor, error) {
	f := chatFloor(store, counter, budget)
	if f == nil {
		return nil
	}
	return func(ctx context.Context, n int, content string) (loadtest.StoreFloor, error) {
		cf, err := f(ctx, n, content)
		if err != nil {
			return nil, err
		}
		return cf, nil
	}
}
