package llm

import (
	"context"
	"fmt"
	"strings"

	"github.com/chatmem/chatmem"
)

// Summarizer is a chatmem.Summarizer that asks a model, through Completer,
// for the rolling summary. It is safe for concurrent use when Completer is.
type Summarizer struct {
	Completer Completer
	// Provider starts each error's context: "openai" gives
	// "openai summarize: ...".
	Provider string
}

var _ chatmem.Summarizer = Summarizer{}

// Name returns the Completer's name, e.g. "openai:gpt-4o-mini".
func (s Summarizer) Name() string { return s.Completer.Name() }

// Summarize returns the model's summary of prev followed by msgs, trimmed,
// in one request: the instructions in Request.System, prev and msgs as
// delimited data in Request.User (see the package doc). System messages in
// msgs are not sent. When msgs hold nothing to send, prev is returned as it
// is, with no request; when prev is empty too, the error wraps
// chatmem.ErrInvalid. An empty or whitespace-only answer is an error
// wrapping chatmem.ErrUnavailable, never a summary. The Completer's errors
// are returned wrapped.
func (s Summarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	prev = strings.TrimSpace(prev)
	text, n := transcript(msgs)
	if n == 0 {
		if prev == "" {
			return "", fmt.Errorf("%w: %s summarize: no messages to summarize", chatmem.ErrInvalid, s.Provider)
		}
		return prev, nil
	}
	answer, err := s.Completer.Complete(ctx, Request{System: summarySystem, User: summaryUser(prev, text)})
	if err != nil {
		return "", fmt.Errorf("%s summarize: %w", s.Provider, err)
	}
	answer = strings.TrimSpace(answer)
	if answer == "" {
		return "", fmt.Errorf("%s summarize: %w: the model returned an empty summary", s.Provider, chatmem.ErrUnavailable)
	}
	return answer, nil
}
