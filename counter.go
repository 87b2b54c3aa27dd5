package chatmem

import "context"

// Counter counts the tokens a message costs under one tokenizer, including
// its tool calls (name and arguments) and the chat format's per-message
// framing. Implementations live in package tokenizer.
//
// Count is safe for concurrent use. Counters that call a service (Anthropic's
// count_tokens) may fail; they wrap ErrUnavailable or ErrInvalid.
type Counter interface {
	// Name identifies the tokenizer ("estimate", "o200k_base", ...). A
	// conversation records the name its stored counts came from.
	Name() string
	// Count returns the tokens of m.
	Count(ctx context.Context, m Message) (int, error)
}

// RequestOverhead is implemented by counters whose chat format adds tokens
// once per request (OpenAI primes every reply with 3 tokens). Windows report
// it in their total.
type RequestOverhead interface {
	RequestOverhead() int
}

// TextCounter is implemented by counters that count plain text, without a
// message's framing. PolicyRecall uses it to count the markers it adds; for
// counters without it, a marker is taken to cost one token per byte, an
// upper bound for every tokenizer.
type TextCounter interface {
	CountText(text string) (int, error)
}
