package tokenizer

import (
	"fmt"
	"strings"

	"github.com/chatmem/chatmem"
)

// AnthropicName is the registry name of Anthropic's count_tokens counter,
// which lives with the Anthropic provider (package anthropic, whose
// Counters builds it); a conversation records it as "anthropic:MODEL".
const AnthropicName = "anthropic"

// Options configure the counters Get builds. The zero value serves every
// counter but "anthropic", which needs the Anthropic provider.
type Options struct {
	// Anthropic builds the "anthropic" counter for a model: the MODEL of a
	// recorded "anthropic:MODEL", or "" for the bare name (the function's
	// own configured model). Nil: the "anthropic" names wrap ErrInvalid.
	// cmd/chatmem sets it to anthropic.Counters with the server's key, so
	// that this package links no provider SDK.
	Anthropic func(model string) (chatmem.Counter, error)
}

// Names returns the names Get resolves, for help texts and error messages:
// "estimate", "o200k_base", "cl100k_base" and "anthropic".
func Names() []string {
	return []string{EstimateName, O200kBase, Cl100kBase, AnthropicName}
}

// Get returns the counter with the given name, as Names lists them. It also
// resolves the Name of an Anthropic counter, "anthropic:MODEL", which a
// conversation records: opts.Anthropic is then given that model. An
// unknown name, or an "anthropic" without opts.Anthropic, wraps
// chatmem.ErrInvalid.
//
// Every call builds a new counter. That is cheap for the local ones (the
// tiktoken codecs are shared), but an Anthropic counter's cache lives in the
// counter, so callers keep the counter they got rather than calling Get per
// message.
func Get(name string, opts Options) (chatmem.Counter, error) {
	switch name {
	case EstimateName:
		return Estimate{}, nil
	case O200kBase, Cl100kBase:
		return NewTiktoken(name)
	case AnthropicName:
		return anthropicCounter(opts, "")
	}
	if model, ok := strings.CutPrefix(name, AnthropicName+":"); ok && model != "" {
		return anthropicCounter(opts, model)
	}
	return nil, fmt.Errorf("%w: unknown tokenizer %q (known: %s)", chatmem.ErrInvalid, name, strings.Join(Names(), ", "))
}

// anthropicCounter builds the Anthropic counter through opts.Anthropic.
func anthropicCounter(opts Options, model string) (chatmem.Counter, error) {
	if opts.Anthropic == nil {
		return nil, fmt.Errorf("%w: tokenizer %q needs the Anthropic provider configured (tokenizer.Options.Anthropic, which chatmem serve sets from its anthropic settings)", chatmem.ErrInvalid, AnthropicName)
	}
	return opts.Anthropic(model)
}
