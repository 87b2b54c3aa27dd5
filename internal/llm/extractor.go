package llm

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/chatmem/chatmem"
)

// ExtractorOptions configure an Extractor; the zero value of each field
// means its default.
type ExtractorOptions struct {
	// Provider starts each error's context and log message: "openai" gives
	// "openai extract: ...".
	Provider string
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

// Extractor is a chatmem.Extractor that asks a model, through a Completer,
// for the facts the user states about themselves, with the JSON schema of
// the answer in the Request, and checks every fact it gets back. It is safe
// for concurrent use when its Completer is.
type Extractor struct {
	c        Completer
	provider string
	keys     map[string]bool
	strict   bool
	system   string
	schema   *Schema
	log      *slog.Logger
}

var _ chatmem.Extractor = (*Extractor)(nil)

// NewExtractor returns an Extractor that asks c. It makes no request. An
// invalid or repeated key wraps chatmem.ErrInvalid.
func NewExtractor(c Completer, opts ExtractorOptions) (*Extractor, error) {
	keys := opts.Keys
	if len(keys) == 0 {
		keys = DefaultKeys()
	}
	set, err := checkKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("%s extractor: %w", opts.Provider, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Extractor{
		c: c, provider: opts.Provider, keys: set, strict: opts.StrictKeys,
		system: extractSystem(keys, opts.StrictKeys), schema: factsSchema(keys, opts.StrictKeys), log: log,
	}, nil
}

// Name returns the Completer's name, e.g. "openai:gpt-4o-mini"; it is the
// SetBy of the facts the Extractor returns.
func (x *Extractor) Name() string { return x.c.Name() }

// Extract asks the model for the facts the user states in msgs and returns
// those that pass every check, ordered by SourceSeq; SetBy is Name and
// CreatedAt is left zero for the caller to set. The messages must be stored
// ones (Seq above zero, each once), else the error wraps chatmem.ErrInvalid;
// system messages are not sent; with no user message there is nothing to
// extract and no request is made.
//
// The model's answer is trusted for nothing. Its text must hold a JSON
// object with a "facts" array (a Markdown code fence or words around it are
// tolerated, for models not held to the schema), else the error wraps
// chatmem.ErrUnavailable (a malformed answer is a provider failure that a
// retry may mend). Each fact must have exactly the fields key, value,
// source_seq and confidence of the right types; a key that passes
// chatmem.ValidateFactKey and is listed in Keys (or, without StrictKeys, is
// snake_case); a value that is not empty once trimmed; the seq of a user
// message in msgs as source_seq, so a fact taken from an assistant or tool
// message, or from no message at all, is dropped; a confidence in [0, 1]
// (one outside is dropped, not clamped: the model did not follow the
// schema); and pass chatmem.Fact.Validate. A fact that fails is dropped and
// logged, and the others are returned. The Completer's errors are returned
// wrapped.
func (x *Extractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	userSeqs, err := userSeqs(msgs)
	if err != nil {
		return nil, fmt.Errorf("%s extract: %w", x.provider, err)
	}
	if len(userSeqs) == 0 {
		return nil, nil
	}
	text, _ := transcript(msgs)
	answer, err := x.c.Complete(ctx, Request{System: x.system, User: extractUser(text), Schema: x.schema})
	if err != nil {
		return nil, fmt.Errorf("%s extract: %w", x.provider, err)
	}
	facts, drops, err := parseFacts(answer, factRules{keys: x.keys, strict: x.strict, userSeqs: userSeqs, setBy: x.Name()})
	if err != nil {
		return nil, fmt.Errorf("%s extract: %w: %w", x.provider, chatmem.ErrUnavailable, err)
	}
	for _, d := range drops {
		x.log.LogAttrs(ctx, slog.LevelWarn, x.provider+" extractor dropped a fact",
			slog.String("extractor", x.Name()), slog.Int("index", d.index), slog.String("key", d.key), slog.String("reason", d.reason))
	}
	return facts, nil
}

// userSeqs returns the seqs of the user messages in msgs, which must all be
// stored (Seq above zero, each once).
func userSeqs(msgs []chatmem.Message) (map[int64]bool, error) {
	all := make(map[int64]bool, len(msgs))
	user := make(map[int64]bool)
	for i, m := range msgs {
		if m.Seq <= 0 {
			return nil, fmt.Errorf("%w: message %d has no seq; facts need stored messages", chatmem.ErrInvalid, i)
		}
		if all[m.Seq] {
			return nil, fmt.Errorf("%w: seq %d appears twice", chatmem.ErrInvalid, m.Seq)
		}
		all[m.Seq] = true
		if m.Role == chatmem.RoleUser {
			user[m.Seq] = true
		}
	}
	return user, nil
}
