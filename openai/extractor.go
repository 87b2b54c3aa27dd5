package openai

import (
	"context"
	"log/slog"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/llm"
)

// FactKey is a fact key the extractor asks for, with what it means; the
// description goes into the instructions.
type FactKey = llm.FactKey

// DefaultKeys returns the keys a zero ExtractorOptions.Keys stands for:
// name, order_id, email, phone, language and location. Each call returns a
// new slice, which the caller may change or extend.
func DefaultKeys() []FactKey { return llm.DefaultKeys() }

// ExtractorOptions configure an Extractor: the connection and model, and
// the fact keys to ask for.
type ExtractorOptions struct {
	Options
	// Keys are the keys the model is asked for, with their meaning. Empty
	// means DefaultKeys.
	Keys []FactKey
	// StrictKeys keeps only facts under Keys. Off by default: a fact under
	// another snake_case key ("shoe_size") is kept too.
	StrictKeys bool
	// Logger receives a warning for each fact the checks drop (its key and
	// the reason, never its value). Nil discards them.
	Logger *slog.Logger
}

// Extractor is a chatmem.Extractor that asks a model for the facts the user
// states about themselves, over the Chat Completions API with a strict JSON
// schema (response_format json_schema), and checks every fact it gets back.
// It is safe for concurrent use.
type Extractor struct {
	x *llm.Extractor
}

var _ chatmem.Extractor = (*Extractor)(nil)

// NewExtractor returns an Extractor for opts. It makes no request. Besides
// what NewSummarizer refuses, an invalid or repeated key wraps
// chatmem.ErrInvalid.
func NewExtractor(opts ExtractorOptions) (*Extractor, error) {
	c, err := newClient(opts.Options)
	if err != nil {
		return nil, err
	}
	c.purpose = "extractor"
	x, err := llm.NewExtractor(c, llm.ExtractorOptions{
		Provider: provider, Keys: opts.Keys, StrictKeys: opts.StrictKeys, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Extractor{x: x}, nil
}

// Name returns "openai:" and the model, e.g. "openai:gpt-4o-mini"; it is
// the SetBy of the facts the Extractor returns.
func (x *Extractor) Name() string { return x.x.Name() }

// Extract asks the model for the facts the user states in msgs and returns
// those that pass every check, ordered by SourceSeq; SetBy is Name and
// CreatedAt is left zero for the caller to set. The messages must be stored
// ones (Seq above zero, each once), else the error wraps chatmem.ErrInvalid;
// system messages are not sent; with no user message there is nothing to
// extract and no request is made.
//
// The model's answer is trusted for nothing, schema or not. An answer that
// is not a JSON object with a "facts" array wraps chatmem.ErrUnavailable. A
// fact is kept only with exactly the fields key, value, source_seq and
// confidence; a valid key listed in Keys (or, without StrictKeys,
// snake_case); a non-empty value; the seq of a user message in msgs, so
// nothing is taken from the assistant, a tool or no message at all; a
// confidence in [0, 1] (one outside is dropped, not clamped); and passing
// chatmem.Fact.Validate. A fact that fails is dropped and logged, and the
// others are returned.
func (x *Extractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	return x.x.Extract(ctx, msgs)
}
