package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
	"github.com/chatmem/chatmem/internal/settings"
	"github.com/chatmem/chatmem/tokenizer"
)

// newCounter resolves a tokenizer name for the CLI. The anthropic counter
// takes its key, model and base URL from ANTHROPIC_API_KEY,
// CHATMEM_ANTHROPIC_MODEL and ANTHROPIC_BASE_URL.
func newCounter(name string) (chatmem.Counter, error) {
	return tokenizer.Get(name, tokenizer.Options{Anthropic: anthropic.Counters(anthropic.CounterOptions{
		APIKey:  os.Getenv("ANTHROPIC_API_KEY"),
		Model:   os.Getenv("CHATMEM_ANTHROPIC_MODEL"),
		BaseURL: os.Getenv("ANTHROPIC_BASE_URL"),
	})})
}

func tokenizerNames() []string { return tokenizer.Names() }

// tokenizerSetting is a setting naming a tokenizer: one of
// tokenizer.Names, or anthropic:MODEL; with optional, it may be empty.
func tokenizerSetting(p *string, def string, optional bool) settings.Value {
	accepts := "one of " + strings.Join(tokenizerNames(), ", ") + ", or anthropic:MODEL"
	return settings.Checked(p, def, "tokenizer", accepts, func(name string) error {
		if optional && name == "" {
			return nil
		}
		return knownTokenizer(name)
	})
}

// knownTokenizer checks that name is one of tokenizer.Names or
// anthropic:MODEL, a name a server resolves (given the Anthropic key the
// CLI may not have).
func knownTokenizer(name string) error {
	if slices.Contains(tokenizerNames(), name) {
		return nil
	}
	if model, ok := strings.CutPrefix(name, tokenizer.AnthropicName+":"); ok && model != "" {
		return nil
	}
	return fmt.Errorf("unknown tokenizer %q", name)
}
