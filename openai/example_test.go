package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/openai"
	"github.com/chatmem/chatmem/tokenizer"
)

// A Summarizer wired into chatmem.Options keeps the seed conversation's
// name and order ID in the rolling summary. A local httptest server stands
// in for the Chat Completions API here; against OpenAI, leave BaseURL empty
// and set APIKey, or point BaseURL at vLLM or Ollama.
func ExampleSummarizer() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "gpt-4o-mini",
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": "Kavya's order SE-10423 is out for delivery, due by 8 pm. She asked about running socks."},
				"finish_reason": "stop",
			}},
			"usage": map[string]any{"prompt_tokens": 250, "completion_tokens": 22, "total_tokens": 272},
		})
	}))
	defer api.Close()

	summarizer, err := openai.NewSummarizer(openai.Options{BaseURL: api.URL + "/v1", APIKey: "sk-example", Model: "gpt-4o-mini"})
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
	// openai:gpt-4o-mini covers seq 1-4:
	// Kavya's order SE-10423 is out for delivery, due by 8 pm. She asked about running socks.
}
