package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// namedCounter stands for a provider's counter: Get hands the model
// through Options.Anthropic.
type namedCounter string

func (n namedCounter) Name() string { return string(n) }
func (namedCounter) Count(context.Context, chatmem.Message) (int, error) {
	return 1, nil
}

// fakeAnthropic is what anthropic.Counters returns, without the SDK: the
// bare name gets the configured model, a recorded one its own, and no key
// is ErrInvalid.
func fakeAnthropic(key, model string) func(string) (chatmem.Counter, error) {
	return func(m string) (chatmem.Counter, error) {
		if m == "" {
			m = model
		}
		if key == "" || m == "" {
			return nil, fmt.Errorf("%w: needs a key and a model", chatmem.ErrInvalid)
		}
		return namedCounter(AnthropicName + ":" + m), nil
	}
}

func TestGet(t *testing.T) {
	anth := Options{Anthropic: fakeAnthropic("k", "claude-sonnet-4-5")}
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
		{"anthropic:", Options{Anthropic: fakeAnthropic("k", "")}},
		{"anthropic", Options{}},                                                   // no provider
		{"anthropic", Options{Anthropic: fakeAnthropic("k", "")}},                  // no model
		{"anthropic:claude-sonnet-4-5", Options{Anthropic: fakeAnthropic("", "")}}, // no key
		{"anthropic:claude-sonnet-4-5", Options{}},                                 // no provider
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
