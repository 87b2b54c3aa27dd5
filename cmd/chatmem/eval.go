package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/eval"
	"github.com/chatmem/chatmem/internal/progress"
	"github.com/chatmem/chatmem/internal/settings"
	"github.com/chatmem/chatmem/offline"
)

// evalConfig is everything `chatmem eval` can be told.
type evalConfig struct {
	dataset, data, tokenizer, outDir, store, dataDir, scope string
	policies, caches                                        []string
	budgets                                                 []int
	turns, parallel, lowWater, recentPercent                int
	facts, asJSON, bm25, sessions                           bool
}

// command is eval's list of settings. Its store is its own
// (CHATMEM_EVAL_STORE), in memory unless told otherwise.
func (c *evalConfig) command() *settings.Command {
	s := []settings.Setting{
		{Name: "dataset", Group: "dataset", Value: settings.Choice(&c.dataset, "", "locomo", "jsonl"), Example: "locomo", Help: "dataset format: locomo or jsonl (required)"},
		{Name: "data", Group: "dataset", Env: "CHATMEM_EVAL_DATA", Value: settings.String(&c.data, ""), Example: "../shared/data/locomo/locomo10.json",
			Help: "path of the dataset file (required; relative to the working directory)"},
		{Name: "policy", Group: "policies", Value: settings.List(&c.policies, policyNames(), policyNames()...), Example: "token_budget,summary_buffer", Help: "policies to score"},
		{Name: "budget", Group: "policies", Value: settings.IntList(&c.budgets, []int{512, 1024, 2048, 4096}, 1), Example: "512,4096", Help: "token budgets (token_budget, summary_buffer, recall)"},
		{Name: "cache", Group: "policies", Value: settings.List(&c.caches, []string{"off"}, "off", chatmem.CacheStable), Example: "off,stable",
			Help: "window cache modes of the budgeted policies: off (plain) and stable (cache-stable windows); one row per mode"},
		{Name: "low-water", Group: "policies", Value: settings.Int(&c.lowWater, 0, 0, 95), Example: "80",
			Help: "percent of the budget a cache-stable window drops to when it moves (0: the library's default, 1,024 tokens below the budget)"},
		{Name: "recent-percent", Group: "policies", Value: settings.Int(&c.recentPercent, 0, 0, 100), Example: "85",
			Help: "percent of the budget recall's recent part gets (0: the library's default: 10, or 75 in stable mode)"},
		{Name: "turns", Group: "policies", Value: settings.Int(&c.turns, eval.DefaultTurns, 1, 1<<31-1), Help: "turns kept by last_turns"},
		{Name: "facts", Group: "policies", Value: settings.Bool(&c.facts, false), Example: "true", Help: "add the facts block to every policy (runs the rule extractor during the replay)"},
		{Name: "bm25", Group: "policies", Value: settings.Bool(&c.bm25, false), Example: "true", Help: "add a baseline row per budget: plain BM25 over single turns, the question as the query"},
		{Name: "scope", Group: "policies", Value: settings.Choice(&c.scope, chatmem.ScopeConversation, chatmem.ScopeConversation, chatmem.ScopeUser), Example: "user",
			Help: "where recall looks: conversation (its own history) or user (all of its user's conversations; with\n--sessions-as-conversations, the past sessions)"},
		{Name: "sessions-as-conversations", Group: "dataset", Value: settings.Bool(&c.sessions, false), Example: "true",
			Help: "replay each session (LoCoMo's D<n>) as its own conversation of one user, and ask each question in\na new conversation of that user"},
		{Name: "tokenizer", Group: "policies", Value: tokenizerSetting(&c.tokenizer, "estimate", false), Help: "tokenizer that counts the messages"},
		{Name: "parallel", Group: "run", Value: settings.Int(&c.parallel, 1, 1, 1024), Example: "4", Help: "conversations replayed at once (more is faster; assembly times then include contention)"},
		{Name: "json", Group: "run", Value: settings.Bool(&c.asJSON, false), Example: "true", Help: "print the results as one JSON object"},
		{Name: "out", Group: "run", Value: settings.String(&c.outDir, ""), Example: "/tmp/evalout", Help: "write SVG charts to this directory"},
	}
	s = append(s, storeSettings(&c.store, &c.dataDir, "memory:", false)...)
	return &settings.Command{
		Name: "eval",
		Usage: "eval --dataset locomo|jsonl --data PATH [--policy all,last_turns,token_budget,summary_buffer,recall]\n" +
			"       [--budget 512,1024,2048,4096] [--cache off,stable] [--turns 10] [--facts] [--bm25] [--scope conversation|user]\n" +
			"       [--sessions-as-conversations] [--tokenizer estimate] [--json] [--out DIR]",
		About: "Replays each conversation of the dataset into a store, message by message, with the offline\n" +
			"summarizer (and, with --facts, the rule extractor) running inside each append, then asks each\n" +
			"question as the next user message and scores the context each policy would send at each\n" +
			"budget: evidence recall (the share of the question's evidence turns in the context; all-hit\n" +
			"and any-hit rates), answer presence (the share of the normalized gold answer's words in it),\n" +
			"tokens sent (mean, p50, p95) and the time to assemble it (p50, p99). all and last_turns take\n" +
			"no budget and make one row each. LoCoMo's categories 1-4 make the overall figures; category 5\n" +
			"(adversarial) is reported apart. No model answers the questions.\n\n" +
			"--sessions-as-conversations replays each session as its own conversation of one user and asks\n" +
			"each question in a new conversation of that user: token_budget then sees nothing of the past\n" +
			"sessions, recall --scope user recalls from all of them.\n\n" +
			"--dataset jsonl reads one conversation per line:\n" +
			`  {"id":"...","messages":[OpenAI-style messages],"probes":[{"question":"...","answer":"...","evidence":[1-based positions]}]}` + "\n\n" +
			"--out DIR writes recall_vs_tokens.svg, cumulative_tokens.svg (tokens sent per user turn,\n" +
			"summed, over the first conversation) and recall_vs_cost.svg (evidence recall against the\n" +
			"effective input cost per request under OpenAI's and Anthropic's prompt caches).\n" +
			"docs/evaluation.md says where to get LoCoMo.",
		Example:   "chatmem eval --dataset locomo --data ../shared/data/locomo/locomo10.json --tokenizer estimate --out /tmp/evalout",
		EnvPrefix: "CHATMEM_EVAL_",
		Settings:  s,
	}
}

func runEval(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c evalConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("eval: unexpected argument %q; run chatmem eval --help", cmd.Args()[0])
	}
	dataset, data := &c.dataset, &c.data
	var load func(io.Reader) (*eval.Dataset, error)
	switch *dataset {
	case "locomo":
		load = eval.LoadLoCoMo
	case "jsonl":
		load = eval.LoadJSONL
	case "":
		return usageErr("eval: --dataset is required (locomo or jsonl); run chatmem eval --help")
	}
	if *data == "" {
		return usageErr("eval: --data PATH is required; run chatmem eval --help")
	}
	var policies []chatmem.PolicyKind
	for _, p := range c.policies {
		policies = append(policies, chatmem.PolicyKind(p))
	}
	if len(policies) == 0 {
		return usageErr("eval: --policy names no policy; run chatmem eval --help")
	}
	var caches []string
	for _, m := range c.caches {
		if m == "off" {
			m = ""
		}
		caches = append(caches, m)
	}
	counter, err := newCounter(c.tokenizer)
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	f, err := os.Open(*data)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	d, err := load(f)
	f.Close()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	store, err := openStore(ctx, c.store, c.dataDir)
	if err != nil {
		return err
	}
	defer store.Close()

	var bar *progress.Bar
	cfg := eval.Config{
		Store: store, Counter: counter, Counters: newCounter,
		Policies: policies, Budgets: c.budgets, Caches: caches, LowWater: c.lowWater, RecentPercent: c.recentPercent, Turns: c.turns, Facts: c.facts,
		Extractors: []chatmem.Extractor{offline.DefaultExtractor()},
		// The summary follows each replay's budget (chatmem.SummaryOptions).
		Summarizer:              offline.NewSummarizer(offline.Options{}),
		BM25:                    c.bm25,
		Parallel:                c.parallel,
		Scope:                   c.scope,
		SessionsAsConversations: c.sessions,
		Progress: func(done, total int) {
			if bar == nil {
				bar = progress.New(stderr, fmt.Sprintf("replaying %d conversations", len(d.Conversations)), total)
			}
			bar.Set(done)
		},
	}
	res, err := eval.Run(ctx, d, cfg)
	if bar != nil {
		bar.Done()
	}
	if err != nil {
		return err
	}
	if c.outDir != "" {
		if err := eval.WriteCharts(c.outDir, res); err != nil {
			return err
		}
	}
	if c.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return eval.WriteTable(stdout, res)
}
