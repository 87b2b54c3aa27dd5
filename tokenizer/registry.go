package tokenizer

import (
	"fmt"
	"strings"

	"github.com/chatmem/chatmem"
)

// Options configure the counters Get builds. The zero value serves every
// counter but "anthropic", which needs its API key and model.
type Options struct {
	// Anthropic configures the "anthropic" counter.
	Anthropic AnthropicOptions
}

// Names returns the names Get resolves, for help texts and error messages:
// "estimate", "o200k_base", "cl100k_base" and "anthropic".
func Names() []string {
	return []string{EstimateName, O200kBase, Cl100kBase, AnthropicName}
}

// Get returns the counter with the given name, as Names lists them. It also
// resolves the Name of an Anthropic counter, "anthropic:MODEL", which a
// conversation records: the model in the name then replaces
// opts.Anthropic.Model. An unknown name, or an "anthropic" without the options
// it needs, wraps chatmem.ErrInvalid.
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
		return NewAnthropic(opts.Anthropic)
	}
	if model, ok := strings.CutPrefix(name, AnthropicName+":"); ok && model != "" {
		opts.Anthropic.Model = model
		return NewAnthropic(opts.Anthropic)
	}
	return nil, fmt.Errorf("%w: unknown tokenizer %q (known: %s)", chatmem.ErrInvalid, name, strings.Join(Names(), ", "))
}
