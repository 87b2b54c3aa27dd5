package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// A Summarizer wired into chatmem.Options keeps the seed conversation's
// name and order ID in the rolling summary. A local httptest server stands
// in for the Messages API here; against Anthropic, leave BaseURL empty and
// set APIKey.
func ExampleSummarizer() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
			"content":     []any{map[string]any{"type": "text", "text": "Kavya's order SE-10423 is out for delivery, due by 8 pm. She asked about running socks."}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 250, "output_tokens": 22},
		})
	}))
	defer api.Close()

	summarizer, err := anthropic.NewSummarizer(anthropic.Options{BaseURL: api.URL, APIKey: "sk-ant-example", Model: "claude-haiku-4-5"})
	if err != nil {
		fmt.Println(err)
		return
	}
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter:    tokenizer.Estimate{},
		Summarizer: summarizer,
		Summary:    chatmem.SummaryOptions{Trigger: 20, Target: 10},
		Sync:       true, // summarize inside Append, for the example
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "kavya"}
	for _, m := range seed.History() {
		if _, err := mem.Append(ctx, key, []chatmem.Message{m}, chatmem.AppendOptions{}); err != nil {
			fmt.Println(err)
			return
		}
	}
	s, err := mem.Summary(ctx, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s covers seq 1-%d:\n%s\n", s.Summarizer, s.CoversSeq, s.Text)
	// Output:
	// anthropic:claude-haiku-4-5 covers seq 1-4:
	// Kavya's order SE-10423 is out for delivery, due by 8 pm. She asked about running socks.
}
