package anthropic

import (
	"context"
	"fmt"
	"log/slog"

	"chatmem"
)

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
// states about themselves, over the Messages API, as JSON text, and checks
// every fact it gets back. It is safe for concurrent use.
//
// It asks for JSON text rather than forcing a tool call or setting
// output_config.format: a forced tool_choice is refused whenever thinking is
// on, which some models do by default and cannot turn off, and structured
// outputs exist only on newer models. Plain JSON text works on every model;
// the checks Extract makes are what the answer is trusted on.
type Extractor struct {
	c      *client
	keys   map[string]bool
	strict bool
	system string
	log    *slog.Logger
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
	keys := opts.Keys
	if len(keys) == 0 {
		keys = DefaultKeys()
	}
	set, err := checkKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("anthropic extractor: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Extractor{c: c, keys: set, strict: opts.StrictKeys, system: extractSystem(keys, opts.StrictKeys), log: log}, nil
}

// Name returns "anthropic:" and the model, e.g. "anthropic:claude-haiku-4-5";
// it is the SetBy of the facts the Extractor returns.
func (x *Extractor) Name() string { return x.c.name() }

// Extract asks the model for the facts the user states in msgs and returns
// those that pass every check, ordered by SourceSeq; SetBy is Name and
// CreatedAt is left zero for the caller to set. The messages must be stored
// ones (Seq above zero, each once), else the error wraps chatmem.ErrInvalid;
// system messages are not sent; with no user message there is nothing to
// extract and no request is made.
//
// The model's answer is trusted for nothing. Its text must hold a JSON
// object with a "facts" array (a Markdown code fence or words around it are
// tolerated), else the error wraps chatmem.ErrUnavailable (a malformed
// answer is a provider failure that a retry may mend). Each fact must have
// exactly the fields key, value, source_seq and confidence of the right
// types; a key that passes chatmem.ValidateFactKey and is listed in Keys
// (or, without StrictKeys, is snake_case); a value that is not empty once
// trimmed; the seq of a user message in msgs as source_seq, so a fact taken
// from an assistant or tool message, or from no message at all, is dropped;
// a confidence in [0, 1] (one outside is dropped, not clamped: the model
// did not follow the instructions); and pass chatmem.Fact.Validate. A fact
// that fails is dropped and logged, and the others are returned.
func (x *Extractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	userSeqs, err := userSeqs(msgs)
	if err != nil {
		return nil, fmt.Errorf("anthropic extract: %w", err)
	}
	if len(userSeqs) == 0 {
		return nil, nil
	}
	text, _ := transcript(msgs)
	answer, err := x.c.complete(ctx, "extract", x.c.params(x.system, extractUser(text)))
	if err != nil {
		return nil, err
	}
	facts, drops, err := parseFacts(answer, factRules{keys: x.keys, strict: x.strict, userSeqs: userSeqs, setBy: x.Name()})
	if err != nil {
		return nil, fmt.Errorf("anthropic extract: %w: %w", chatmem.ErrUnavailable, err)
	}
	for _, d := range drops {
		x.log.LogAttrs(ctx, slog.LevelWarn, "anthropic extractor dropped a fact",
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
