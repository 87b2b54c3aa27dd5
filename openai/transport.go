package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/chatwire"
	"github.com/chatmem/chatmem/internal/sse"
)

// maxErrorBody caps how much of an upstream error body is read.
const maxErrorBody = 1 << 20

// TransportOptions configure NewResponsesTransport. The zero value of
// every field means its default.
type TransportOptions struct {
	// BaseURL is the API's address up to and including the version;
	// requests go to BaseURL + "/responses". Empty means DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer KEY". Empty sends the
	// Authorization header of the request the transport translates, if
	// any (the credential a Chat Completions upstream would have got).
	APIKey string
	// Model is the model of a request that names none.
	Model string
	// HTTPClient sends the Responses requests; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
}

// responsesTransport is the http.RoundTripper NewResponsesTransport
// returns.
type responsesTransport struct {
	opts     TransportOptions
	client   *http.Client
	endpoint string
	now      func() time.Time
}

// NewResponsesTransport returns an http.RoundTripper that accepts OpenAI
// Chat Completions requests (POST .../chat/completions, JSON, optionally
// "stream": true) and answers them in the Chat Completions format by
// calling the OpenAI Responses API (POST {BaseURL}/responses) with
// "store": false, so that the provider keeps nothing of the conversation.
//
// The messages become the request's input items, in order and each as it
// was: system and developer messages as message items of their role (not
// joined into instructions, so that their place and text come back
// exactly), user and assistant messages as message items, an assistant's
// tool calls as function_call items and tool messages as
// function_call_output items with the same call_id. Function tools,
// tool_choice, parallel_tool_calls, the sampling fields, max_tokens and
// max_completion_tokens (as max_output_tokens), reasoning_effort,
// verbosity and response_format (as text), user, safety_identifier,
// prompt_cache_key, service_tier and metadata are mapped; a field the
// Responses API has no counterpart for (n over 1, stop, logprobs, seed,
// logit_bias, the penalties, audio, store true, legacy functions, ...) is
// refused with a 400 that names it, never dropped. A function tool without
// "strict" is sent with strict false, the Chat Completions default (the
// Responses API's is true).
//
// The answer comes back as a chat.completion, or as chat.completion.chunk
// events ending with data: [DONE] when the request streams (with a usage
// chunk when it asks stream_options.include_usage): output text as
// content, refusals as refusal, function_call items as tool_calls. Usage
// maps input_tokens, input_tokens_details.cached_tokens, output_tokens
// and output_tokens_details.reasoning_tokens to prompt_tokens,
// prompt_tokens_details.cached_tokens, completion_tokens and
// completion_tokens_details.reasoning_tokens. An upstream error keeps its
// status and OpenAI error body; the upstream's X-Request-Id, rate-limit
// and Retry-After headers are kept on every answer.
//
// The request's other headers are not forwarded: the Responses request
// carries only Content-Type, Accept and Authorization. The transport sends
// each request once, leaves retries to its caller and is safe for
// concurrent use.
func NewResponsesTransport(opts TransportOptions) (http.RoundTripper, error) {
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	client := opts.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	return &responsesTransport{
		opts:     opts,
		client:   client,
		endpoint: strings.TrimRight(base, "/") + "/responses",
		now:      time.Now,
	}, nil
}

// ---- Chat Completions request ----

// ccFields are the request fields the transport maps, and the values of
// some others it accepts because they ask for what the Responses API does
// anyway; any other field is refused.
var ccFields = map[string]bool{
	"model": true, "messages": true, "max_tokens": true, "max_completion_tokens": true,
	"temperature": true, "top_p": true, "stream": true, "stream_options": true,
	"tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"reasoning_effort": true, "verbosity": true, "response_format": true,
	"user": true, "safety_identifier": true, "prompt_cache_key": true,
	"prompt_cache_retention": true, "service_tier": true, "metadata": true,
	// Accepted only at their neutral values, checked in translateRequest.
	"n": true, "store": true, "logprobs": true, "stop": true,
	"frequency_penalty": true, "presence_penalty": true,
}

// ---- Responses request ----

type rsRequest struct {
	Model             string          `json:"model"`
	Input             []rsInputItem   `json:"input"`
	Store             bool            `json:"store"`
	Stream            bool            `json:"stream,omitempty"`
	MaxOutputTokens   *int64          `json:"max_output_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	Tools             []rsTool        `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Reasoning         map[string]any  `json:"reasoning,omitempty"`
	Text              map[string]any  `json:"text,omitempty"`
	User              string          `json:"user,omitempty"`
	SafetyIdentifier  string          `json:"safety_identifier,omitempty"`
	PromptCacheKey    string          `json:"prompt_cache_key,omitempty"`
	PromptCacheRet    string          `json:"prompt_cache_retention,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
}

// rsInputItem is an input item: a message (Role, Content), a
// function_call (CallID, Name, Arguments) or a function_call_output
// (CallID, Output).
type rsInputItem struct {
	Type      string  `json:"type"`
	Role      string  `json:"role,omitempty"`
	Content   any     `json:"content,omitempty"`
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	Output    *string `json:"output,omitempty"`
}

// rsPart is an input content part: input_text, input_image or input_file.
type rsPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text,omitempty"`
	ImageURL string  `json:"image_url,omitempty"`
	Detail   string  `json:"detail,omitempty"`
	FileID   string  `json:"file_id,omitempty"`
	FileData string  `json:"file_data,omitempty"`
	Filename string  `json:"filename,omitempty"`
}

type rsTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// requestError is a request the transport refuses itself, answered with a
// 400 invalid_request_error.
type requestError = chatwire.RequestError

func invalidf(format string, args ...any) error { return chatwire.Invalidf(format, args...) }

// checkFields refuses a field the Responses API cannot take: one it has
// no counterpart for, or a value of n, store, logprobs, stop or a penalty
// other than the neutral one.
func checkFields(fields map[string]json.RawMessage) error {
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := fields[k]
		if chatwire.IsNull(v) {
			continue
		}
		if !ccFields[k] {
			return invalidf("%s: not supported by this upstream (the OpenAI Responses API has no counterpart)", k)
		}
		switch k {
		case "n":
			var n int
			if json.Unmarshal(v, &n) != nil || n != 1 {
				return invalidf("n: only 1 choice is supported by this upstream (the OpenAI Responses API answers with one)")
			}
		case "store":
			var b bool
			if json.Unmarshal(v, &b) != nil || b {
				return invalidf("store: this upstream sends store false, so that the provider keeps nothing; chatmem stores the conversation")
			}
		case "logprobs":
			var b bool
			if json.Unmarshal(v, &b) != nil || b {
				return invalidf("logprobs: not supported by this upstream")
			}
		case "stop":
			var s string
			var list []string
			if (json.Unmarshal(v, &s) == nil && s == "") || (json.Unmarshal(v, &list) == nil && len(list) == 0) {
				continue
			}
			return invalidf("stop: the OpenAI Responses API has no stop sequences")
		case "frequency_penalty", "presence_penalty":
			var f float64
			if json.Unmarshal(v, &f) != nil || f != 0 {
				return invalidf("%s: the OpenAI Responses API has no penalties", k)
			}
		}
	}
	return nil
}

// translateRequest turns a Chat Completions request body into a Responses
// request. defaultModel stands in for a request that names none.
func translateRequest(body []byte, defaultModel string) (*rsRequest, *chatwire.Request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, nil, invalidf("the request body is not a chat completions request: %v", err)
	}
	if err := checkFields(fields); err != nil {
		return nil, nil, err
	}
	var in chatwire.Request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, invalidf("the request body is not a chat completions request: %v", err)
	}
	out := &rsRequest{
		Model: in.Model, Store: false, Stream: in.Stream,
		Temperature: in.Temperature, TopP: in.TopP, ParallelToolCalls: in.ParallelToolCalls,
		User: in.User, SafetyIdentifier: in.SafetyIdentifier, PromptCacheKey: in.PromptCacheKey,
		PromptCacheRet: in.PromptCacheRetention, ServiceTier: in.ServiceTier,
	}
	if !chatwire.IsNull(in.Metadata) {
		out.Metadata = in.Metadata
	}
	if out.Model == "" {
		out.Model = defaultModel
	}
	if out.Model == "" {
		return nil, nil, invalidf("model: a model is required")
	}
	switch {
	case in.MaxCompletionTokens != nil:
		out.MaxOutputTokens = in.MaxCompletionTokens
	case in.MaxTokens != nil:
		out.MaxOutputTokens = in.MaxTokens
	}
	if in.ReasoningEffort != "" {
		out.Reasoning = map[string]any{"effort": in.ReasoningEffort}
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text", "":
		case "json_object":
			out.Text = map[string]any{"format": map[string]any{"type": "json_object"}}
		case "json_schema":
			js := rf.JSONSchema
			if js == nil || !chatwire.IsObject(js.Schema) {
				return nil, nil, invalidf("response_format.json_schema.schema: a JSON object is required")
			}
			f := map[string]any{"type": "json_schema", "name": js.Name, "schema": js.Schema}
			if js.Description != "" {
				f["description"] = js.Description
			}
			if js.Strict != nil {
				f["strict"] = *js.Strict
			}
			out.Text = map[string]any{"format": f}
		default:
			return nil, nil, invalidf("response_format.type: %q is not supported", rf.Type)
		}
	}
	if in.Verbosity != "" {
		if out.Text == nil {
			out.Text = map[string]any{}
		}
		out.Text["verbosity"] = in.Verbosity
	}

	for i, m := range in.Messages {
		items, err := inputItems(m)
		if err != nil {
			return nil, nil, invalidf("messages[%d]%v", i, err)
		}
		out.Input = append(out.Input, items...)
	}
	if len(out.Input) == 0 {
		return nil, nil, invalidf("messages: at least one message with content is required")
	}

	for i, t := range in.Tools {
		if t.Type != "function" {
			return nil, nil, invalidf("tools[%d].type: %q is not supported", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, nil, invalidf("tools[%d].function.name: required", i)
		}
		schema := t.Function.Parameters
		if chatwire.IsNull(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !chatwire.IsObject(schema) {
			return nil, nil, invalidf("tools[%d].function.parameters: not a JSON object", i)
		}
		tool := rsTool{Type: "function", Name: t.Function.Name, Description: t.Function.Description, Parameters: schema}
		if t.Function.Strict != nil {
			tool.Strict = *t.Function.Strict
		}
		out.Tools = append(out.Tools, tool)
	}
	if !chatwire.IsNull(in.ToolChoice) {
		choice, err := toolChoice(in.ToolChoice)
		if err != nil {
			return nil, nil, err
		}
		out.ToolChoice = choice
	}
	return out, &in, nil
}

// inputItems returns a message's input items; its error starts with the
// part of the message it is about (".content: ...").
func inputItems(m chatwire.Message) ([]rsInputItem, error) {
	switch m.Role {
	case "system", "developer", "user":
		content, empty, err := inputContent(m.Content, m.Role == "user")
		if err != nil {
			return nil, fmt.Errorf(".content: %v", err)
		}
		if empty {
			return nil, nil
		}
		return []rsInputItem{{Type: "message", Role: m.Role, Content: content}}, nil
	case "assistant":
		text, err := chatwire.ContentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf(".content: %v", err)
		}
		var items []rsInputItem
		if text != "" {
			items = append(items, rsInputItem{Type: "message", Role: "assistant", Content: text})
		}
		for j, tc := range m.ToolCalls {
			if tc.Type != "" && tc.Type != "function" {
				return nil, fmt.Errorf(".tool_calls[%d].type: %q is not supported", j, tc.Type)
			}
			if tc.ID == "" || tc.Function.Name == "" {
				return nil, fmt.Errorf(".tool_calls[%d]: id and function.name are required", j)
			}
			args := tc.Function.Arguments
			items = append(items, rsInputItem{Type: "function_call", CallID: tc.ID, Name: tc.Function.Name, Arguments: &args})
		}
		return items, nil
	case "tool":
		if m.ToolCallID == "" {
			return nil, errors.New(".tool_call_id: required for a tool message")
		}
		text, err := chatwire.ContentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf(".content: %v", err)
		}
		return []rsInputItem{{Type: "function_call_output", CallID: m.ToolCallID, Output: &text}}, nil
	}
	return nil, fmt.Errorf(".role: %q is not supported", m.Role)
}

// inputContent returns a system, developer or user message's content as a
// message item's: a string as the string, an array of parts as input
// parts (text, and for a user message image_url and file). empty is true
// for null content or no parts.
func inputContent(raw json.RawMessage, user bool) (content any, empty bool, err error) {
	if chatwire.IsNull(raw) {
		return nil, true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false, nil
	}
	var parts []chatwire.Part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, false, errors.New("neither a string nor an array of content parts")
	}
	out := make([]rsPart, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.Type == "text":
			text := p.Text
			out = append(out, rsPart{Type: "input_text", Text: &text})
		case p.Type == "image_url" && user:
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, false, errors.New("an image_url part without a url")
			}
			detail := p.ImageURL.Detail
			if detail == "" {
				detail = "auto"
			}
			out = append(out, rsPart{Type: "input_image", ImageURL: p.ImageURL.URL, Detail: detail})
		case p.Type == "file" && user:
			if p.File == nil || (p.File.FileID == "" && p.File.FileData == "") {
				return nil, false, errors.New("a file part without file_id or file_data")
			}
			out = append(out, rsPart{Type: "input_file", FileID: p.File.FileID, FileData: p.File.FileData, Filename: p.File.Filename})
		default:
			return nil, false, fmt.Errorf("a %q part is not supported by this upstream", p.Type)
		}
	}
	return out, len(out) == 0, nil
}

// toolChoice maps tool_choice: "auto", "none" and "required" as they are,
// {"type":"function","function":{"name"}} to {"type":"function","name"}.
func toolChoice(raw json.RawMessage) (any, error) {
	mode, name, err := chatwire.ParseToolChoice(raw)
	switch {
	case err != nil || mode == "":
		return nil, err
	case mode == "function":
		return map[string]string{"type": "function", "name": name}, nil
	}
	return mode, nil
}

// ---- Responses answer ----

type rsResponse struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	CreatedAt         float64  `json:"created_at"`
	Status            string   `json:"status"`
	Model             string   `json:"model"`
	Output            []rsItem `json:"output"`
	Usage             *rsUsage `json:"usage"`
	Error             *rsError `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// rsItem is an output item: a message, a function_call, or one the
// translation leaves out (reasoning).
type rsItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type rsUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type rsError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ---- Chat Completions answer ----

func (u *rsUsage) chat() *chatwire.Usage {
	if u == nil {
		return nil
	}
	out := &chatwire.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	if out.TotalTokens == 0 {
		out.TotalTokens = u.InputTokens + u.OutputTokens
	}
	out.PromptTokensDetails.CachedTokens = u.InputTokensDetails.CachedTokens
	out.CompletionTokensDetails = &chatwire.CompletionTokensDetails{ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	return out
}

// finishReason is the finish_reason of a response: an incomplete one's
// reason (max_output_tokens → length, content_filter), else tool_calls
// when it called a function, else stop.
func finishReason(r *rsResponse, toolCalls bool) string {
	if r.Status == "incomplete" && r.IncompleteDetails != nil {
		switch r.IncompleteDetails.Reason {
		case "max_output_tokens":
			return "length"
		case "content_filter":
			return "content_filter"
		}
	}
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

func completionID(respID string) string {
	if respID == "" {
		return "chatcmpl-responses"
	}
	return "chatcmpl-" + respID
}

// translateResponse turns a Responses answer into a chat.completion.
func translateResponse(r *rsResponse, now int64) *chatwire.Completion {
	var text, refusal strings.Builder
	msg := &chatwire.FullMessage{Role: "assistant"}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					refusal.WriteString(c.Refusal)
				}
			}
		case "function_call":
			tc := chatwire.ToolCall{ID: it.CallID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = it.Name, it.Arguments
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	if s := refusal.String(); s != "" {
		msg.Refusal = &s
	}
	if s := text.String(); s != "" || (len(msg.ToolCalls) == 0 && msg.Refusal == nil) {
		msg.Content = &s
	}
	fr := finishReason(r, len(msg.ToolCalls) > 0)
	created := int64(r.CreatedAt)
	if created == 0 {
		created = now
	}
	return &chatwire.Completion{
		ID:      completionID(r.ID),
		Object:  "chat.completion",
		Created: created,
		Model:   r.Model,
		Choices: []chatwire.Choice{{Index: 0, Message: msg, FinishReason: &fr}},
		Usage:   r.Usage.chat(),
	}
}

// ---- headers and errors ----

// keptHeaders returns the upstream's headers every answer keeps: its
// request ID, the rate limits, when to retry, the processing time.
func keptHeaders(src http.Header) http.Header {
	h := http.Header{}
	for k, v := range src {
		switch {
		case k == "X-Request-Id", k == "Openai-Processing-Ms", k == "Openai-Version", k == "Retry-After", k == "Retry-After-Ms",
			strings.HasPrefix(k, "X-Ratelimit-"):
			h[k] = slices.Clone(v)
		}
	}
	return h
}

// upstreamError relays an error answer: an OpenAI error body as it came,
// anything else as the message of one; the status is kept.
func upstreamError(req *http.Request, resp *http.Response) *http.Response {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	h := keptHeaders(resp.Header)
	var parsed chatwire.ErrorBody
	if chatmem.CheckJSONText(body) == nil && json.Unmarshal(body, &parsed) == nil && parsed.Error.Message != "" {
		if parsed.Error.Type == "" {
			parsed.Error.Type = chatwire.ErrorType(resp.StatusCode)
		}
		b, _ := json.Marshal(parsed)
		h.Set("Content-Type", "application/json")
		return chatwire.NewResponse(req, resp.StatusCode, h, b)
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	msg = "openai responses: " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode) + ": " + msg
	return chatwire.ErrorResponse(req, resp.StatusCode, strings.ToValidUTF8(msg, "\uFFFD"), "", h)
}

// ---- RoundTrip ----

// RoundTrip answers one chat completions request. A request that is not a
// POST to a path ending in /chat/completions gets a 404, a request it
// cannot translate a 400, both in the OpenAI error format; a network
// failure toward the upstream is returned as an error.
func (t *responsesTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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
		return chatwire.ErrorResponse(req, http.StatusNotFound, "only POST .../chat/completions is served by this transport", "not_found", nil), nil
	}
	rreq, creq, err := translateRequest(body, t.opts.Model)
	if err != nil {
		return chatwire.ErrorResponse(req, http.StatusBadRequest, err.Error(), "invalid_request", nil), nil
	}
	payload, err := json.Marshal(rreq)
	if err != nil {
		return nil, err
	}
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, t.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	out.Header.Set("Content-Type", "application/json")
	switch {
	case t.opts.APIKey != "":
		out.Header.Set("Authorization", "Bearer "+t.opts.APIKey)
	case req.Header.Get("Authorization") != "":
		out.Header.Set("Authorization", req.Header.Get("Authorization"))
	}
	if rreq.Stream {
		out.Header.Set("Accept", "text/event-stream")
	} else {
		out.Header.Set("Accept", "application/json")
	}
	resp, err := t.client.Do(out)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return upstreamError(req, resp), nil
	}
	h := keptHeaders(resp.Header)
	if rreq.Stream {
		includeUsage := creq.IncludeUsage()
		return chatwire.StreamResponse(req, h, resp.Body, func(src io.ReadCloser, dst *io.PipeWriter) {
			t.relay(src, dst, includeUsage)
		}), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("openai responses: reading the answer: %w", err)
	}
	// Decoding would turn invalid UTF-8 into U+FFFD: a reply with it is
	// refused, not translated (and stored) rewritten.
	if err := chatmem.CheckJSONText(b); err != nil {
		return chatwire.ErrorResponse(req, http.StatusBadGateway, "the upstream's answer cannot be translated as it came: "+err.Error(), "upstream_error", h), nil
	}
	var r rsResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("openai responses: reading the answer: %w", err)
	}
	if r.Object != "response" {
		return nil, fmt.Errorf("openai responses: the answer is a %q, not a response", r.Object)
	}
	if r.Status == "failed" {
		msg, code := "the response failed", "server_error"
		if r.Error != nil {
			msg, code = cmp.Or(r.Error.Message, msg), cmp.Or(r.Error.Code, code)
		}
		return chatwire.ErrorResponse(req, http.StatusBadGateway, msg, code, h), nil
	}
	completion, err := json.Marshal(translateResponse(&r, t.now().Unix()))
	if err != nil {
		return nil, err
	}
	h.Set("Content-Type", "application/json")
	return chatwire.NewResponse(req, http.StatusOK, h, completion), nil
}

// ---- streaming ----

// rsEvent is one server-sent event of a Responses stream, all types in
// one.
type rsEvent struct {
	Type        string      `json:"type"`
	Response    *rsResponse `json:"response"`
	OutputIndex int         `json:"output_index"`
	Item        *rsItem     `json:"item"`
	Delta       string      `json:"delta"`
	// Code and Message are an error event's.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// streamTool is a function call of the stream.
type streamTool struct {
	index int  // its index among the chunk's tool calls
	args  bool // whether arguments deltas came for it
}

// streamState translates one Responses stream into chunks.
type streamState struct {
	id, model    string
	created      int64
	started      bool
	tools        map[int]*streamTool // output_index → call
	includeUsage bool
}

func (s *streamState) chunk(delta *chatwire.Delta, finish *string) *chatwire.Completion {
	return chatwire.Chunk(s.id, s.model, s.created, delta, finish)
}

// errStreamCut is what the reader of a stream gets when the upstream's
// stream ended before response.completed.
var errStreamCut = errors.New("openai responses: the stream ended before response.completed")

// relay reads the Responses events from src and writes the chunks to dst
// as each arrives. A stream that ends normally ends with "data: [DONE]";
// a failure or error event is written as data: {"error":{...}} and then
// the body fails with an error, as does a stream cut short; a reader that
// closes the body stops the relay and closes src.
func (t *responsesTransport) relay(src io.ReadCloser, dst *io.PipeWriter, includeUsage bool) {
	defer src.Close()
	s := &streamState{id: completionID(""), created: t.now().Unix(), tools: map[int]*streamTool{}, includeUsage: includeUsage}
	dst.CloseWithError(s.run(src, dst)) // nil closes it normally
}

// run translates the events of src, each up to sse.MaxEventBytes, into
// chunks written to dst, until response.completed (or incomplete), a
// failure or error event, or the end of src (errStreamCut).
func (s *streamState) run(src io.Reader, dst io.Writer) error {
	rd := sse.NewReader(src, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return errStreamCut
		}
		if err != nil {
			return fmt.Errorf("openai responses: reading the stream: %w", err)
		}
		if len(ev.Data) == 0 || string(ev.Data) == "[DONE]" {
			continue
		}
		if done, err := s.event(ev.Data, dst); err != nil || done {
			return err
		}
	}
}

// start sends the first chunk, the assistant role, once.
func (s *streamState) start(w io.Writer) error {
	if s.started {
		return nil
	}
	s.started = true
	empty := ""
	return chatwire.WriteData(w, s.chunk(&chatwire.Delta{Role: "assistant", Content: &empty}, nil))
}

func (s *streamState) toolDelta(w io.Writer, tc chatwire.ToolCall) error {
	return chatwire.WriteData(w, s.chunk(&chatwire.Delta{ToolCalls: []chatwire.ToolCall{tc}}, nil))
}

// startTool sends a function call's first delta, which carries its id
// (clients key its later deltas on it), its name and any arguments the
// item already holds.
func (s *streamState) startTool(w io.Writer, outputIndex int, it *rsItem) (*streamTool, error) {
	if it.CallID == "" {
		return nil, errors.New("openai responses: a function_call item in the stream has no call_id")
	}
	st := &streamTool{index: len(s.tools)}
	s.tools[outputIndex] = st
	idx := st.index
	tc := chatwire.ToolCall{Index: &idx, ID: it.CallID, Type: "function"}
	tc.Function.Name = it.Name
	if it.Arguments != "" {
		tc.Function.Arguments, st.args = it.Arguments, true
	}
	return st, s.toolDelta(w, tc)
}

// event handles one event; done is true after response.completed or
// response.incomplete.
func (s *streamState) event(data []byte, w io.Writer) (done bool, err error) {
	// Decoding would turn invalid UTF-8 into U+FFFD, and the reply would
	// be relayed and stored rewritten: such an event breaks the stream.
	if err := chatmem.CheckJSONText(data); err != nil {
		return false, fmt.Errorf("openai responses: a stream event: %w", err)
	}
	var ev rsEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, fmt.Errorf("openai responses: a stream event is not JSON: %w", err)
	}
	switch ev.Type {
	case "response.created", "response.in_progress":
		if r := ev.Response; r != nil {
			if r.ID != "" {
				s.id = completionID(r.ID)
			}
			if r.Model != "" {
				s.model = r.Model
			}
			if r.CreatedAt != 0 {
				s.created = int64(r.CreatedAt)
			}
		}
		return false, s.start(w)
	case "response.output_item.added":
		if ev.Item == nil || ev.Item.Type != "function_call" {
			return false, nil
		}
		if err := s.start(w); err != nil {
			return false, err
		}
		_, err := s.startTool(w, ev.OutputIndex, ev.Item)
		return false, err
	case "response.output_text.delta", "response.refusal.delta":
		if ev.Delta == "" {
			return false, nil
		}
		if err := s.start(w); err != nil {
			return false, err
		}
		text := ev.Delta
		d := &chatwire.Delta{Content: &text}
		if ev.Type == "response.refusal.delta" {
			d = &chatwire.Delta{Refusal: &text}
		}
		return false, chatwire.WriteData(w, s.chunk(d, nil))
	case "response.function_call_arguments.delta":
		st, ok := s.tools[ev.OutputIndex]
		if !ok || ev.Delta == "" {
			return false, nil
		}
		st.args = true
		idx := st.index
		tc := chatwire.ToolCall{Index: &idx}
		tc.Function.Arguments = ev.Delta
		return false, s.toolDelta(w, tc)
	case "response.output_item.done":
		// A server that sends a call's arguments only with the finished
		// item (or the item only when finished) is caught up here.
		if ev.Item == nil || ev.Item.Type != "function_call" {
			return false, nil
		}
		if err := s.start(w); err != nil {
			return false, err
		}
		st, ok := s.tools[ev.OutputIndex]
		if !ok {
			_, err := s.startTool(w, ev.OutputIndex, ev.Item)
			return false, err
		}
		if !st.args && ev.Item.Arguments != "" {
			st.args = true
			idx := st.index
			tc := chatwire.ToolCall{Index: &idx}
			tc.Function.Arguments = ev.Item.Arguments
			return false, s.toolDelta(w, tc)
		}
	case "response.completed", "response.incomplete":
		if err := s.start(w); err != nil {
			return true, err
		}
		r := ev.Response
		if r == nil {
			r = &rsResponse{Status: "completed"}
		}
		fr := finishReason(r, len(s.tools) > 0)
		if err := chatwire.WriteData(w, s.chunk(nil, &fr)); err != nil {
			return true, err
		}
		if s.includeUsage {
			c := s.chunk(nil, nil)
			c.Choices = []chatwire.Choice{}
			c.Usage = r.Usage.chat()
			if c.Usage == nil {
				c.Usage = &chatwire.Usage{CompletionTokensDetails: &chatwire.CompletionTokensDetails{}}
			}
			if err := chatwire.WriteData(w, c); err != nil {
				return true, err
			}
		}
		_, err := io.WriteString(w, "data: [DONE]\n\n")
		return true, err
	case "response.failed", "error":
		msg, code := ev.Message, ev.Code
		if ev.Response != nil && ev.Response.Error != nil {
			msg, code = ev.Response.Error.Message, ev.Response.Error.Code
		}
		msg, code = cmp.Or(msg, "the response failed"), cmp.Or(code, "server_error")
		e := chatwire.Error{Message: msg, Type: chatwire.ErrorType(http.StatusInternalServerError), Code: &code}
		if err := chatwire.WriteData(w, chatwire.ErrorBody{Error: e}); err != nil {
			return true, err
		}
		return true, fmt.Errorf("openai responses: stream error %s: %s", code, msg)
	}
	// Content parts, text and arguments done events, reasoning and
	// unknown events send nothing.
	return false, nil
}
