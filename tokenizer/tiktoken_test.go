package tokenizer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	tiktoken "github.com/tiktoken-go/tokenizer"

	"github.com/chatmem/chatmem"
)

// TestEncodingsMatchCookbook checks the library's encodings against token IDs
// printed in the OpenAI cookbook's "How to count tokens with tiktoken" (and
// "hello world", the test vector tiktoken's Python and Rust test suites use),
// so that a vocabulary or pre-tokenizer regression in the dependency shows up
// here.
func TestEncodingsMatchCookbook(t *testing.T) {
	tests := []struct {
		encoding tiktoken.Encoding
		text     string
		want     []uint
	}{
		{tiktoken.Cl100kBase, "tiktoken is great!", []uint{83, 1609, 5963, 374, 2294, 0}},
		{tiktoken.O200kBase, "tiktoken is great!", []uint{83, 8251, 2488, 382, 2212, 0}},
		{tiktoken.Cl100kBase, "hello world", []uint{15339, 1917}},
		{tiktoken.Cl100kBase, "antidisestablishmentarianism", []uint{519, 85342, 34500, 479, 8997, 2191}},
		{tiktoken.O200kBase, "antidisestablishmentarianism", []uint{493, 129901, 376, 160388, 21203, 2367}},
		{tiktoken.Cl100kBase, "2 + 2 = 4", []uint{17, 489, 220, 17, 284, 220, 19}},
		{tiktoken.O200kBase, "2 + 2 = 4", []uint{17, 659, 220, 17, 314, 220, 19}},
		{tiktoken.Cl100kBase, "お誕生日おめでとう", []uint{33334, 45918, 243, 21990, 9080, 33334, 62004, 16556, 78699}},
		{tiktoken.O200kBase, "お誕生日おめでとう", []uint{8930, 9697, 243, 128225, 8930, 17693, 4344, 48669}},
	}
	for _, tt := range tests {
		t.Run(string(tt.encoding)+"/"+tt.text, func(t *testing.T) {
			codec, err := tiktoken.Get(tt.encoding)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := codec.Encode(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
			}
			c, err := NewTiktoken(string(tt.encoding))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := c.CountText(tt.text); err != nil || n != len(tt.want) {
				t.Errorf("CountText(%q) = %d, %v; want %d", tt.text, n, err, len(tt.want))
			}
		})
	}
}

// cookbookExample is the example conversation of the OpenAI cookbook's "How to
// count tokens with tiktoken", section 6: six messages, four of them system
// messages with a name.
var cookbookExample = []chatmem.Message{
	{Role: chatmem.RoleSystem, Content: "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
	{Role: chatmem.RoleSystem, Name: "example_user", Content: "New synergies will help drive top-line growth."},
	{Role: chatmem.RoleSystem, Name: "example_assistant", Content: "Things working well together will increase revenue."},
	{Role: chatmem.RoleSystem, Name: "example_user", Content: "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
	{Role: chatmem.RoleSystem, Name: "example_assistant", Content: "Let's talk later when we're less busy about how to do better."},
	{Role: chatmem.RoleUser, Content: "This late pivot means we don't have time to boil the ocean for the client deliverable."},
}

// TestCookbookConversation reproduces the prompt_tokens the OpenAI API
// reported for cookbookExample, as printed in the cookbook: 129 for
// gpt-3.5-turbo, gpt-4-0613 and gpt-4 (cl100k_base) and 124 for gpt-4o and
// gpt-4o-mini (o200k_base). The sum of Count over the messages plus
// RequestOverhead must equal those figures; the test also spells the framing
// arithmetic out, so a change to either side is caught with a clear message.
func TestCookbookConversation(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		encoding string
		want     int // prompt_tokens reported by the OpenAI API in the cookbook
	}{
		{Cl100kBase, 129},
		{O200kBase, 124},
	} {
		t.Run(tt.encoding, func(t *testing.T) {
			c, err := NewTiktoken(tt.encoding)
			if err != nil {
				t.Fatal(err)
			}
			total, text, names := 0, 0, 0
			for _, m := range cookbookExample {
				n, err := c.Count(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				total += n
				for _, s := range []string{string(m.Role), m.Content, m.Name} {
					k, err := c.CountText(s)
					if err != nil {
						t.Fatal(err)
					}
					text += k
				}
				if m.Name != "" {
					names++
				}
			}
			total += c.RequestOverhead()
			if total != tt.want {
				t.Errorf("sum of Count + RequestOverhead = %d, want %d (the API's prompt_tokens)", total, tt.want)
			}
			// 6 messages * 3 + 4 names * 1 + the text of every value + 3 priming.
			if arith := len(cookbookExample)*3 + names*1 + text + 3; arith != total {
				t.Errorf("framing arithmetic = %d, counter total = %d", arith, total)
			}
		})
	}
}

func TestTiktokenCount(t *testing.T) {
	ctx := context.Background()
	c, err := NewTiktoken(Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	text := func(s string) int {
		t.Helper()
		n, err := c.CountText(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		name string
		msg  chatmem.Message
		want int
	}{
		{"user", chatmem.Message{Role: chatmem.RoleUser, Content: "hello world"}, 3 + text("user") + 2},
		{"named", chatmem.Message{Role: chatmem.RoleUser, Name: "alice", Content: "hello world"}, 3 + text("user") + 2 + text("alice") + 1},
		{"tool calls", chatmem.Message{
			Role: chatmem.RoleAssistant,
			ToolCalls: []chatmem.ToolCall{
				{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
				{ID: "call_2", Type: "function", Function: chatmem.FunctionCall{Name: "get_time", Arguments: `{}`}},
			},
		}, 3 + text("assistant") +
			text("get_weather") + text(`{"city":"Paris"}`) + 3 +
			text("get_time") + text(`{}`) + 3},
		{"tool result", chatmem.Message{Role: chatmem.RoleTool, ToolCallID: "call_1", Content: "18 degrees"}, 3 + text("tool") + text("18 degrees")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Count(ctx, tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Count = %d, want %d", got, tt.want)
			}
		})
	}
	if got := c.RequestOverhead(); got != 3 {
		t.Errorf("RequestOverhead = %d, want 3", got)
	}
}

func TestNewTiktokenUnknown(t *testing.T) {
	for _, name := range []string{"", "p50k_base", "O200K_BASE", "estimate"} {
		if _, err := NewTiktoken(name); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("NewTiktoken(%q) error = %v, want ErrInvalid", name, err)
		}
	}
}

func TestTiktokenConcurrent(t *testing.T) {
	ctx := context.Background()
	msg := chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50)}
	for _, enc := range []string{O200kBase, Cl100kBase} {
		c, err := NewTiktoken(enc)
		if err != nil {
			t.Fatal(err)
		}
		want, err := c.Count(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				// A fresh counter each time shares the cached codec.
				c, err := NewTiktoken(enc)
				if err != nil {
					t.Error(err)
					return
				}
				for range 20 {
					if got, err := c.Count(ctx, msg); err != nil || got != want {
						t.Errorf("%s: Count = %d, %v; want %d", enc, got, err, want)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// benchText returns about 64 KiB of English prose, varied enough that the BPE
// merges are not one repeated piece.
func benchText() string {
	sentences := []string{
		"Conversation memory keeps the messages a chatbot has seen, so that the model still knows the customer's name on turn five hundred.",
		"Every turn, the backend assembles what to send under a policy: everything, the last few turns, or the newest messages that fit a token budget.",
		"Summaries of older turns are written before any message is treated as covered, and the facts a user gives are stored with their provenance.",
		"Token counts are computed once, when a message is appended, and stored with a running total per conversation.",
		"The quick brown fox jumps over the lazy dog while 42 engineers review pull request #1337 at 09:30 on Tuesday.",
		"Order ID 7F3-22-A was shipped from Rotterdam; the invoice totals $1,249.99, including VAT and a discount of 15%.",
	}
	var b strings.Builder
	for i := 0; b.Len() < 64<<10; i++ {
		b.WriteString(sentences[i%len(sentences)])
		if i%5 == 4 {
			b.WriteString("\n\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func BenchmarkTiktoken(b *testing.B) {
	ctx := context.Background()
	msg := chatmem.Message{Role: chatmem.RoleUser, Content: benchText()}
	for _, enc := range []string{O200kBase, Cl100kBase} {
		b.Run(enc, func(b *testing.B) {
			c, err := NewTiktoken(enc)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(msg.Content)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Count(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
