package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/oneshot"
	"github.com/chatmem/chatmem/internal/settings"
)

// windowOutput is what `chatmem window` prints.
type windowOutput struct {
	Messages []chatmem.Message `json:"messages"`
	Tokens   int               `json:"tokens"`
	Dropped  int               `json:"dropped"`
	// Summary and Facts say what summary_buffer and --facts added (the
	// summary and the facts are in Messages too, as system messages).
	Summary *windowSummary `json:"summary,omitempty"`
	Facts   []windowFact   `json:"facts,omitempty"`
}

type windowSummary struct {
	Text      string `json:"text"`
	CoversSeq int64  `json:"covers_seq"`
	Tokens    int    `json:"tokens"`
}

type windowFact struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	SourceSeq int64  `json:"source_seq"`
}

// The window's defaults are the chat proxy's (serve --proxy-budget, and
// the turns its last_turns keeps), so that `chatmem window FILE` prints a
// window.
const (
	defaultWindowBudget = 4000
	defaultWindowTurns  = 10
)

// windowConfig is everything `chatmem window` can be told.
type windowConfig struct {
	policy, tokenizer string
	budget, turns     int
	facts             bool
}

// command is window's list of settings.
func (c *windowConfig) command() *settings.Command {
	return &settings.Command{
		Name:  "window",
		Usage: "window [--policy all|last_turns|token_budget|summary_buffer|recall] [--budget B] [--turns N] [--facts] [--tokenizer NAME] [FILE|-]",
		About: "Reads a JSON array of OpenAI-style chat messages (role, content, name, tool_calls,\n" +
			"tool_call_id) from FILE or standard input, counts them and prints the window the\n" +
			`policy sends: {"messages":[...],"tokens":N,"dropped":N}. summary_buffer summarizes what` + "\n" +
			"its window leaves out with the offline summarizer (no model; the summary follows the\n" +
			"budget), recall adds the older messages most relevant to the newest user message, and\n" +
			"--facts adds what the rule extractor finds in the user messages; the output then has\n" +
			`"summary" and "facts" too. Nothing is stored. Bad input exits 2; a budget too small` + "\n" +
			"for the newest user message exits 1. With no flags (chatmem window FILE) it prints the\n" +
			"token_budget window of 4000 tokens, the chat proxy's default budget.",
		Example:   "chatmem window --policy token_budget --budget 40 --tokenizer o200k_base testdata/seed.json",
		EnvPrefix: "CHATMEM_WINDOW_",
		Settings: []settings.Setting{
			{Name: "policy", Group: "window", Value: settings.Choice(&c.policy, string(chatmem.PolicyTokenBudget), policyNames()...), Help: "the policy that picks the messages sent"},
			{Name: "budget", Group: "window", Value: settings.Int(&c.budget, defaultWindowBudget, 0, 1<<31-1), Example: "40",
				Help: "token budget for the whole request: token_budget, summary_buffer and recall fit their window in it;\nit caps last_turns (0: no cap)"},
			{Name: "turns", Group: "window", Value: settings.Int(&c.turns, defaultWindowTurns, 0, 1<<31-1), Example: "2", Help: "turns to keep (last_turns)"},
			{Name: "facts", Group: "window", Value: settings.Bool(&c.facts, false), Example: "true", Help: "add the facts the rule extractor finds in the user messages, as a pinned system message"},
			{Name: "tokenizer", Group: "window", Value: tokenizerSetting(&c.tokenizer, "estimate", false), Help: "tokenizer that counts the messages"},
		},
	}
}

func runWindow(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c windowConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	p := chatmem.Policy{Kind: chatmem.PolicyKind(c.policy), Budget: c.budget, Turns: c.turns, Facts: c.facts}
	if err := p.Validate(); err != nil {
		return policyError("window", p, err)
	}
	counter, err := newCounter(c.tokenizer)
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	in := stdin
	switch len(cmd.Args()) {
	case 0:
	case 1:
		if name := cmd.Args()[0]; name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			defer f.Close()
			in = f
		}
	default:
		return usageErr("window: takes at most one FILE (got %q); run chatmem window --help", cmd.Args())
	}
	msgs, err := decodeMessages(in)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	w, err := oneshot.Window(ctx, msgs, p, oneshot.Options{Counter: counter})
	if err != nil {
		if errors.Is(err, chatmem.ErrInvalid) {
			return &exitError{code: 2, err: err}
		}
		return err
	}
	out := windowOutput{Messages: make([]chatmem.Message, len(w.Messages)), Tokens: w.Tokens, Dropped: w.Dropped}
	for i, m := range w.Messages {
		// Print the messages as they came in, or as they are sent.
		m.Seq, m.Tokens, m.CreatedAt, m.Metadata = 0, 0, time.Time{}, nil
		out.Messages[i] = m
	}
	if s := w.Summary; s != nil {
		out.Summary = &windowSummary{Text: s.Text, CoversSeq: s.CoversSeq, Tokens: s.Tokens}
	}
	for _, f := range w.Facts {
		out.Facts = append(out.Facts, windowFact{Key: f.Key, Value: f.Value, SourceSeq: f.SourceSeq})
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// decodeMessages reads one JSON array of messages and validates it as a
// history (known roles, content, tool results after their calls).
func decodeMessages(r io.Reader) ([]chatmem.Message, error) {
	dec := json.NewDecoder(r)
	var msgs []chatmem.Message
	if err := dec.Decode(&msgs); err != nil {
		return nil, fmt.Errorf("input is not a JSON array of chat messages: %w", err)
	}
	if dec.More() {
		return nil, errors.New("input has more than one JSON value")
	}
	if err := chatmem.ValidateHistory(nil, msgs, chatmem.Limits{MaxBatch: -1}); err != nil {
		return nil, err
	}
	return msgs, nil
}

// policyError is a policy's refusal in the words of the command line:
// Policy.Validate speaks of budget and turns, the user of --budget and
// --turns.
func policyError(name string, p chatmem.Policy, err error) error {
	switch p.Kind {
	case chatmem.PolicyLastTurns:
		if p.Turns < 1 {
			return usageErr("%s: --policy %s needs --turns of at least 1; run chatmem %s --help", name, p.Kind, name)
		}
	case chatmem.PolicyTokenBudget, chatmem.PolicySummaryBuffer, chatmem.PolicyRecall:
		if p.Budget < 1 {
			return usageErr("%s: --policy %s needs --budget of at least 1; run chatmem %s --help", name, p.Kind, name)
		}
	}
	return usageErr("%s: %v; run chatmem %s --help", name, err, name)
}

func policyNames() []string {
	var s []string
	for _, k := range chatmem.Policies {
		s = append(s, string(k))
	}
	return s
}
