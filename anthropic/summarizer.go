package anthropic

import (
	"context"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/llm"
)

// Summarizer is a chatmem.Summarizer that asks a model for the rolling
// summary over the Messages API. It is safe for concurrent use.
type Summarizer struct {
	s llm.Summarizer
}

var _ chatmem.Summarizer = (*Summarizer)(nil)

// NewSummarizer returns a Summarizer for opts. It makes no request. A
// missing model, a missing API key for the default base URL, or an option
// out of range wraps chatmem.ErrInvalid.
func NewSummarizer(opts Options) (*Summarizer, error) {
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	c.purpose = "summarizer"
	return &Summarizer{s: llm.Summarizer{Completer: c, Provider: provider}}, nil
}

// Name returns "anthropic:" and the model, e.g. "anthropic:claude-haiku-4-5".
func (s *Summarizer) Name() string { return s.s.Name() }

// Summarize returns the model's summary of prev followed by msgs, trimmed,
// in one request: the instructions in the system field, prev and msgs as
// delimited data in the user message (see the package doc). System messages
// in msgs are not sent. When msgs hold nothing to send, prev is returned as
// it is, with no request; when prev is empty too, the error wraps
// chatmem.ErrInvalid. An empty or whitespace-only answer is an error
// wrapping chatmem.ErrUnavailable, never a summary; so are answers cut at
// MaxTokens or refused. Request errors are classified as the package doc
// says.
func (s *Summarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	return s.s.Summarize(ctx, prev, msgs)
}
