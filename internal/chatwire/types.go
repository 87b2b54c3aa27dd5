package chatwire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// IsObject reports whether raw is a JSON object.
func IsObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// RequestError is a request a transport refuses itself, answered with a
// 400 invalid_request_error.
type RequestError struct{ Msg string }

func (e *RequestError) Error() string { return e.Msg }

// Invalidf is a *RequestError with the message format and args make.
func Invalidf(format string, args ...any) error {
	return &RequestError{Msg: fmt.Sprintf(format, args...)}
}

// ---- answer ----

// Completion is a chat.completion, or with Delta choices a
// chat.completion.chunk.
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice is a completion's choice: Message in a chat.completion, Delta in
// a chunk.
type Choice struct {
	Index        int              `json:"index"`
	Message      *FullMessage     `json:"message,omitempty"`
	Delta        *Delta           `json:"delta,omitempty"`
	Logprobs     *json.RawMessage `json:"logprobs"`
	FinishReason *string          `json:"finish_reason"`
}

// Delta is a chunk's delta: only what it sets is sent.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// FullMessage is a chat.completion's message: content and refusal are
// null, not left out, when absent, as OpenAI sends them.
type FullMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a tool call, of a request's assistant message or of an
// answer; only the arguments are always sent.
type ToolCall struct {
	// Index is a streamed tool call's position; absent elsewhere.
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Usage is an answer's token counts.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// CompletionTokensDetails is left out when nil, for an upstream that
	// does not count reasoning tokens.
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// CompletionTokensDetails is the breakdown of a usage's completion tokens.
type CompletionTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Chunk is a chat.completion.chunk of one choice with delta (an empty one
// if nil) and finish.
func Chunk(id, model string, created int64, delta *Delta, finish *string) *Completion {
	if delta == nil {
		delta = &Delta{}
	}
	return &Completion{
		ID:      id,
		Object:  "chat.completion.chunk",
		Created: created,
		Model:   model,
		Choices: []Choice{{Index: 0, Delta: delta, FinishReason: finish}},
	}
}
