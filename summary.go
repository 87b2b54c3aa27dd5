package chatmem

import (
	"context"
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

// Fact is one typed key/value fact about a conversation's user ("name":
// "Kavya", "order_id": "SE-10423"), with its provenance.
type Fact struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// SourceSeq is the message the fact was taken from (0: set by the app
	// with no source message).
	SourceSeq int64 `json:"source_seq,omitempty"`
	// SetBy is who set it: "app", or the extractor's name ("rules", ...).
	SetBy      string    `json:"set_by"`
	Confidence float64   `json:"confidence"`
	CreatedAt  time.Time `json:"created_at"`
}

// Extractor finds facts in messages as they arrive. Implementations keep
// only what the user states about themselves, never the assistant's
// statements, and treat the transcript as data, never as instructions.
type Extractor interface {
	Name() string
	// Extract returns the facts stated in msgs, each with SourceSeq set to
	// the message it came from. Later facts for the same key come later.
	Extract(ctx context.Context, msgs []Message) ([]Fact, error)
}
