package chatmem

import (
	"context"
	"fmt"
	"time"
)

// Summary is a conversation's rolling summary: a text that stands for every
// message up to and including CoversSeq. The context sent with a summary is
// the summary plus the messages after CoversSeq, with no gap.
type Summary struct {
	Text string `json:"text"`
	// CoversSeq is the last sequence number the summary covers (S).
	CoversSeq int64 `json:"covers_seq"`
	// Tokens is Text's token count under the conversation's counter.
	Tokens int `json:"tokens"`
	// Summarizer names what wrote the summary ("offline", "openai:gpt-4o-mini").
	Summarizer string    `json:"summarizer"`
	CreatedAt  time.Time `json:"created_at"`
}

// Summarizer writes summaries. The next summary is made from the previous
// one plus only the newly covered messages, so each call costs what is new.
// Implementations treat the transcript as data, never as instructions. They
// are safe for concurrent use; a failed or empty result is an error, never
// stored as a summary.
type Summarizer interface {
	Name() string
	// Summarize returns the summary of prev (the previous summary's text,
	// empty for the first) followed by msgs, oldest first.
	Summarize(ctx context.Context, prev string, msgs []Message) (string, error)
}

// BoundedSummarizer is a Summarizer that can keep a summary within a number
// of tokens. Memory calls SummarizeWithin, when the summarizer has it, with
// the share of the budget a summary may take (see SummaryOptions); a
// summary counted over that share is asked for again with a smaller bound.
type BoundedSummarizer interface {
	Summarizer
	// SummarizeWithin is Summarize with the summary kept within about
	// maxTokens tokens (maxTokens >= 1).
	SummarizeWithin(ctx context.Context, prev string, msgs []Message, maxTokens int) (string, error)
}

// Summary returns the conversation's summary (ErrNotFound if none).
func (m *Memory) Summary(ctx context.Context, key Key) (Summary, error) {
	ss := m.caps.summaries
	if ss == nil {
		return Summary{}, fmt.Errorf("%w: this store keeps no summaries", ErrNotFound)
	}
	if err := key.Validate(); err != nil {
		return Summary{}, err
	}
	return ss.Summary(ctx, key)
}
