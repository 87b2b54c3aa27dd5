package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/chatmem/chatmem"
)

// Completer sends one system+user exchange to a model and returns its text.
// The provider packages implement it over their SDKs.
type Completer interface {
	// Name returns the provider and the model, e.g. "openai:gpt-4o-mini".
	// It is the Name of the Summarizer and Extractor built on the
	// Completer, and the SetBy of the facts the Extractor returns.
	Name() string
	// Complete sends req and returns the text of the answer as the model
	// gave it (untrimmed). It is safe for concurrent use. An answer that is
	// unusable whatever its text (cut at the token cap, refused, filtered)
	// is an error wrapping chatmem.ErrUnavailable; a failed request is
	// classified as StatusError and RequestError do. The error carries no
	// provider or operation prefix: the Summarizer and Extractor add it.
	Complete(ctx context.Context, req Request) (string, error)
}

// Request is one exchange: the instructions and the data, kept apart.
type Request struct {
	// System holds all the instructions. A Completer sends it where its
	// API keeps instructions (a system message, a system field), never in
	// the user's turn.
	System string
	// User holds the data, delimited and escaped, sent as the one user
	// message.
	User string
	// Schema, if not nil, is the JSON schema the answer must follow. A
	// Completer whose API can hold the model to a schema (structured
	// outputs) sends it; one that cannot leaves it out, and the answer is
	// checked all the same.
	Schema *Schema
}

// Schema is a JSON schema for the answer, in the form strict structured
// outputs accept: every property required, no others allowed.
type Schema struct {
	Name        string
	Description string
	Schema      map[string]any
}

// StatusError returns the error for an API answer with an HTTP error
// status, detail describing it ("429 Too Many Requests rate_limit_error:
// ..."). A 408, 409, 429 or 5xx wraps chatmem.ErrUnavailable: the call may
// succeed if retried. Any other 4xx (bad key, unknown model, a parameter the
// server refuses) wraps chatmem.ErrInvalid. A status below 400 is unexpected
// and wraps neither.
func StatusError(code int, detail string) error {
	switch {
	case code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500:
		return fmt.Errorf("%w: %s", chatmem.ErrUnavailable, detail)
	case code >= 400:
		return fmt.Errorf("%w: %s", chatmem.ErrInvalid, detail)
	}
	return fmt.Errorf("unexpected %s", detail)
}

// RequestError returns the error for a request that got no API answer to
// classify. When the caller canceled ctx it is err as it is, which says
// nothing about the service; otherwise (a network failure, a deadline that
// passed, an unreadable answer) it wraps chatmem.ErrUnavailable and err.
func RequestError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %w", chatmem.ErrUnavailable, err)
}
