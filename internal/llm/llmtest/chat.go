package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// ChatRequest is the part of an OpenAI Chat Completions request body
// (POST /v1/chat/completions) the fake reads.
type ChatRequest struct {
	Model    string        `json:"model"`
	Stream   bool          `json:"stream"`
	Messages []ChatMessage `json:"messages"`
}

// ChatMessage is one message of a ChatRequest; its content is a string or
// an array of text parts, as the API allows.
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Text returns the message's content, a string or its text parts joined.
func (m ChatMessage) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Last returns the text of the request's last message.
func (r ChatRequest) Last() string { return r.Messages[len(r.Messages)-1].Text() }

// Text returns the text of the request's messages of role, joined by
// newlines.
func (r ChatRequest) Text(role string) string {
	var texts []string
	for _, m := range r.Messages {
		if m.Role == role {
			texts = append(texts, m.Text())
		}
	}
	return strings.Join(texts, "\n")
}

// ChatCompletions returns a fake model that speaks the OpenAI Chat
// Completions wire format: it answers reply(request) as a chat.completion
// object, or in pieces as chat.completion.chunk server-sent events ending
// with [DONE] when the request streams; a body that is not JSON or holds
// no messages gets the API's 400 error body. reply is called from the
// server's goroutines, concurrently.
func ChatCompletions(reply func(ChatRequest) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req ChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"bad request","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		text := reply(req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		event := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
		event(map[string]any{"role": "assistant", "content": ""}, nil)
		for i := 0; i < len(text); i += 6 {
			event(map[string]any{"content": text[i:min(i+6, len(text))]}, nil)
		}
		event(map[string]any{}, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	}
}
