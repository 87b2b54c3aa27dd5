package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/chatmem/chatmem"
	chatmemanthropic "github.com/chatmem/chatmem/anthropic"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// A full turn with the official anthropic-sdk-go SDK: the application keeps
// the conversation in chatmem, sends the window as is with MessageParams
// (system apart, roles alternating, tool results as tool_result blocks) and
// appends each answer as is with FromMessage, tool calls included. A local
// httptest server speaking the Messages API wire format stands in for the
// API: it asks for a tool when the last block is the user's text and
// answers in text once it has the tool's result.
func Example_turn() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			System   []struct{ Text string } `json:"system"`
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type    string `json:"type"`
					Text    string `json:"text"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"` // a tool_result's
				} `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/messages" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		block := last.Content[len(last.Content)-1]
		content := []any{map[string]any{"type": "tool_use", "id": "toolu_7", "name": "order_status", "input": map[string]any{"order": "SE-10423"}}}
		stop := "tool_use"
		if block.Type == "tool_result" {
			content = []any{map[string]any{"type": "text", "text": fmt.Sprintf(
				"Your order is %s. (%d system blocks, %d messages sent)", block.Content[0].Text, len(req.System), len(req.Messages))}}
			stop = "end_turn"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 40, "output_tokens": 12},
		})
	}))
	defer api.Close()

	ctx := context.Background()
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(api.URL), option.WithAPIKey("sk-ant-example"))
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "kavya"}
	policy := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 1000}

	// ask sends the conversation's window and stores the answer.
	ask := func() (chatmem.Message, error) {
		w, err := mem.Context(ctx, key, policy, chatmem.ContextOptions{})
		if err != nil {
			return chatmem.Message{}, err
		}
		system, messages, err := chatmemanthropic.MessageParams(w.Messages)
		if err != nil {
			return chatmem.Message{}, err
		}
		res, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     "claude-haiku-4-5",
			MaxTokens: 1024,
			System:    system,
			Messages:  messages,
		})
		if err != nil {
			return chatmem.Message{}, err
		}
		reply, err := chatmemanthropic.FromMessage(res)
		if err != nil {
			return chatmem.Message{}, err
		}
		_, err = mem.Append(ctx, key, []chatmem.Message{reply}, chatmem.AppendOptions{})
		return reply, err
	}

	first := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "You are the support agent of a shoe shop."},
		{Role: chatmem.RoleUser, Content: "Where is my order SE-10423?"},
	}
	if _, err := mem.Append(ctx, key, first, chatmem.AppendOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	reply, err := ask()
	for err == nil && len(reply.ToolCalls) > 0 {
		// Run the tools the model asked for and store their results.
		var results []chatmem.Message
		for _, call := range reply.ToolCalls {
			results = append(results, chatmem.Message{Role: chatmem.RoleTool, ToolCallID: call.ID, Content: "out for delivery"})
		}
		if _, err = mem.Append(ctx, key, results, chatmem.AppendOptions{}); err == nil {
			reply, err = ask()
		}
	}
	if err != nil {
		fmt.Println(err)
		return
	}

	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyAll}, chatmem.ContextOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range w.Messages {
		fmt.Printf("%d %s:", m.Seq, m.Role)
		if m.ToolCallID != "" {
			fmt.Printf(" [%s]", m.ToolCallID)
		}
		if m.Content != "" {
			fmt.Printf(" %s", m.Content)
		}
		for _, c := range m.ToolCalls {
			fmt.Printf(" %s %s(%s)", c.ID, c.Function.Name, c.Function.Arguments)
		}
		fmt.Println()
	}
	// Output:
	// 1 system: You are the support agent of a shoe shop.
	// 2 user: Where is my order SE-10423?
	// 3 assistant: toolu_7 order_status({"order":"SE-10423"})
	// 4 tool: [toolu_7] out for delivery
	// 5 assistant: Your order is out for delivery. (1 system blocks, 3 messages sent)
}
