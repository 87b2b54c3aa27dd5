package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/chatwire"
	"github.com/chatmem/chatmem/internal/genai"
	"github.com/chatmem/chatmem/internal/sse"
)

// messagesAPIVersion is the anthropic-version header the chat completions
// transport sends: the version the SDK that Summarizer and Extractor use
// sends (anthropic-sdk-go v2), so that the whole package speaks one API
// version. It no longer accepts temperature, top_p or top_k, so the
// transport drops them (see [NewChatCompletionsTransport]).
const messagesAPIVersion = "2026-10-21"

// maxErrorBody caps how much of an upstream error body is read.
const maxErrorBody = 1 << 20

// chatTransport is the http.RoundTripper NewChatCompletionsTransport
// returns.
type chatTransport struct {
	opts     Options
	client   *http.Client
	endpoint string
	now      func() time.Time
}

// NewChatCompletionsTransport returns an http.RoundTripper that accepts
// OpenAI Chat Completions requests (POST .../chat/completions, JSON,
// optionally "stream": true) and answers them in the OpenAI format by
// calling Anthropic's Messages API (POST {BaseURL}/v1/messages).
//
// Of opts, BaseURL, APIKey, Model (the model of a request that names
// none), MaxTokens (the max_tokens of a request that sets neither
// max_tokens nor max_completion_tokens) and HTTPClient (which sends the
// Anthropic request) are used; MaxRetries is not: the transport sends each
// request once and leaves retries to its caller. APIKey is required when
// BaseURL is the default.
//
// The incoming request's headers are not forwarded: the Anthropic request
// carries only Content-Type, Accept, x-api-key (opts.APIKey) and
// anthropic-version. An Authorization header meant for a proxy in front
// never reaches Anthropic. See the package documentation for how requests,
// answers, streams and errors are translated. The transport is safe for
// concurrent use.
func NewChatCompletionsTransport(opts Options) (http.RoundTripper, error) {
	if opts.BaseURL == "" && opts.APIKey == "" {
		return nil, fmt.Errorf("anthropic: an API key is required for %s", DefaultBaseURL)
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: max tokens %d is negative", opts.MaxTokens)
	}
	if opts.MaxTokens == 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	client := opts.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	return &chatTransport{
		opts:     opts,
		client:   client,
		endpoint: strings.TrimRight(base, "/") + "/v1/messages",
		now:      time.Now,
	}, nil
}

// ---- Anthropic request ----

type anRequest struct {
	Model     string `json:"model"`
	MaxTokens int64  `json:"max_tokens"`
	// System is the system prompt: a string, or text blocks when a
	// cache breakpoint marks its end.
	System        any            `json:"system,omitempty"`
	Messages      []anMessage    `json:"messages"`
	StopSequences []string       `json:"stop_sequences,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	Tools         []anTool       `json:"tools,omitempty"`
	ToolChoice    map[string]any `json:"tool_choice,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	OutputConfig  map[string]any `json:"output_config,omitempty"`
}

type anMessage struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

// anBlock is a content block of a request: text, image, tool_use or
// tool_result.
type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    map[string]any  `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	// CacheControl marks a cache breakpoint: the prompt up to and with
	// this block is cached.
	CacheControl *cacheControl `json:"cache_control,omitempty"`

	// src is the index of the request message the block came from.
	src int
}

// cacheControl is a block's cache_control.
type cacheControl struct {
	Type string `json:"type"` // "ephemeral"
}

// ephemeral is Anthropic's (only) cache type: five minutes, renewed by
// each read.
var ephemeral = &cacheControl{Type: "ephemeral"}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// invalidf is the error of a request the transport refuses itself,
// answered with a 400 invalid_request_error in the OpenAI format.
func invalidf(format string, args ...any) error { return chatwire.Invalidf(format, args...) }

// markCacheBreakpoints marks two of the four cache breakpoints Anthropic
// allows: the end of the system prompt (which caches the tools with it),
// and the request's last block, so that the next request, which repeats
// this one and adds a turn (a cache-stable window), reads all of it from
// the cache: Anthropic looks for an earlier entry up to about 20 blocks
// before each breakpoint. Reads cost a tenth of the input price, writes
// 1.25 times it; a prompt under the model's minimum length is sent
// uncached, with no error.
func markCacheBreakpoints(out *anRequest) {
	if sys, ok := out.System.(string); ok {
		out.System = []anBlock{{Type: "text", Text: sys, CacheControl: ephemeral}}
	}
	last := &out.Messages[len(out.Messages)-1]
	last.Content[len(last.Content)-1].CacheControl = ephemeral
}

// markStablePrefix marks a third breakpoint at the end of the first n
// request messages, the stable part of a cache-stable window (see
// chatmem.WithCachePrefix): its last block whose prompt holds nothing
// from later messages. Recalled turns and a facts block come after it
// and change from request to request: a breakpoint there lets the next
// request read the stable part from the cache. It marks nothing when
// that block is the last one (markCacheBreakpoints marks it) or none.
func markStablePrefix(out *anRequest, n int) {
	var end *anBlock
	for i := range out.Messages {
		for j := range out.Messages[i].Content {
			b := &out.Messages[i].Content[j]
			if b.src >= n {
				if end != nil {
					end.CacheControl = ephemeral
				}
				return
			}
			end = b
		}
	}
}

// translateRequest turns an OpenAI chat completions request body into a
// Messages API request. defaultModel and defaultMaxTokens stand in for a
// request that sets neither.
func translateRequest(body []byte, defaultModel string, defaultMaxTokens int64) (*anRequest, *chatwire.Request, error) {
	var in chatwire.Request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, invalidf("the request body is not a chat completions request: %v", err)
	}
	out := &anRequest{Model: in.Model, MaxTokens: defaultMaxTokens, Stream: in.Stream}
	if out.Model == "" {
		out.Model = defaultModel
	}
	if out.Model == "" {
		return nil, nil, invalidf("model: a model is required")
	}
	switch {
	case in.MaxCompletionTokens != nil:
		out.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		out.MaxTokens = *in.MaxTokens
	}
	if out.MaxTokens < 1 {
		return nil, nil, invalidf("max_tokens: %d is below 1", out.MaxTokens)
	}
	if in.N != nil && *in.N != 1 {
		return nil, nil, invalidf("n: only 1 choice is supported by this upstream")
	}
	// temperature and top_p are dropped: anthropic-version 2026-10-21
	// refuses them.
	stops, err := stopSequences(in.Stop)
	if err != nil {
		return nil, nil, err
	}
	out.StopSequences = stops
	if in.User != "" {
		out.Metadata = map[string]any{"user_id": in.User}
	}
	// response_format json_schema becomes a structured output
	// (output_config.format); json_object has no counterpart and, like
	// text, sends nothing.
	if rf := in.ResponseFormat; rf != nil && rf.Type == "json_schema" {
		if rf.JSONSchema == nil || !isObject(rf.JSONSchema.Schema) {
			return nil, nil, invalidf("response_format.json_schema.schema: a JSON object is required")
		}
		out.OutputConfig = map[string]any{"format": map[string]any{"type": "json_schema", "schema": rf.JSONSchema.Schema}}
	}

	var system []string
	for i, m := range in.Messages {
		var msg anMessage
		switch m.Role {
		case "system", "developer":
			text, err := chatwire.ContentText(m.Content)
			if err != nil {
				return nil, nil, invalidf("messages[%d].content: %v", i, err)
			}
			if text != "" {
				system = append(system, text)
			}
			continue
		case "user":
			blocks, err := contentBlocks(m.Content)
			if err != nil {
				return nil, nil, invalidf("messages[%d].content: %v", i, err)
			}
			msg = anMessage{Role: "user", Content: blocks}
		case "assistant":
			text, err := chatwire.ContentText(m.Content)
			if err != nil {
				return nil, nil, invalidf("messages[%d].content: %v", i, err)
			}
			msg.Role = "assistant"
			if text != "" {
				msg.Content = append(msg.Content, anBlock{Type: "text", Text: text})
			}
			for j, tc := range m.ToolCalls {
				if tc.Type != "" && tc.Type != "function" {
					return nil, nil, invalidf("messages[%d].tool_calls[%d].type: %q is not supported", i, j, tc.Type)
				}
				if tc.ID == "" || tc.Function.Name == "" {
					return nil, nil, invalidf("messages[%d].tool_calls[%d]: id and function.name are required", i, j)
				}
				input, err := toolInput(tc.Function.Arguments)
				if err != nil {
					return nil, nil, invalidf("messages[%d].tool_calls[%d].function.arguments: %v", i, j, err)
				}
				msg.Content = append(msg.Content, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, invalidf("messages[%d].tool_call_id: required for a tool message", i)
			}
			text, err := chatwire.ContentText(m.Content)
			if err != nil {
				return nil, nil, invalidf("messages[%d].content: %v", i, err)
			}
			msg = anMessage{Role: "user", Content: []anBlock{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: text}}}
		default:
			return nil, nil, invalidf("messages[%d].role: %q is not supported", i, m.Role)
		}
		if len(msg.Content) == 0 {
			// An empty message (an assistant turn with no text and no tool
			// calls, a user message of empty text) is dropped: the API
			// refuses empty content.
			continue
		}
		for j := range msg.Content {
			msg.Content[j].src = i
		}
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == msg.Role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, msg.Content...)
			continue
		}
		out.Messages = append(out.Messages, msg)
	}
	if len(out.Messages) == 0 {
		return nil, nil, invalidf("messages: at least one user or assistant message with content is required")
	}
	// The API wants tool_result blocks before any text in a user message.
	for i := range out.Messages {
		if out.Messages[i].Role == "user" {
			c := out.Messages[i].Content
			sort.SliceStable(c, func(a, b int) bool {
				return c[a].Type == "tool_result" && c[b].Type != "tool_result"
			})
		}
	}
	if sys := strings.Join(system, "\n\n"); sys != "" {
		out.System = sys
	}
	if in.PromptCacheKey != "" {
		markCacheBreakpoints(out)
	}

	for i, t := range in.Tools {
		if t.Type != "function" {
			return nil, nil, invalidf("tools[%d].type: %q is not supported", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, nil, invalidf("tools[%d].function.name: required", i)
		}
		schema := t.Function.Parameters
		if len(bytes.TrimSpace(schema)) == 0 || string(bytes.TrimSpace(schema)) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !isObject(schema) {
			return nil, nil, invalidf("tools[%d].function.parameters: not a JSON object", i)
		}
		out.Tools = append(out.Tools, anTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	if len(out.Tools) > 0 {
		choice, err := toolChoice(in.ToolChoice)
		if err != nil {
			return nil, nil, err
		}
		if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
			if choice == nil {
				choice = map[string]any{"type": "auto"}
			}
			if choice["type"] != "none" {
				choice["disable_parallel_tool_use"] = true
			}
		}
		out.ToolChoice = choice
	}
	return out, &in, nil
}

// contentBlocks returns a user message's content as blocks: text, and
// image_url parts as image blocks (a data: URL as base64, any other URL as
// a url source). Empty text is left out.
func contentBlocks(raw json.RawMessage) ([]anBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []anBlock{{Type: "text", Text: s}}, nil
	}
	var parts []chatwire.Part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, errors.New("neither a string nor an array of content parts")
	}
	var blocks []anBlock
	for _, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, anBlock{Type: "text", Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, errors.New("an image_url part without a url")
			}
			src, err := imageSource(p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, anBlock{Type: "image", Source: src})
		default:
			return nil, fmt.Errorf("a %q part is not supported", p.Type)
		}
	}
	return blocks, nil
}

func imageSource(url string) (map[string]any, error) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 || mediaType == "" {
			return nil, errors.New("an image data URL must be data:<media type>;base64,<data>")
		}
		return map[string]any{"type": "base64", "media_type": mediaType, "data": data}, nil
	}
	return map[string]any{"type": "url", "url": url}, nil
}

// toolInput returns a tool call's arguments as the tool_use input: a JSON
// object; empty arguments stand for {}.
func toolInput(args string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), nil
	}
	if !json.Valid([]byte(args)) || !isObject(json.RawMessage(args)) {
		return nil, errors.New("not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(args)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func isObject(raw json.RawMessage) bool { return chatwire.IsObject(raw) }

// stopSequences returns stop given as a string or an array of strings;
// empty and whitespace-only sequences are left out (the API refuses them).
func stopSequences(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	var s string
	if json.Unmarshal(raw, &s) == nil {
		list = []string{s}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalidf("stop: neither a string nor an array of strings")
	}
	var out []string
	for _, s := range list {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// toolChoice maps OpenAI's tool_choice: "auto" → auto, "none" → none,
// "required" → any, {"type":"function","function":{"name"}} → tool; none
// (absent or null) → nil.
func toolChoice(raw json.RawMessage) (map[string]any, error) {
	mode, name, err := chatwire.ParseToolChoice(raw)
	switch {
	case err != nil || mode == "":
		return nil, err
	case mode == "required":
		return map[string]any{"type": "any"}, nil
	case mode == "function":
		return map[string]any{"type": "tool", "name": name}, nil
	}
	return map[string]any{"type": mode}, nil
}

// ---- Anthropic response ----

type anResponse struct {
	ID         string           `json:"id"`
	Type       string           `json:"type"`
	Role       string           `json:"role"`
	Model      string           `json:"model"`
	Content    []anContentBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      anUsage          `json:"usage"`
}

type anContentBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// usage maps Anthropic's usage: prompt tokens are all the input tokens,
// those written to and read from the cache included (Anthropic counts them
// apart, OpenAI within), the cache reads also as cached_tokens.
func (u anUsage) openAI() *chatwire.Usage {
	prompt := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	out := &chatwire.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens}
	out.PromptTokensDetails.CachedTokens = u.CacheReadInputTokens
	return out
}

// finishReason maps a stop_reason: end_turn, stop_sequence and pause_turn
// → stop; max_tokens and model_context_window_exceeded → length; tool_use
// → tool_calls; refusal → content_filter.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}

func completionID(msgID string) string {
	if msgID == "" {
		return "chatcmpl-anthropic"
	}
	return "chatcmpl-" + msgID
}

// translateResponse turns a Messages API answer into a chat.completion.
func translateResponse(msg *anResponse, created int64) *chatwire.Completion {
	var text strings.Builder
	out := &chatwire.FullMessage{Role: "assistant"}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			tc := chatwire.ToolCall{ID: b.ID, Type: "function"}
			tc.Function.Name = b.Name
			tc.Function.Arguments = compactJSON(b.Input)
			out.ToolCalls = append(out.ToolCalls, tc)
		}
	}
	if s := text.String(); s != "" || len(out.ToolCalls) == 0 {
		out.Content = &s
	}
	fr := finishReason(msg.StopReason)
	return &chatwire.Completion{
		ID:      completionID(msg.ID),
		Object:  "chat.completion",
		Created: created,
		Model:   msg.Model,
		Choices: []chatwire.Choice{{Index: 0, Message: out, FinishReason: &fr}},
		Usage:   msg.Usage.openAI(),
	}
}

func compactJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// ---- errors ----

func errorResponse(req *http.Request, status int, msg, code string, header http.Header) *http.Response {
	h := http.Header{}
	for _, k := range []string{"Retry-After", "Request-Id"} {
		if v := header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	return chatwire.ErrorResponse(req, status, msg, code, h)
}

// upstreamError translates an Anthropic error answer: its
// {"type":"error","error":{"type","message"}} body becomes
// {"error":{"message","type","code"}} with the Anthropic error type as the
// code, and its status is kept, but 529 (overloaded) becomes 503.
func upstreamError(req *http.Request, resp *http.Response) *http.Response {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var parsed struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	msg, code := "", ""
	if json.Unmarshal(body, &parsed) == nil && parsed.Error.Message != "" {
		msg, code = parsed.Error.Message, parsed.Error.Type
	} else {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		msg = "anthropic: " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode) + ": " + msg
	}
	status := resp.StatusCode
	if status == 529 {
		status = http.StatusServiceUnavailable
		if code == "" {
			code = "overloaded_error"
		}
	}
	return errorResponse(req, status, msg, code, resp.Header)
}

// ---- RoundTrip ----

// GenAIProvider names the provider the transport calls, so that a
// client's traces (the chat proxy's gen_ai.provider.name) say Anthropic,
// not the OpenAI format the transport is spoken to in.
func (t *chatTransport) GenAIProvider() string { return genai.ProviderAnthropic }

// RoundTrip answers one chat completions request. A request that is not a
// POST to a path ending in /chat/completions gets a 404, a request it
// cannot translate a 400, both in the OpenAI error format; a network
// failure toward Anthropic is returned as an error.
func (t *chatTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	if req.Method != http.MethodPost || !strings.HasSuffix(strings.TrimRight(req.URL.Path, "/"), "/chat/completions") {
		return errorResponse(req, http.StatusNotFound, "only POST .../chat/completions is served by this transport", "not_found", nil), nil
	}
	areq, oreq, err := translateRequest(body, t.opts.Model, int64(t.opts.MaxTokens))
	if err != nil {
		return errorResponse(req, http.StatusBadRequest, err.Error(), "invalid_request", nil), nil
	}
	if n, ok := chatmem.CachePrefix(req.Context()); ok && oreq.PromptCacheKey != "" {
		markStablePrefix(areq, n)
	}
	payload, err := json.Marshal(areq)
	if err != nil {
		return nil, err
	}
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, t.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	out.Header.Set("Content-Type", "application/json")
	out.Header.Set("Anthropic-Version", messagesAPIVersion)
	if t.opts.APIKey != "" {
		out.Header.Set("X-Api-Key", t.opts.APIKey)
	}
	if areq.Stream {
		out.Header.Set("Accept", "text/event-stream")
	} else {
		out.Header.Set("Accept", "application/json")
	}
	resp, err := t.client.Do(out)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return upstreamError(req, resp), nil
	}
	h := http.Header{}
	if v := resp.Header.Get("Request-Id"); v != "" {
		h.Set("Request-Id", v)
	}
	if areq.Stream {
		includeUsage := oreq.IncludeUsage()
		return chatwire.StreamResponse(req, h, resp.Body, func(src io.ReadCloser, dst *io.PipeWriter) {
			t.relay(src, dst, includeUsage)
		}), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("anthropic: reading the answer: %w", err)
	}
	// Decoding would turn invalid UTF-8 into U+FFFD: a reply with it is
	// refused, not translated (and stored) rewritten.
	if err := chatmem.CheckJSONText(b); err != nil {
		return errorResponse(req, http.StatusBadGateway, "the upstream's answer cannot be translated as it came: "+err.Error(), "upstream_error", h), nil
	}
	var msg anResponse
	if err := json.Unmarshal(b, &msg); err != nil {
		return nil, fmt.Errorf("anthropic: reading the answer: %w", err)
	}
	if msg.Type != "message" {
		return nil, fmt.Errorf("anthropic: the answer is a %q, not a message", msg.Type)
	}
	completion, err := json.Marshal(translateResponse(&msg, t.now().Unix()))
	if err != nil {
		return nil, err
	}
	h.Set("Content-Type", "application/json")
	return chatwire.NewResponse(req, http.StatusOK, h, completion), nil
}

// ---- streaming ----

// anEvent is one server-sent event of a Messages stream, all types in one.
type anEvent struct {
	Type         string          `json:"type"`
	Message      *anResponse     `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *anContentBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// streamState translates one Messages stream into chunks.
type streamState struct {
	id, model    string
	created      int64
	usage        anUsage
	stopReason   string
	toolIndex    map[int]int // content block index → tool call index
	tools        int
	includeUsage bool
}

func (s *streamState) chunk(delta *chatwire.Delta, finish *string) *chatwire.Completion {
	return chatwire.Chunk(s.id, s.model, s.created, delta, finish)
}

// errStreamCut is what the reader of a stream gets when Anthropic's stream
// ended before message_stop.
var errStreamCut = errors.New("anthropic: the stream ended before message_stop")

// relay reads Anthropic's events from src and writes the OpenAI chunks to
// dst as each arrives. A stream that ends normally ends with "data:
// [DONE]"; an error event is written as data: {"error":{...}} and then the
// body fails with an error, as does a stream cut short; a reader that
// closes the body stops the relay and closes src.
func (t *chatTransport) relay(src io.ReadCloser, dst *io.PipeWriter, includeUsage bool) {
	defer src.Close()
	s := &streamState{created: t.now().Unix(), toolIndex: map[int]int{}, includeUsage: includeUsage}
	err := s.run(src, dst)
	dst.CloseWithError(err) // nil closes it normally
}

// run translates the events of src, each up to sse.MaxEventBytes, into
// chunks written to dst, until message_stop, an error event or the end of
// src (errStreamCut).
func (s *streamState) run(src io.Reader, dst io.Writer) error {
	rd := sse.NewReader(src, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return errStreamCut
		}
		if err != nil {
			return fmt.Errorf("anthropic: reading the stream: %w", err)
		}
		if len(ev.Data) == 0 {
			continue
		}
		if done, err := s.event(ev.Data, dst); err != nil || done {
			return err
		}
	}
}

// event handles one event; done is true after message_stop.
func (s *streamState) event(data []byte, w io.Writer) (done bool, err error) {
	// Decoding would turn invalid UTF-8 into U+FFFD, and the reply would
	// be relayed and stored rewritten: such an event breaks the stream.
	if err := chatmem.CheckJSONText(data); err != nil {
		return false, fmt.Errorf("anthropic: a stream event: %w", err)
	}
	var ev anEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, fmt.Errorf("anthropic: a stream event is not JSON: %w", err)
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			s.id, s.model = completionID(ev.Message.ID), ev.Message.Model
			s.usage = ev.Message.Usage
		}
		empty := ""
		return false, chatwire.WriteData(w, s.chunk(&chatwire.Delta{Role: "assistant", Content: &empty}, nil))
	case "content_block_start":
		if ev.ContentBlock == nil {
			return false, nil
		}
		switch ev.ContentBlock.Type {
		case "text":
			if ev.ContentBlock.Text != "" {
				text := ev.ContentBlock.Text
				return false, chatwire.WriteData(w, s.chunk(&chatwire.Delta{Content: &text}, nil))
			}
		case "tool_use":
			// A chat completion's first delta of a tool call carries its
			// id, which clients key the call's later deltas on: a block
			// without one cannot be translated.
			if ev.ContentBlock.ID == "" {
				return false, errors.New("anthropic: a tool_use block in the stream has no id")
			}
			idx := s.tools
			s.tools++
			s.toolIndex[ev.Index] = idx
			tc := chatwire.ToolCall{Index: &idx, ID: ev.ContentBlock.ID, Type: "function"}
			tc.Function.Name = ev.ContentBlock.Name
			// The input comes in input_json_delta events; the start block
			// holds {} (or, rarely, the whole input, sent here if so).
			if in := compactJSON(ev.ContentBlock.Input); in != "{}" {
				tc.Function.Arguments = in
			}
			return false, chatwire.WriteData(w, s.chunk(&chatwire.Delta{ToolCalls: []chatwire.ToolCall{tc}}, nil))
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				text := ev.Delta.Text
				return false, chatwire.WriteData(w, s.chunk(&chatwire.Delta{Content: &text}, nil))
			}
		case "input_json_delta":
			idx, ok := s.toolIndex[ev.Index]
			if ok && ev.Delta.PartialJSON != "" {
				tc := chatwire.ToolCall{Index: &idx}
				tc.Function.Arguments = ev.Delta.PartialJSON
				return false, chatwire.WriteData(w, s.chunk(&chatwire.Delta{ToolCalls: []chatwire.ToolCall{tc}}, nil))
			}
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			s.stopReason = ev.Delta.StopReason
		}
		if ev.Usage != nil {
			// message_delta's usage is cumulative; output_tokens always,
			// input counts when the API sends them.
			s.usage.OutputTokens = ev.Usage.OutputTokens
			if ev.Usage.InputTokens != 0 {
				s.usage.InputTokens = ev.Usage.InputTokens
			}
			if ev.Usage.CacheCreationInputTokens != 0 {
				s.usage.CacheCreationInputTokens = ev.Usage.CacheCreationInputTokens
			}
			if ev.Usage.CacheReadInputTokens != 0 {
				s.usage.CacheReadInputTokens = ev.Usage.CacheReadInputTokens
			}
		}
	case "message_stop":
		fr := finishReason(s.stopReason)
		if err := chatwire.WriteData(w, s.chunk(nil, &fr)); err != nil {
			return true, err
		}
		if s.includeUsage {
			c := s.chunk(nil, nil)
			c.Choices = []chatwire.Choice{}
			c.Usage = s.usage.openAI()
			if err := chatwire.WriteData(w, c); err != nil {
				return true, err
			}
		}
		_, err := io.WriteString(w, "data: [DONE]\n\n")
		return true, err
	case "error":
		msg, typ := "stream error", "api_error"
		if ev.Error != nil {
			msg, typ = ev.Error.Message, ev.Error.Type
		}
		status := http.StatusInternalServerError
		if typ == "overloaded_error" {
			status = http.StatusServiceUnavailable
		}
		e := chatwire.Error{Message: msg, Type: chatwire.ErrorType(status), Code: &typ}
		if err := chatwire.WriteData(w, chatwire.ErrorBody{Error: e}); err != nil {
			return true, err
		}
		return true, fmt.Errorf("anthropic: stream error %s: %s", typ, msg)
	}
	// ping, content_block_stop, thinking and signature deltas and unknown
	// events send nothing.
	return false, nil
}
