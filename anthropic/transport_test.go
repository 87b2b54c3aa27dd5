package anthropic

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	oaoption "github.com/openai/openai-go/v3/option"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/sse"
)

// messagesFake is an httptest server speaking the wire format of
// Anthropic's Messages API (POST /v1/messages) as documented: a JSON
// request with model, max_tokens, system, messages of content blocks
// (text, image, tool_use, tool_result), tools, tool_choice, stop_sequences
// and stream; a message object as the answer, or with "stream": true
// server-sent events (message_start, content_block_start, ping,
// content_block_delta with text_delta and input_json_delta,
// content_block_stop, message_delta with stop_reason and usage,
// message_stop), each "event: <type>\ndata: <json>\n\n"; errors as
// {"type":"error","error":{"type","message"},"request_id"}. Like the API it
// refuses (400) a request whose roles do not alternate, whose last message
// is not the user's, with temperature or top_p (API version 2026-10-21),
// without max_tokens, or with a tool_use not answered by a tool_result in
// the next user message. Every request is recorded.
type messagesFake struct {
	*httptest.Server
	key string

	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	// answer returns the message (content blocks and stop_reason) of the
	// n-th request (from 1), or an error status.
	answer func(n int) fakeAnswer
}

type fakeAnswer struct {
	content    []map[string]any
	stopReason string
	status     int
	errType    string
	errMsg     string
	// streamErr, if set, is sent as an error event after the first block.
	streamErr string
	header    map[string]string
}

func newMessagesFake(t *testing.T) *messagesFake {
	f := &messagesFake{key: "sk-ant-transport"}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *messagesFake) transport(t *testing.T) http.RoundTripper {
	t.Helper()
	tr, err := NewChatCompletionsTransport(Options{BaseURL: f.URL, APIKey: f.key, Model: "claude-default", MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func (f *messagesFake) last(t *testing.T) (map[string]any, http.Header) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		t.Fatal("the fake received no request")
	}
	return f.bodies[len(f.bodies)-1], f.headers[len(f.headers)-1]
}

// wireInvalid returns why the API would refuse the request with a 400.
func wireInvalid(body map[string]any) string {
	if _, ok := body["max_tokens"].(float64); !ok {
		return "max_tokens: Field required"
	}
	for _, k := range []string{"temperature", "top_p", "top_k"} {
		if _, ok := body[k]; ok {
			return k + ": not supported in this API version"
		}
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return "messages: at least one message is required"
	}
	var pendingToolUse []string
	prev := ""
	for i, raw := range msgs {
		m, _ := raw.(map[string]any)
		role, _ := m["role"].(string)
		if role != "user" && role != "assistant" {
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if role == prev {
			return fmt.Sprintf("messages.%d: roles must alternate between user and assistant", i)
		}
		prev = role
		blocks, ok := m["content"].([]any)
		if !ok {
			if s, isStr := m["content"].(string); !isStr || s == "" {
				return fmt.Sprintf("messages.%d.content: required", i)
			}
		}
		var results []string
		for _, rb := range blocks {
			b, _ := rb.(map[string]any)
			switch b["type"] {
			case "text":
				if b["text"] == "" || b["text"] == nil {
					return fmt.Sprintf("messages.%d: text content blocks must be non-empty", i)
				}
			case "tool_use":
				if role != "assistant" {
					return "tool_use blocks are the assistant's"
				}
				if _, ok := b["input"].(map[string]any); !ok {
					return "tool_use.input: must be an object"
				}
				pendingToolUse = append(pendingToolUse, b["id"].(string))
			case "tool_result":
				results = append(results, b["tool_use_id"].(string))
			}
		}
		if role == "user" {
			if len(pendingToolUse) > 0 && !reflect.DeepEqual(pendingToolUse, results) {
				return fmt.Sprintf("messages.%d: tool_use ids %v were found without tool_result blocks immediately after", i, pendingToolUse)
			}
			pendingToolUse = nil
		}
	}
	if prev != "user" {
		return "The conversation must end with a user message."
	}
	return ""
}

func (f *messagesFake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, apiError("not_found_error", "Not found"))
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	parseErr := json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.headers = append(f.headers, r.Header.Clone())
	n := len(f.bodies)
	answer := f.answer
	f.mu.Unlock()
	switch {
	case r.Header.Get("X-Api-Key") != f.key:
		writeError(w, http.StatusUnauthorized, apiError("authentication_error", "invalid x-api-key"))
		return
	case r.Header.Get("Anthropic-Version") != "2026-10-21":
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "anthropic-version: header is required"))
		return
	case parseErr != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "Request body is not valid JSON"))
		return
	}
	if why := wireInvalid(body); why != "" {
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", why))
		return
	}
	a := fakeAnswer{content: []map[string]any{{"type": "text", "text": "Hello there."}}}
	if answer != nil {
		a = answer(n)
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.status != 0 && a.status != http.StatusOK {
		writeError(w, a.status, apiError(a.errType, a.errMsg))
		return
	}
	if a.stopReason == "" {
		a.stopReason = "end_turn"
	}
	model, _ := body["model"].(string)
	id := fmt.Sprintf("msg_01fake%d", n)
	usage := map[string]any{"input_tokens": 42, "output_tokens": 17, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 8}
	w.Header().Set("request-id", fmt.Sprintf("req_%d", n))
	if stream, _ := body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": a.content, "stop_reason": a.stopReason, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
		flusher.Flush()
	}
	send(map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 42, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 8},
	}})
	send(map[string]any{"type": "ping"})
	for i, b := range a.content {
		switch b["type"] {
		case "text":
			send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range splitN(b["text"].(string), 4) {
				send(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
			}
		case "tool_use":
			send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			input, _ := json.Marshal(b["input"])
			send(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for _, piece := range splitN(string(input), 5) {
				send(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
			}
		}
		send(map[string]any{"type": "content_block_stop", "index": i})
		if a.streamErr != "" {
			send(map[string]any{"type": "error", "error": map[string]any{"type": a.streamErr, "message": "Overloaded"}})
			return
		}
	}
	send(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": a.stopReason, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 17}})
	send(map[string]any{"type": "message_stop"})
}

// splitN cuts s into pieces of at most n bytes.
func splitN(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// post sends body as a chat completions request through tr.
func post(t *testing.T, tr http.RoundTripper, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://chatmem.invalid/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer chatmem-client-key")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decode(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func jsonEq(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	g, _ := json.Marshal(got)
	var gn any
	json.Unmarshal(g, &gn)
	if !reflect.DeepEqual(gn, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, want)
	}
}

const toolTurnRequest = `{
  "model": "claude-sonnet-test",
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
    {"role": "user", "content": "Weather in Paris"},
    {"role": "user", "content": [{"type": "text", "text": "and Rome?"}]},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
      {"id": "call_paris", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call_rome", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_paris", "content": "18C"},
    {"role": "tool", "tool_call_id": "call_rome", "content": [{"type": "text", "text": "24C"}]},
    {"role": "user", "content": "Which is warmer?"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
  "tool_choice": "required",
  "parallel_tool_calls": false,
  "max_completion_tokens": 300,
  "max_tokens": 99,
  "temperature": 0.2,
  "top_p": 0.9,
  "stop": ["END", "  "],
  "user": "u-1",
  "response_format": {"type": "json_schema", "json_schema": {"name": "w", "strict": true, "schema": {"type": "object", "properties": {"warmer": {"type": "string"}}}}}
}`

func TestTransportTranslatesRequest(t *testing.T) {
	f := newMessagesFake(t)
	resp := post(t, f.transport(t), toolTurnRequest)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, decode(t, resp))
	}
	resp.Body.Close()
	body, h := f.last(t)
	if h.Get("Authorization") != "" {
		t.Errorf("Authorization %q reached Anthropic", h.Get("Authorization"))
	}
	if h.Get("X-Api-Key") != f.key || h.Get("Anthropic-Version") != "2026-10-21" {
		t.Errorf("x-api-key %q, anthropic-version %q", h.Get("X-Api-Key"), h.Get("Anthropic-Version"))
	}
	jsonEq(t, "request", body, `{
	  "model": "claude-sonnet-test",
	  "max_tokens": 300,
	  "system": "You are terse.\n\nUse tools.",
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris"}, {"type": "text", "text": "and Rome?"}]},
	    {"role": "assistant", "content": [
	      {"type": "text", "text": "Checking."},
	      {"type": "tool_use", "id": "call_paris", "name": "get_weather", "input": {"city": "Paris"}},
	      {"type": "tool_use", "id": "call_rome", "name": "get_weather", "input": {"city": "Rome"}}
	    ]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "call_paris", "content": "18C"},
	      {"type": "tool_result", "tool_use_id": "call_rome", "content": "24C"},
	      {"type": "text", "text": "Which is warmer?"}
	    ]}
	  ],
	  "tools": [{"name": "get_weather", "description": "Current weather",
	    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
	  "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
	  "stop_sequences": ["END"],
	  "metadata": {"user_id": "u-1"},
	  "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"warmer": {"type": "string"}}}}}
	}`)
}

func TestTransportDefaultsAndToolChoice(t *testing.T) {
	f := newMessagesFake(t)
	tr := f.transport(t)
	resp := post(t, tr, `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"stop":"STOP"}`)
	resp.Body.Close()
	body, _ := f.last(t)
	if body["model"] != "claude-default" || body["max_tokens"] != 1000.0 {
		t.Errorf("model %v, max_tokens %v; want the Options defaults", body["model"], body["max_tokens"])
	}
	jsonEq(t, "tools", body["tools"], `[{"name":"f","input_schema":{"type":"object","properties":{}}}]`)
	jsonEq(t, "tool_choice", body["tool_choice"], `{"type":"tool","name":"f"}`)
	jsonEq(t, "stop_sequences", body["stop_sequences"], `["STOP"]`)
	for _, k := range []string{"system", "output_config", "metadata"} {
		if _, ok := body[k]; ok {
			t.Errorf("%s %v sent, want none", k, body[k])
		}
	}

	for choice, want := range map[string]string{`"auto"`: `{"type":"auto"}`, `"none"`: `{"type":"none"}`, `"required"`: `{"type":"any"}`} {
		resp := post(t, tr, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":`+choice+`}`)
		resp.Body.Close()
		body, _ := f.last(t)
		jsonEq(t, "tool_choice "+choice, body["tool_choice"], want)
	}
}

func TestTransportRefusesBadRequests(t *testing.T) {
	f := newMessagesFake(t)
	tr := f.transport(t)
	for name, body := range map[string]string{
		"not json":        `{`,
		"no messages":     `{"model":"m","messages":[]}`,
		"only system":     `{"model":"m","messages":[{"role":"system","content":"x"}]}`,
		"bad arguments":   `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`,
		"tool without id": `{"model":"m","messages":[{"role":"tool","content":"x"}]}`,
		"n=2":             `{"model":"m","n":2,"messages":[{"role":"user","content":"a"}]}`,
		"role function":   `{"model":"m","messages":[{"role":"function","content":"a"}]}`,
	} {
		resp := post(t, tr, body)
		got := decode(t, resp)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, resp.StatusCode)
		}
		e, _ := got["error"].(map[string]any)
		if e["type"] != "invalid_request_error" || e["message"] == "" {
			t.Errorf("%s: body %v", name, got)
		}
	}
	f.mu.Lock()
	n := len(f.bodies)
	f.mu.Unlock()
	if n != 0 {
		t.Errorf("%d refused requests reached Anthropic", n)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/v1/models", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/models: %v, %v; want a 404", resp, err)
	}
}

func toolUseAnswer(int) fakeAnswer {
	return fakeAnswer{
		content: []map[string]any{
			{"type": "text", "text": "Let me check."},
			{"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": map[string]any{"city": "Paris", "unit": "c"}},
		},
		stopReason: "tool_use",
	}
}

func TestTransportResponse(t *testing.T) {
	f := newMessagesFake(t)
	f.answer = toolUseAnswer
	resp := post(t, f.transport(t), `{"model":"claude-x","messages":[{"role":"user","content":"Weather?"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got := decode(t, resp)
	if c, ok := got["created"].(float64); !ok || c <= 0 {
		t.Errorf("created %v", got["created"])
	}
	delete(got, "created")
	jsonEq(t, "completion", got, `{
	  "id": "chatcmpl-msg_01fake1", "object": "chat.completion", "model": "claude-x",
	  "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
	    "role": "assistant", "content": "Let me check.", "refusal": null,
	    "tool_calls": [{"id": "toolu_01A", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}}]
	  }}],
	  "usage": {"prompt_tokens": 50, "completion_tokens": 17, "total_tokens": 67, "prompt_tokens_details": {"cached_tokens": 8}}
	}`)
}

func TestTransportResponseToolCallsOnly(t *testing.T) {
	f := newMessagesFake(t)
	f.answer = func(int) fakeAnswer {
		return fakeAnswer{content: []map[string]any{
			{"type": "thinking", "thinking": "hmm", "signature": "sig"},
			{"type": "tool_use", "id": "toolu_1", "name": "a", "input": map[string]any{}},
			{"type": "tool_use", "id": "toolu_2", "name": "b", "input": map[string]any{"x": []any{1, 2}}},
		}, stopReason: "tool_use"}
	}
	got := decode(t, post(t, f.transport(t), `{"model":"m","messages":[{"role":"user","content":"go"}]}`))
	jsonEq(t, "message", got["choices"].([]any)[0].(map[string]any)["message"], `{"role":"assistant","content":null,"refusal":null,"tool_calls":[
	  {"id":"toolu_1","type":"function","function":{"name":"a","arguments":"{}"}},
	  {"id":"toolu_2","type":"function","function":{"name":"b","arguments":"{\"x\":[1,2]}"}}]}`)
}

func TestTransportStreamCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
	}))
	defer srv.Close()
	tr, _ := NewChatCompletionsTransport(Options{BaseURL: srv.URL, APIKey: "k"})
	resp := post(t, tr, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	chunks, done, err := readChunks(t, resp.Body)
	if !errors.Is(err, errStreamCut) || done || len(chunks) != 1 {
		t.Errorf("cut stream: %d chunks, [DONE] %v, error %v; want 1, false, errStreamCut", len(chunks), done, err)
	}
}

func TestFinishReasons(t *testing.T) {
	for stop, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
		"tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop",
	} {
		if got := finishReason(stop); got != want {
			t.Errorf("finishReason(%q) = %q, want %q", stop, got, want)
		}
	}
}

// readChunks reads an OpenAI SSE body: the chunks, and whether [DONE]
// ended it.
func readChunks(t *testing.T, r io.Reader) (chunks []map[string]any, done bool, err error) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Errorf("line %q is not a data line", line)
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		chunks = append(chunks, c)
	}
	return chunks, done, sc.Err()
}

func TestTransportStream(t *testing.T) {
	f := newMessagesFake(t)
	f.answer = toolUseAnswer
	resp := post(t, f.transport(t), `{"model":"claude-x","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Weather?"}]}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, _ := f.last(t)
	if body["stream"] != true {
		t.Errorf("stream %v not sent", body["stream"])
	}
	chunks, done, err := readChunks(t, resp.Body)
	if err != nil || !done {
		t.Fatalf("stream ended with %v, [DONE] %v", err, done)
	}
	var text strings.Builder
	type call struct{ id, name, args string }
	var calls []call
	var role, finish string
	var usage any
	for i, c := range chunks {
		if c["object"] != "chat.completion.chunk" || c["id"] != "chatcmpl-msg_01fake1" || c["model"] != "claude-x" {
			t.Errorf("chunk %d: %v", i, c)
		}
		if u, ok := c["usage"]; ok {
			usage = u
		}
		choices := c["choices"].([]any)
		if len(choices) == 0 {
			continue
		}
		ch := choices[0].(map[string]any)
		if fr, ok := ch["finish_reason"].(string); ok {
			finish = fr
		}
		d := ch["delta"].(map[string]any)
		if r, ok := d["role"].(string); ok {
			if i != 0 {
				t.Errorf("role in chunk %d", i)
			}
			role = r
		}
		if s, ok := d["content"].(string); ok {
			text.WriteString(s)
		}
		tcs, _ := d["tool_calls"].([]any)
		for _, raw := range tcs {
			tc := raw.(map[string]any)
			idx := int(tc["index"].(float64))
			if idx == len(calls) {
				calls = append(calls, call{})
			}
			if id, ok := tc["id"].(string); ok {
				calls[idx].id = id
			}
			fn := tc["function"].(map[string]any)
			if name, ok := fn["name"].(string); ok {
				calls[idx].name = name
			}
			calls[idx].args += fn["arguments"].(string)
		}
	}
	if role != "assistant" || text.String() != "Let me check." || finish != "tool_calls" {
		t.Errorf("role %q, text %q, finish %q", role, text.String(), finish)
	}
	want := []call{{"toolu_01A", "get_weather", `{"city":"Paris","unit":"c"}`}}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("tool calls %+v, want %+v", calls, want)
	}
	jsonEq(t, "usage", usage, `{"prompt_tokens":50,"completion_tokens":17,"total_tokens":67,"prompt_tokens_details":{"cached_tokens":8}}`)
	if len(chunks) < 8 {
		t.Errorf("%d chunks: the deltas were not relayed one by one", len(chunks))
	}
}

func TestTransportStreamError(t *testing.T) {
	f := newMessagesFake(t)
	f.answer = func(int) fakeAnswer {
		return fakeAnswer{content: []map[string]any{{"type": "text", "text": "partial answer"}}, streamErr: "overloaded_error"}
	}
	resp := post(t, f.transport(t), `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	chunks, done, err := readChunks(t, resp.Body)
	if err == nil || done {
		t.Fatalf("stream error: read error %v, [DONE] %v; want an error and no [DONE]", err, done)
	}
	last := chunks[len(chunks)-1]
	jsonEq(t, "error event", last, `{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`)
}

func TestTransportErrors(t *testing.T) {
	f := newMessagesFake(t)
	tr := f.transport(t)
	for _, c := range []struct {
		status, wantStatus int
		errType, wantType  string
	}{
		{429, 429, "rate_limit_error", "rate_limit_error"},
		{529, 503, "overloaded_error", "server_error"},
		{500, 500, "api_error", "server_error"},
		{400, 400, "invalid_request_error", "invalid_request_error"},
		{403, 403, "permission_error", "permission_error"},
		{404, 404, "not_found_error", "not_found_error"},
	} {
		f.answer = func(int) fakeAnswer {
			return fakeAnswer{status: c.status, errType: c.errType, errMsg: "upstream says no", header: map[string]string{"Retry-After": "7"}}
		}
		resp := post(t, tr, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != c.wantStatus || resp.Header.Get("Retry-After") != "7" {
			t.Errorf("%d: status %d, Retry-After %q; want %d, 7", c.status, resp.StatusCode, resp.Header.Get("Retry-After"), c.wantStatus)
		}
		jsonEq(t, fmt.Sprint(c.status), decode(t, resp), fmt.Sprintf(`{"error":{"message":"upstream says no","type":%q,"param":null,"code":%q}}`, c.wantType, c.errType))
	}

	// A wrong key: the fake's 401.
	bad, _ := NewChatCompletionsTransport(Options{BaseURL: f.URL, APIKey: "wrong", Model: "m"})
	resp := post(t, bad, `{"messages":[{"role":"user","content":"hi"}]}`)
	got := decode(t, resp)
	if resp.StatusCode != 401 || got["error"].(map[string]any)["code"] != "authentication_error" {
		t.Errorf("wrong key: %d %v", resp.StatusCode, got)
	}

	// A network failure is a RoundTrip error.
	f.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if resp, err := tr.RoundTrip(req); err == nil {
		t.Errorf("closed upstream: %d, want an error", resp.StatusCode)
	}
}

func TestNewChatCompletionsTransportOptions(t *testing.T) {
	if _, err := NewChatCompletionsTransport(Options{}); err == nil {
		t.Error("no key for the default base URL: no error")
	}
	if _, err := NewChatCompletionsTransport(Options{BaseURL: "http://x", MaxTokens: -1}); err == nil {
		t.Error("negative max tokens: no error")
	}
}

// TestOpenAISDKThroughTransport runs a tool-call round trip and a stream
// with the official openai-go client over the transport.
func TestOpenAISDKThroughTransport(t *testing.T) {
	f := newMessagesFake(t)
	f.answer = func(n int) fakeAnswer {
		if n == 1 {
			return toolUseAnswer(n)
		}
		return fakeAnswer{content: []map[string]any{{"type": "text", "text": "Paris is 18C."}}}
	}
	client := openai.NewClient(
		oaoption.WithBaseURL("https://chatmem.invalid/v1/"),
		oaoption.WithAPIKey("chatmem-client-key"),
		oaoption.WithHTTPClient(&http.Client{Transport: f.transport(t)}),
		oaoption.WithMaxRetries(0),
	)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: "claude-x",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."),
			openai.UserMessage("Weather in Paris?"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:       "get_weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	if first.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "toolu_01A" ||
		msg.ToolCalls[0].Function.Arguments != `{"city":"Paris","unit":"c"}` || first.Usage.PromptTokens != 50 {
		t.Fatalf("first answer %+v", first)
	}
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("18C", msg.ToolCalls[0].ID))
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Choices[0].Message.Content != "Paris is 18C." || second.Choices[0].FinishReason != "stop" {
		t.Errorf("second answer %+v", second.Choices[0])
	}
	body, h := f.last(t)
	if h.Get("Authorization") != "" {
		t.Error("the client's bearer token reached Anthropic")
	}
	msgs := body["messages"].([]any)
	jsonEq(t, "second request's messages", msgs[1:], `[
	  {"role":"assistant","content":[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris","unit":"c"}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"18C"}]}
	]`)

	// Streaming, assembled by the SDK's accumulator.
	f.answer = toolUseAnswer
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "claude-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather?")},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0]
	if got.Message.Content != "Let me check." || got.FinishReason != "tool_calls" || len(got.Message.ToolCalls) != 1 ||
		got.Message.ToolCalls[0].ID != "toolu_01A" || got.Message.ToolCalls[0].Function.Name != "get_weather" ||
		got.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris","unit":"c"}` {
		t.Errorf("accumulated stream %+v", got)
	}

	// Errors reach the SDK as its *openai.Error.
	f.answer = func(int) fakeAnswer { return fakeAnswer{status: 429, errType: "rate_limit_error", errMsg: "slow down"} }
	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Message != "slow down" {
		t.Errorf("429: %v", err)
	}
}

// FuzzTranslateRequest checks that translating any body does not panic and
// that every request it accepts has alternating user/assistant roles, no
// empty message, no empty text block and tool_use inputs that are objects.
func FuzzTranslateRequest(f *testing.F) {
	f.Add([]byte(toolTurnRequest))
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":""},{"role":"user","content":"a"},{"role":"tool","tool_call_id":"x","content":null}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"stop":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, _, err := translateRequest(body, "m", 100)
		if err != nil {
			return
		}
		if len(out.Messages) == 0 || out.MaxTokens < 1 || out.Model == "" {
			t.Fatalf("accepted %s as %+v", body, out)
		}
		for i, m := range out.Messages {
			if m.Role != "user" && m.Role != "assistant" {
				t.Fatalf("message %d role %q", i, m.Role)
			}
			if i > 0 && out.Messages[i-1].Role == m.Role {
				t.Fatalf("messages %d and %d are both %s", i-1, i, m.Role)
			}
			if len(m.Content) == 0 {
				t.Fatalf("message %d is empty", i)
			}
			seenText := false
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if b.Text == "" {
						t.Fatalf("empty text block in message %d", i)
					}
					seenText = true
				case "tool_use":
					if !isObject(b.Input) {
						t.Fatalf("tool_use input %s", b.Input)
					}
				case "tool_result":
					if seenText {
						t.Fatalf("tool_result after text in message %d", i)
					}
				}
			}
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTransportStreamRelaysAsItComes checks that a chunk reaches the reader
// while Anthropic's stream is still open, and that closing the body ends
// the upstream request.
func TestTransportStreamRelaysAsItComes(t *testing.T) {
	release := make(chan struct{})
	upstreamDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(upstreamDone)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"first\"}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr, err := NewChatCompletionsTransport(Options{BaseURL: srv.URL, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	resp := post(t, tr, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	r := bufio.NewReader(resp.Body)
	var seen []string
	for len(seen) < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %v: %v", seen, err)
		}
		if strings.HasPrefix(line, "data: ") {
			seen = append(seen, line)
		}
	}
	if !strings.Contains(seen[1], `"content":"first"`) {
		t.Errorf("second chunk %q, want the first text delta", seen[1])
	}
	resp.Body.Close()
	select {
	case <-upstreamDone:
	case <-time.After(5 * time.Second):
		t.Error("closing the body did not end the upstream request")
	}
}

// An OpenAI client talks to Claude through the transport; the base URL is
// not dialed.
func ExampleNewChatCompletionsTransport() {
	tr, err := NewChatCompletionsTransport(Options{APIKey: "sk-ant-...", Model: "claude-haiku-4-5", MaxTokens: 1024})
	if err != nil {
		panic(err)
	}
	client := openai.NewClient(
		oaoption.WithBaseURL("http://anthropic.invalid/v1"),
		oaoption.WithAPIKey("unused"),
		oaoption.WithHTTPClient(&http.Client{Transport: tr}),
	)
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Answer in one word."),
			openai.UserMessage("What colour is the sky?"),
		},
		Model: "claude-haiku-4-5",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Choices[0].Message.Content)
}

func TestTransportConcurrent(t *testing.T) {
	f := newMessagesFake(t)
	f.answer = toolUseAnswer
	tr := f.transport(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := i%2 == 0
			resp := post(t, tr, fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"q%d"}]}`, stream, i))
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "toolu_01A") {
				t.Errorf("request %d: %d %v %s", i, resp.StatusCode, err, b)
			}
		}()
	}
	wg.Wait()
}

// TestTransportStreamEvents: the translation reads events of any size up
// to sse.MaxEventBytes whole; an event over it, or one whose text
// decoding would rewrite (invalid UTF-8, a lone surrogate escape), breaks
// the stream: no [DONE], and an error for the reader.
func TestTransportStreamEvents(t *testing.T) {
	delta := func(text string) string {
		return `event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}` + "\n\n"
	}
	stream := func(text string) string {
		return `data: {"type":"message_start","message":{"id":"msg_1","model":"claude-test","usage":{"input_tokens":1}}}` + "\n\n" +
			delta(text) + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}` + "\n\n" +
			`data: {"type":"message_stop"}` + "\n\n"
	}
	big := strings.Repeat("ab", 150_000)
	for _, tc := range []struct {
		name, in, want string
		err            error
	}{
		{"300,000 characters", stream(big), big, nil},
		{"over the limit", stream(strings.Repeat("x", sse.MaxEventBytes)), "", sse.ErrEventTooLarge},
		{"invalid utf-8", stream("caf\xe9"), "", chatmem.ErrInvalid},
		{"lone surrogate", stream(`\ud83d`), "", chatmem.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &streamState{toolIndex: map[int]int{}}
			var out strings.Builder
			err := s.run(strings.NewReader(tc.in), &out)
			chunks, done, rerr := readChunks(t, strings.NewReader(out.String()))
			if rerr != nil {
				t.Fatal(rerr)
			}
			var text strings.Builder
			for _, c := range chunks {
				if choices, _ := c["choices"].([]any); len(choices) > 0 {
					d, _ := choices[0].(map[string]any)["delta"].(map[string]any)
					s, _ := d["content"].(string)
					text.WriteString(s)
				}
			}
			if !errors.Is(err, tc.err) || done != (tc.err == nil) {
				t.Errorf("run = %v, [DONE] %v; want %v", err, done, tc.err)
			}
			if tc.err == nil && text.String() != tc.want {
				t.Errorf("the chunks carry %d bytes of text, want %d", text.Len(), len(tc.want))
			}
		})
	}
}

// TestTransportCacheBreakpoints: a request with prompt_cache_key (what
// chatmem's proxy sends for a cache-stable window) marks two Anthropic
// cache breakpoints, the end of the system prompt and the request's last
// block, and nothing else changes; without it, none.
func TestTransportCacheBreakpoints(t *testing.T) {
	f := newMessagesFake(t)
	send := func(body string) map[string]any {
		t.Helper()
		resp := post(t, f.transport(t), body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %v", resp.StatusCode, decode(t, resp))
		}
		resp.Body.Close()
		req, _ := f.last(t)
		return req
	}
	plain := send(toolTurnRequest)
	keyed := send(strings.Replace(toolTurnRequest, "{", `{"prompt_cache_key": "chatmem:acme:c1",`, 1))
	if s := mustJSON(t, plain); strings.Contains(s, "cache_control") {
		t.Errorf("a request without prompt_cache_key marked breakpoints: %s", s)
	}
	jsonEq(t, "system", keyed["system"], `[{"type": "text", "text": "You are terse.\n\nUse tools.", "cache_control": {"type": "ephemeral"}}]`)
	for k := range plain {
		if k != "system" && k != "messages" {
			jsonEq(t, k, keyed[k], mustJSON(t, plain[k]))
		}
	}
	km, pm := keyed["messages"].([]any), plain["messages"].([]any)
	n := len(km)
	if n != len(pm) {
		t.Fatalf("%d messages with prompt_cache_key, %d without", n, len(pm))
	}
	for i := range n - 1 {
		jsonEq(t, fmt.Sprintf("message %d", i), km[i], mustJSON(t, pm[i]))
	}
	jsonEq(t, "last message", km[n-1].(map[string]any)["content"], `[
	  {"type": "tool_result", "tool_use_id": "call_paris", "content": "18C"},
	  {"type": "tool_result", "tool_use_id": "call_rome", "content": "24C"},
	  {"type": "text", "text": "Which is warmer?", "cache_control": {"type": "ephemeral"}}
	]`)
	if c := strings.Count(mustJSON(t, keyed), "cache_control"); c != 2 {
		t.Errorf("%d breakpoints, want 2 (Anthropic allows 4)", c)
	}
}

// TestTransportStablePrefixBreakpoint: a request made with
// chatmem.WithCachePrefix gets a third breakpoint at the end of its stable
// part (here the first five messages: the system prompt, the user's two
// messages and the assistant's tool calls), so that the next request
// reads them from the cache though what follows them changed. A prefix
// that covers only system messages, or every message, adds none.
func TestTransportStablePrefixBreakpoint(t *testing.T) {
	f := newMessagesFake(t)
	body := strings.Replace(toolTurnRequest, "{", `{"prompt_cache_key": "chatmem-1",`, 1)
	send := func(n int) string {
		t.Helper()
		req, err := http.NewRequestWithContext(chatmem.WithCachePrefix(t.Context(), n), http.MethodPost, "http://chatmem.invalid/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: f.transport(t)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("prefix %d: status %d", n, resp.StatusCode)
		}
		got, _ := f.last(t)
		return mustJSON(t, got)
	}
	got := send(5)
	if c := strings.Count(got, "cache_control"); c != 3 {
		t.Errorf("prefix 5: %d breakpoints, want 3: %s", c, got)
	}
	var req struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(got), &req); err != nil {
		t.Fatal(err)
	}
	if calls := req.Messages[1].Content; len(calls) != 3 || calls[2]["cache_control"] == nil || calls[2]["id"] != "call_rome" {
		t.Errorf("prefix 5: the assistant's content %v, want the breakpoint on its last block (call_rome)", calls)
	}
	for _, n := range []int{2, 8} {
		if c := strings.Count(send(n), "cache_control"); c != 2 {
			t.Errorf("prefix %d: %d breakpoints, want 2", n, c)
		}
	}
}
