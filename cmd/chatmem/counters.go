package main

import (
	"os"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/tokenizer"
)

// newCounter resolves a tokenizer name for the CLI. The anthropic counter
// takes its key, model and base URL from ANTHROPIC_API_KEY,
// CHATMEM_ANTHROPIC_MODEL and ANTHROPIC_BASE_URL.
func newCounter(name string) (chatmem.Counter, error) {
	return tokenizer.Get(name, tokenizer.Options{Anthropic: tokenizer.AnthropicOptions{
		APIKey:  os.Getenv("ANTHROPIC_API_KEY"),
		Model:   os.Getenv("CHATMEM_ANTHROPIC_MODEL"),
		BaseURL: os.Getenv("ANTHROPIC_BASE_URL"),
	}})
}

func tokenizerNames() []string { return tokenizer.Names() }
