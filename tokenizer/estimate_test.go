package tokenizer

import (
	"context"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

func TestEstimateText(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 1},    // the seed's minimum
		{"abc", 1}, // 3 // 4 = 0, raised to 1
		{"abcd", 1},
		{"abcdefgh", 2},
		{"hello world!", 3},
		// len counts code points, as Python's len does: 12 code points (14 bytes).
		{"héllo wörld!", 3},
		// 8 code points (32 bytes): 8 // 4 = 2, where bytes would give 8.
		{"😀😀😀😀😀😀😀😀", 2},
		// Combining marks are code points of their own: "e" + U+0301 is 2.
		{"e\u0301e\u0301e\u0301e\u0301", 2},
		// 9 CJK code points (27 bytes).
		{"お誕生日おめでとう", 2},
		{strings.Repeat("a", 400), 100},
	}
	for _, tt := range tests {
		if got := EstimateText(tt.text); got != tt.want {
			t.Errorf("EstimateText(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestEstimateCount(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		msg  chatmem.Message
		want int
	}{
		{"content only", chatmem.Message{Role: chatmem.RoleUser, Content: "héllo wörld!"}, 3},
		{"role and name add nothing", chatmem.Message{Role: chatmem.RoleSystem, Name: "a_very_long_name", Content: "abcdefgh"}, 2},
		{"empty content still costs 1", chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{
			{ID: "c1", Function: chatmem.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		}}, 1 + 2 + 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Estimate{}.Count(ctx, tt.msg)
			if err != nil || got != tt.want {
				t.Errorf("Count = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	if got := (Estimate{}).Name(); got != "estimate" {
		t.Errorf("Name = %q, want estimate", got)
	}
}
