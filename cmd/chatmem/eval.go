package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/eval"
	"github.com/chatmem/chatmem/offline"
)

func runEval(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("eval",
		"eval --dataset locomo|jsonl --data PATH [--policy all,last_turns,token_budget,summary_buffer,recall]\n"+
			"       [--budget 512,1024,2048,4096] [--turns 10] [--facts] [--bm25] [--tokenizer estimate] [--json] [--out DIR]\n\n"+
			"Replays each conversation of the dataset into a store, message by message, with the offline\n"+
			"summarizer (and, with --facts, the rule extractor) running inside each append, then asks each\n"+
			"question as the next user message and scores the context each policy would send at each\n"+
			"budget: evidence recall (the share of the question's evidence turns in the context; all-hit\n"+
			"and any-hit rates), answer presence (the share of the normalized gold answer's words in it),\n"+
			"tokens sent (mean, p50, p95) and the time to assemble it (p50, p99). all and last_turns take\n"+
			"no budget and make one row each. LoCoMo's categories 1-4 make the overall figures; category 5\n"+
			"(adversarial) is reported apart. No model answers the questions.\n\n"+
			"--dataset jsonl reads one conversation per line:\n"+
			`  {"id":"...","messages":[OpenAI-style messages],"probes":[{"question":"...","answer":"...","evidence":[1-based positions]}]}`+"\n\n"+
			"--out DIR writes recall_vs_tokens.svg and cumulative_tokens.svg (tokens sent per user turn,\n"+
			"summed, over the first conversation).",
		"chatmem eval --dataset locomo --data ../shared/data/locomo/locomo10.json --tokenizer estimate --out /tmp/evalout", stderr)
	dataset := fs.String("dataset", "", "dataset format: locomo or jsonl")
	data := fs.String("data", "", "path of the dataset file")
	policiesFlag := fs.String("policy", strings.Join(policyNames(), ","), "comma-separated policies")
	budgetsFlag := fs.String("budget", "512,1024,2048,4096", "comma-separated token budgets (token_budget, summary_buffer)")
	turns := fs.Int("turns", eval.DefaultTurns, "turns kept by last_turns")
	facts := fs.Bool("facts", false, "add the facts block to every policy (runs the rule extractor during the replay)")
	tok := fs.String("tokenizer", "estimate", "tokenizer: "+strings.Join(tokenizerNames(), ", "))
	asJSON := fs.Bool("json", false, "print the results as one JSON object")
	outDir := fs.String("out", "", "write SVG charts to this directory")
	storeURL := fs.String("store", "memory:", storeURLHelp)
	dataDir := fs.String("data-dir", defaultDataDir, "data directory of the default SQLite store (with --store '')")
	bm25 := fs.Bool("bm25", false, "add a baseline row per budget: plain BM25 over single turns, the question as the query")
	parallel := fs.Int("parallel", 1, "conversations replayed at once (more is faster; assembly times then include contention)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("eval: unexpected argument %q", fs.Arg(0))
	}
	var load func(io.Reader) (*eval.Dataset, error)
	switch *dataset {
	case "locomo":
		load = eval.LoadLoCoMo
	case "jsonl":
		load = eval.LoadJSONL
	case "":
		return usageErr("eval: --dataset is required (locomo or jsonl)")
	default:
		return usageErr("eval: unknown --dataset %q (want locomo or jsonl)", *dataset)
	}
	if *data == "" {
		return usageErr("eval: --data PATH is required")
	}
	var policies []chatmem.PolicyKind
	for _, p := range strings.Split(*policiesFlag, ",") {
		k := chatmem.PolicyKind(strings.TrimSpace(p))
		if err := (chatmem.Policy{Kind: k, Budget: 1, Turns: 1}).Validate(); err != nil {
			return &exitError{code: 2, err: err}
		}
		policies = append(policies, k)
	}
	budgets, err := parseBudgets(*budgetsFlag)
	if err != nil {
		return err
	}
	if *turns < 1 {
		return usageErr("eval: --turns must be at least 1")
	}
	if *parallel < 1 {
		return usageErr("eval: --parallel must be at least 1")
	}
	counter, err := newCounter(*tok)
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
	store, err := openStore(ctx, *storeURL, *dataDir)
	if err != nil {
		return err
	}
	defer store.Close()

	var bar *progress
	cfg := eval.Config{
		Store: store, Counter: counter, Counters: newCounter,
		Policies: policies, Budgets: budgets, Turns: *turns, Facts: *facts,
		Extractors: []chatmem.Extractor{offline.DefaultExtractor()},
		// The summary follows each replay's budget (chatmem.SummaryOptions).
		Summarizer: offline.NewSummarizer(offline.Options{}),
		BM25:       *bm25,
		Parallel:   *parallel,
		Progress: func(done, total int) {
			if bar == nil {
				bar = newProgress(stderr, fmt.Sprintf("replaying %d conversations", len(d.Conversations)), total)
			}
			bar.set(done)
		},
	}
	res, err := eval.Run(ctx, d, cfg)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		return err
	}
	if *outDir != "" {
		if err := writeCharts(*outDir, res); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return printEval(stdout, res)
}

// writeCharts writes the two SVG charts into dir.
func writeCharts(dir string, res *eval.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts := []struct {
		name  string
		write func(io.Writer, *eval.Result) error
	}{
		{"recall_vs_tokens.svg", eval.RecallChart},
		{"cumulative_tokens.svg", eval.CumulativeChart},
	}
	for _, c := range charts {
		f, err := os.Create(filepath.Join(dir, c.name))
		if err != nil {
			return err
		}
		err = c.write(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", c.name, err)
		}
	}
	return nil
}

// printEval prints the results as tables: the overall figures per row,
// then recall and answer presence per category.
func printEval(w io.Writer, res *eval.Result) error {
	d := res.Data
	fmt.Fprintf(w, "%s: %d conversations, %d messages, %d questions; tokenizer %s; %.1fs\n",
		res.Dataset, res.Conversations, res.Messages, res.Questions, res.Tokenizer, res.Seconds)
	fmt.Fprintf(w, "evidence: %d malformed and %d unresolved IDs skipped; %d questions without evidence, %d without valid evidence (left out of recall); %d without an answer (left out of answer presence)\n\n",
		d.MalformedEvidence, d.UnresolvedEvidence, d.NoEvidence, d.NoValidEvidence, d.NoAnswer)

	scope := "all questions"
	if hasAdversarial(res) {
		scope = "categories 1-4"
	}
	fmt.Fprintf(w, "Overall (%s):\n", scope)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trecall\tall-hit\tany-hit\tanswer\ttokens mean\tp50\tp95\tp50 µs\tp99 µs\tsummary\tfailed\t")
	for _, r := range res.Rows {
		g := r.Overall
		summary := "-"
		if r.Policy == string(chatmem.PolicySummaryBuffer) {
			summary = fmt.Sprintf("%.0f%%", 100*g.SummarySent)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t%d\t%d\t%.0f\t%.0f\t%s\t%d\t\n",
			r.Label(), g.Recall, g.AllHit, g.AnyHit, g.AnswerPresence, g.TokensMean, g.TokensP50, g.TokensP95, g.AssemblyP50us, g.AssemblyP99us, summary, r.Failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Rows) == 0 || (len(res.Rows[0].Categories) == 0 && res.Rows[0].Adversarial == nil) {
		return nil
	}
	for _, metric := range []struct {
		name string
		get  func(eval.Group) float64
		n    func(eval.Group) int
	}{
		{"Evidence recall", func(g eval.Group) float64 { return g.Recall }, func(g eval.Group) int { return g.RecallQuestions }},
		{"Answer presence", func(g eval.Group) float64 { return g.AnswerPresence }, func(g eval.Group) int { return g.AnswerQuestions }},
	} {
		fmt.Fprintf(w, "\n%s by category (n: questions scored):\n", metric.name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		header := "policy\t"
		for _, g := range res.Rows[0].Categories {
			header += fmt.Sprintf("cat %d (n=%d)\t", g.Category, metric.n(g))
		}
		header += fmt.Sprintf("overall (n=%d)\t", metric.n(res.Rows[0].Overall))
		if a := res.Rows[0].Adversarial; a != nil {
			header += fmt.Sprintf("cat 5 apart (n=%d)\t", metric.n(*a))
		}
		fmt.Fprintln(tw, header)
		for _, r := range res.Rows {
			cell := func(g eval.Group) string {
				if metric.n(g) == 0 {
					return "-\t"
				}
				return fmt.Sprintf("%.3f\t", metric.get(g))
			}
			line := r.Label() + "\t"
			for _, g := range r.Categories {
				line += cell(g)
			}
			line += cell(r.Overall)
			if r.Adversarial != nil {
				line += cell(*r.Adversarial)
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// parseBudgets parses a comma-separated list of positive budgets.
func parseBudgets(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usageErr("eval: --budget: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func hasAdversarial(res *eval.Result) bool {
	return len(res.Rows) > 0 && res.Rows[0].Adversarial != nil
}
