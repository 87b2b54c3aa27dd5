package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

func TestGet(t *testing.T) {
	anth := Options{Anthropic: AnthropicOptions{APIKey: "k", Model: "claude-sonnet-4-5", BaseURL: "http://127.0.0.1:1"}}
	tests := []struct {
		name     string
		opts     Options
		wantName string
	}{
		{"estimate", Options{}, "estimate"},
		{"o200k_base", Options{}, "o200k_base"},
		{"cl100k_base", Options{}, "cl100k_base"},
		{"anthropic", anth, "anthropic:claude-sonnet-4-5"},
		// A recorded name brings its model along.
		{"anthropic:claude-haiku-4-5", anth, "anthropic:claude-haiku-4-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Get(tt.name, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Name(); got != tt.wantName {
				t.Errorf("Get(%q).Name() = %q, want %q", tt.name, got, tt.wantName)
			}
			// Resolving the counter's own name gives the same tokenizer back.
			again, err := Get(c.Name(), tt.opts)
			if err != nil || again.Name() != c.Name() {
				t.Errorf("Get(%q) = %v, %v; want a counter named %q", c.Name(), again, err, c.Name())
			}
		})
	}
}

func TestGetInvalid(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"", Options{}},
		{"gpt2", Options{}},
		{"Estimate", Options{}},
		{"anthropic:", Options{Anthropic: AnthropicOptions{APIKey: "k"}}},
		{"anthropic", Options{}}, // no key, no model
		{"anthropic", Options{Anthropic: AnthropicOptions{APIKey: "k"}}}, // no model
		{"anthropic:claude-sonnet-4-5", Options{}},                       // no key
	}
	for _, tt := range tests {
		_, err := Get(tt.name, tt.opts)
		if !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Get(%q) error = %v, want ErrInvalid", tt.name, err)
		}
	}
	_, err := Get("gpt2", Options{})
	for _, n := range Names() {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("Get(gpt2) error %q does not list %q", err, n)
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{"estimate", "o200k_base", "cl100k_base", "anthropic"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}
