package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	chatmemopenai "github.com/chatmem/chatmem/openai"
	"github.com/chatmem/chatmem/tokenizer"
)

// A full turn with the official openai-go SDK: the application keeps the
// conversation in chatmem, sends the window as is with MessageParams, and
// appends each answer as is with FromCompletion, tool calls included. A
// local httptest server speaking the Chat Completions wire format stands in
// for the API: it asks for a tool call when the last message is the user's
// and answers in text once it has the tool's result.
func Example_turn() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []chatmem.Message `json:"messages"` // the wire shape chatmem reads
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		message := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		finish := "tool_calls"
		if last := req.Messages[len(req.Messages)-1]; last.Role == chatmem.RoleTool {
			message["content"] = fmt.Sprintf("Your order is %s. (%d messages sent)", last.Content, len(req.Messages))
			finish = "stop"
		} else {
			message["tool_calls"] = []any{map[string]any{
				"id": "call_7", "type": "function",
				"function": map[string]any{"name": "order_status", "arguments": `{"order":"SE-10423"}`},
			}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
		})
	}))
	defer api.Close()

	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(api.URL+"/v1"), option.WithAPIKey("sk-example"))
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
		res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gpt-4o-mini",
			Messages: chatmemopenai.MessageParams(w.Messages),
		})
		if err != nil {
			return chatmem.Message{}, err
		}
		reply, err := chatmemopenai.FromCompletion(res)
		if err != nil {
			return chatmem.Message{}, err
		}
		_, err = mem.Append(ctx, key, []chatmem.Message{reply}, chatmem.AppendOptions{})
		return reply, err
	}

	user := chatmem.Message{Role: chatmem.RoleUser, Content: "Where is my order SE-10423?"}
	if _, err := mem.Append(ctx, key, []chatmem.Message{user}, chatmem.AppendOptions{}); err != nil {
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
	// 1 user: Where is my order SE-10423?
	// 2 assistant: call_7 order_status({"order":"SE-10423"})
	// 3 tool: [call_7] out for delivery
	// 4 assistant: Your order is out for delivery. (3 messages sent)
}
