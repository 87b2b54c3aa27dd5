package eval

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/chatmem/chatmem"
)

// WriteCharts writes the two SVG charts of res into dir, creating it:
// recall_vs_tokens.svg (RecallChart) and cumulative_tokens.svg
// (CumulativeChart).
func WriteCharts(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts := []struct {
		name  string
		write func(io.Writer, *Result) error
	}{
		{"recall_vs_tokens.svg", RecallChart},
		{"cumulative_tokens.svg", CumulativeChart},
		{"recall_vs_cost.svg", CostChart},
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

// WriteTable writes res as tables, as `chatmem eval` prints it: the
// dataset's counts, the overall figures per row, then evidence recall and
// answer presence per category.
func WriteTable(w io.Writer, res *Result) error {
	d := res.Data
	fmt.Fprintf(w, "%s: %d conversations, %d messages, %d questions; tokenizer %s; %.1fs\n",
		res.Dataset, res.Conversations, res.Messages, res.Questions, res.Tokenizer, res.Seconds)
	if res.SessionsAsConversations {
		fmt.Fprintln(w, "sessions as conversations: each session replayed as its own conversation of one user, each question asked in a new conversation of that user")
	}
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
	if err := writeCosts(w, res); err != nil {
		return err
	}
	if len(res.Rows) == 0 || (len(res.Rows[0].Categories) == 0 && res.Rows[0].Adversarial == nil) {
		return nil
	}
	for _, metric := range []struct {
		name string
		get  func(Group) float64
		n    func(Group) int
	}{
		{"Evidence recall", func(g Group) float64 { return g.Recall }, func(g Group) int { return g.RecallQuestions }},
		{"Answer presence", func(g Group) float64 { return g.AnswerPresence }, func(g Group) int { return g.AnswerQuestions }},
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
			cell := func(g Group) string {
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

func hasAdversarial(res *Result) bool {
	return len(res.Rows) > 0 && res.Rows[0].Adversarial != nil
}

// writeCosts writes the cost table: per row, the requests sent at the
// user turns, their mean tokens, the share repeated from the previous
// request, and the effective input cost under each provider's prompt
// cache, as a share of the uncached cost (see Cost).
func writeCosts(w io.Writer, res *Result) error {
	var rows []Row
	for _, r := range res.Rows {
		if r.Cost != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nInput cost of the requests at each user turn (effective cost / uncached cost; cached input 0.1x,\nOpenAI from 1,024 tokens in 128-token steps, Anthropic writes 1.25x at the proxy's breakpoints;\nAnthropic marked: a plain window marked at its system prompt and last block too):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trequests\ttokens mean\tprefix repeated\tOpenAI\tAnthropic\tAnthropic marked\t")
	for _, r := range rows {
		c := r.Cost
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", r.Label(), c.Requests, float64(c.Tokens)/float64(c.Requests), c.PrefixShare, c.OpenAIRatio, c.AnthropicRatio, c.AnthropicMarkedRatio)
	}
	return tw.Flush()
}
