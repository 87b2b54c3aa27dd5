package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/oneshot"
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

func runWindow(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("window",
		"window [--policy all|last_turns|token_budget|summary_buffer|recall] [--budget B] [--turns N]\n"+
			"       [--facts] [--tokenizer NAME] [FILE|-]\n\n"+
			"Reads a JSON array of OpenAI-style chat messages (role, content, name, tool_calls,\n"+
			"tool_call_id) from FILE or standard input, counts them and prints the window the\n"+
			`policy sends: {"messages":[...],"tokens":N,"dropped":N}. summary_buffer summarizes what`+"\n"+
			"its window leaves out with the offline summarizer (no model; the summary follows the\n"+
			"budget), recall adds the older messages most relevant to the newest user message, and\n"+
			"--facts adds what the rule extractor finds in the user messages; the output then has\n"+
			`"summary" and "facts" too. Nothing is stored. Bad input exits 2; a budget too small`+"\n"+
			"for the newest user message exits 1.",
		"chatmem window --policy token_budget --budget 40 --tokenizer o200k_base chat.json", stderr)
	policy := fs.String("policy", string(chatmem.PolicyTokenBudget), "policy: "+strings.Join(policyNames(), ", "))
	budget := fs.Int("budget", 0, "token budget for the whole request (required for token_budget; caps last_turns)")
	turns := fs.Int("turns", 0, "turns to keep (last_turns)")
	facts := fs.Bool("facts", false, "add the facts the rule extractor finds in the user messages, as a pinned system message")
	tok := fs.String("tokenizer", "estimate", "tokenizer: "+strings.Join(tokenizerNames(), ", "))
	if err := parse(fs, args); err != nil {
		return err
	}
	p := chatmem.Policy{Kind: chatmem.PolicyKind(*policy), Budget: *budget, Turns: *turns, Facts: *facts}
	if err := p.Validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	counter, err := newCounter(*tok)
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	in := stdin
	switch fs.NArg() {
	case 0:
	case 1:
		if name := fs.Arg(0); name != "-" {
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

func policyNames() []string {
	var s []string
	for _, k := range chatmem.Policies {
		s = append(s, string(k))
	}
	return s
}
