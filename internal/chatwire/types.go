package chatwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ---- request ----

// Request is a Chat Completions request, with the fields either transport
// reads; each maps the ones its upstream has a counterpart for.
type Request struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N                 *int            `json:"n"`
	Tools             []Tool          `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ReasoningEffort   string          `json:"reasoning_effort"`
	Verbosity         string          `json:"verbosity"`
	ResponseFormat    *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	User             string `json:"user"`
	SafetyIdentifier string `json:"safety_identifier"`
	// PromptCacheKey asks for the request's prefix to be cached (chatmem's
	// proxy sets it for cache-stable windows).
	PromptCacheKey       string          `json:"prompt_cache_key"`
	PromptCacheRetention string          `json:"prompt_cache_retention"`
	ServiceTier          string          `json:"service_tier"`
	Metadata             json.RawMessage `json:"metadata"`
}

// IncludeUsage reports whether a streamed answer should end with a usage
// chunk (stream_options.include_usage).
func (r *Request) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// Message is a request message; its content is a string, null or an
// array of parts (Part), read by each transport as its upstream wants.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// Tool is a request's tool, as transports read it and as chatmem's
// Responses API writes it for a Chat Completions upstream (the fields it
// lacks left out).
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

// Part is a content part of a request message: text, refusal, image_url
// or file.
type Part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File *struct {
		FileID   string `json:"file_id"`
		FileData string `json:"file_data"`
		Filename string `json:"filename"`
	} `json:"file"`
}

// ContentText returns a message's content given as a string, null or an
// array of text and refusal parts, the parts joined.
func ContentText(raw json.RawMessage) (string, error) {
	if IsNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []Part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("neither a string nor an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "refusal":
			b.WriteString(p.Refusal)
		default:
			return "", fmt.Errorf("a %q part is not supported here", p.Type)
		}
	}
	return b.String(), nil
}

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

// ParseToolChoice reads a Chat Completions tool_choice: mode is "auto",
// "none" or "required", or "function" with the function's name; an
// absent or null choice is mode "". Anything else is a RequestError,
// since each upstream maps only these.
func ParseToolChoice(raw json.RawMessage) (mode, name string, err error) {
	if IsNull(raw) {
		return "", "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return s, "", nil
		}
		return "", "", Invalidf("tool_choice: %q is not supported", s)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" || obj.Function.Name == "" {
		return "", "", Invalidf("tool_choice: not a supported choice (auto, none, required or a function)")
	}
	return "function", obj.Function.Name, nil
}
