package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/settings"
)

// windowOutput is what `chatmem window` prints.
type windowOutput struct {
	Messages []chatmem.Message `json:"messages"`
	Tokens   int               `json:"tokens"`
	Dropped  int               `json:"dropped"`
}

// windowConfig is everything `chatmem window` can be told.
type windowConfig struct {
	policy, tokenizer string
	budget, turns     int
}

// command is window's list of settings.
func (c *windowConfig) command() *settings.Command {
	return &settings.Command{
		Name:  "window",
		Usage: "window [--policy token_budget|last_turns|all] [--budget B] [--turns N] [--tokenizer NAME] [FILE|-]",
		About: "Reads a JSON array of OpenAI-style chat messages (role, content, name, tool_calls,\n" +
			"tool_call_id) from FILE or standard input, counts them and prints the window the\n" +
			`policy sends: {"messages":[...],"tokens":N,"dropped":N}. Bad input exits 2; a budget` + "\n" +
			"too small for the newest user message exits 1.",
		Example:   "chatmem window --policy token_budget --budget 40 --tokenizer o200k_base chat.json",
		EnvPrefix: "CHATMEM_WINDOW_",
		Settings: []settings.Setting{
			{Name: "policy", Group: "window", Value: settings.Choice(&c.policy, string(chatmem.PolicyTokenBudget), policyNames()...), Help: "the policy that picks the messages sent"},
			{Name: "budget", Group: "window", Value: settings.Int(&c.budget, 0, 0, 1<<31-1), Example: "40", Help: "token budget for the whole request (required for token_budget; caps last_turns)"},
			{Name: "turns", Group: "window", Value: settings.Int(&c.turns, 0, 0, 1<<31-1), Example: "10", Help: "turns to keep (last_turns)"},
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
	policy, budget, turns, tok := &c.policy, &c.budget, &c.turns, &c.tokenizer
	p := chatmem.Policy{Kind: chatmem.PolicyKind(*policy), Budget: *budget, Turns: *turns}
	if err := p.Validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	counter, err := newCounter(*tok)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if o, ok := counter.(chatmem.RequestOverhead); ok {
		p.Overhead = o.RequestOverhead()
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
		return usageErr("window takes at most one file")
	}
	msgs, err := decodeMessages(in)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	for i := range msgs {
		if msgs[i].Tokens, err = counter.Count(ctx, msgs[i]); err != nil {
			return fmt.Errorf("count message %d: %w", i, err)
		}
	}
	w, err := chatmem.Apply(p, msgs)
	if err != nil {
		if errors.Is(err, chatmem.ErrInvalid) {
			return &exitError{code: 2, err: err}
		}
		return err
	}
	out := windowOutput{Messages: make([]chatmem.Message, len(w.Messages)), Tokens: w.Tokens, Dropped: w.Dropped}
	for i, m := range w.Messages {
		m.Tokens = 0 // print the messages as they came in
		out.Messages[i] = m
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

func policyNames() []string {
	var s []string
	for _, k := range chatmem.Policies {
		s = append(s, string(k))
	}
	return s
}
