package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem/anthropic"
)

// The real Responses clients against the upstream kinds their other tests
// do not cover: the npm `openai` client and the OpenAI Agents SDK in front
// of Anthropic's Messages API, the Vercel AI SDK in front of the Responses
// API and of the Messages API. Each checks what its Chat Completions twin
// checks of the store, and that the upstream got its own wire format.

// messagesMatrixFake is Anthropic's Messages API (POST /v1/messages) as the
// scripts expect their upstream: a tool_use of get_weather({"city":"Paris"})
// (id call_weather) when the newest user text is "weather in Paris?",
// "answer N" to its Nth request otherwise, with 42 input and 7 output
// tokens; streamed as the API streams when asked. Like the API it refuses
// (400) a request without max_tokens or x-api-key, whose roles do not
// alternate or do not end with the user's, or with a tool_use not answered
// by a tool_result in the next message. Every request is recorded.
type messagesMatrixFake struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newMessagesMatrixEnv(t *testing.T) (*proxyEnv, *messagesMatrixFake) {
	t.Helper()
	f := &messagesMatrixFake{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: f.URL, APIKey: "sk-ant-matrix", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	return newProxyEnv(t, proxyConfig{baseURL: f.URL, upClient: &http.Client{Transport: tr}}), f
}

func (f *messagesMatrixFake) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// messagesInvalid returns why the Messages API would refuse body.
func messagesInvalid(body map[string]any) string {
	if _, ok := body["max_tokens"].(float64); !ok {
		return "max_tokens: Field required"
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return "messages: at least one message is required"
	}
	var pending []string
	prev := ""
	for i, raw := range msgs {
		m, _ := raw.(map[string]any)
		role, _ := m["role"].(string)
		if role != "user" && role != "assistant" || role == prev {
			return fmt.Sprintf("messages.%d: roles must alternate between user and assistant", i)
		}
		prev = role
		blocks, ok := m["content"].([]any)
		if s, isStr := m["content"].(string); !ok && (!isStr || s == "") {
			return fmt.Sprintf("messages.%d.content: required", i)
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
				if _, ok := b["input"].(map[string]any); role != "assistant" || !ok {
					return fmt.Sprintf("messages.%d: bad tool_use", i)
				}
				pending = append(pending, fmt.Sprint(b["id"]))
			case "tool_result":
				results = append(results, fmt.Sprint(b["tool_use_id"]))
			default:
				return fmt.Sprintf("messages.%d: unknown block type %v", i, b["type"])
			}
		}
		if role == "user" {
			if len(pending) > 0 && !reflect.DeepEqual(pending, results) {
				return fmt.Sprintf("messages.%d: tool_use ids %v were found without tool_result blocks immediately after", i, pending)
			}
			pending = nil
		}
	}
	if prev != "user" {
		return "The conversation must end with a user message."
	}
	return ""
}

func (f *messagesMatrixFake) serve(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%s}}`, typ, jsonText(msg))
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		fail(http.StatusNotFound, "not_found_error", "Not found")
		return
	}
	if r.Header.Get("X-Api-Key") != "sk-ant-matrix" {
		fail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		fail(http.StatusBadRequest, "invalid_request_error", "Request body is not valid JSON")
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	n := len(f.bodies)
	f.mu.Unlock()
	if why := messagesInvalid(body); why != "" {
		fail(http.StatusBadRequest, "invalid_request_error", why)
		return
	}
	content := []map[string]any{{"type": "text", "text": fmt.Sprintf("answer %d", n)}}
	stop := "end_turn"
	if b := messagesBrief(body); strings.HasSuffix(b[len(b)-1], "user:weather in Paris?") {
		content = []map[string]any{{"type": "tool_use", "id": "call_weather", "name": "get_weather", "input": map[string]any{"city": "Paris"}}}
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 42, "output_tokens": 7}
	if stream, _ := body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": body["model"],
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
		fl.Flush()
	}
	send(map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant",
		"model": body["model"], "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 42, "output_tokens": 1}}})
	for i, b := range content {
		switch b["type"] {
		case "text":
			send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			text := b["text"].(string)
			for j := 0; j < len(text); j += 3 {
				send(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": text[j:min(j+3, len(text))]}})
			}
		case "tool_use":
			send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			input, _ := json.Marshal(b["input"])
			send(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		}
		send(map[string]any{"type": "content_block_stop", "index": i})
	}
	send(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 7}})
	send(map[string]any{"type": "message_stop"})
}

// messagesBrief renders a Messages request's content blocks as inputBrief
// renders Responses items: "role:text", "assistant:->id:name(input)",
// "tool[id]:content".
func messagesBrief(body map[string]any) []string {
	msgs, _ := body["messages"].([]any)
	var out []string
	for _, raw := range msgs {
		m, _ := raw.(map[string]any)
		if s, ok := m["content"].(string); ok {
			out = append(out, fmt.Sprint(m["role"], ":", s))
			continue
		}
		blocks, _ := m["content"].([]any)
		for _, rb := range blocks {
			b, _ := rb.(map[string]any)
			switch b["type"] {
			case "text":
				out = append(out, fmt.Sprint(m["role"], ":", b["text"]))
			case "tool_use":
				in, _ := json.Marshal(b["input"])
				out = append(out, fmt.Sprint("assistant:->", b["id"], ":", b["name"], "(", string(in), ")"))
			case "tool_result":
				c, ok := b["content"].(string)
				if !ok {
					cb, _ := json.Marshal(b["content"])
					c = string(cb)
				}
				out = append(out, fmt.Sprint("tool[", b["tool_use_id"], "]:", c))
			}
		}
	}
	return out
}

// TestResponsesNodeClientMatrixAnthropic runs
// testdata/node/responses-client.mjs (the `openai` npm client: ten turns
// on a conversation, streaming, a function tool round trip, a
// previous_response_id chain) in front of Anthropic's Messages API: what
// the client read back is what the store holds, item by item, and each
// request went up in the Messages format with the memory it had.
func TestResponsesNodeClientMatrixAnthropic(t *testing.T) {
	env, f := newMessagesMatrixEnv(t)
	lines := runNodeScript(t, env, "responses-client.mjs", "openai")
	var res struct {
		Conversation string            `json:"conversation"`
		Items        []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("client output: %v\n%q", err, lines)
	}
	stored := env.stored(t, res.Conversation)
	var items []item
	markers := 0
	for _, m := range stored {
		if hidden(m) {
			markers++
			continue
		}
		items = append(items, messageItems(m)...)
	}
	if markers != 2 {
		t.Errorf("stored %d metadata markers, want 2", markers)
	}
	if len(items) != len(res.Items) {
		t.Fatalf("the store holds %d items, the client read %d", len(items), len(res.Items))
	}
	for i, it := range items {
		if !jsonEqual(t, it.raw, res.Items[i]) {
			t.Errorf("item %d: stored %s, client read %s", i, it.raw, res.Items[i])
		}
	}
	reqs := f.requests()
	if len(reqs) != 16 {
		t.Fatalf("upstream got %d requests, want 16", len(reqs))
	}
	// Turn N of the conversation carries the initial item and the 2(N-1)
	// messages before it, plus its own; no metadata marker as system.
	for i := range 10 {
		got := messagesBrief(reqs[i])
		if len(got) != 2*i+2 || got[0] != "user:My ticket is SE-10423." || got[len(got)-1] != fmt.Sprintf("user:turn %d", i+1) {
			t.Errorf("upstream request %d carried %q", i+1, got)
		}
		if sys, ok := reqs[i]["system"]; ok {
			t.Errorf("upstream request %d carried a system prompt (the metadata marker?): %v", i+1, sys)
		}
	}
	if stream, _ := reqs[10]["stream"].(bool); !stream {
		t.Errorf("the streamed turn went up unstreamed")
	}
	tools, _ := reqs[11]["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != "get_weather" || tools[0].(map[string]any)["input_schema"] == nil {
		t.Errorf("the tools went up as %v", reqs[11]["tools"])
	}
	got := messagesBrief(reqs[12])
	if n := len(got); n < 2 || got[n-2] != `assistant:->call_weather:get_weather({"city":"Paris"})` || got[n-1] != `tool[call_weather]:{"temp_c":21}` {
		t.Errorf("the tool round trip sent %q", got)
	}
	for i := range 3 {
		if got := messagesBrief(reqs[13+i]); len(got) != 2*i+1 || got[len(got)-1] != fmt.Sprintf("user:chain %d", i+1) {
			t.Errorf("chain request %d carried %q", i+1, got)
		}
	}
}

// TestResponsesAgentsSessionMatrixAnthropic runs
// testdata/node/agents-session.mjs (an OpenAI Agents SDK agent with a
// function tool, ten turns on an OpenAIConversationsSession kept by
// chatmem) in front of Anthropic's Messages API: the session's items are
// what chatmem stores, item by item.
func TestResponsesAgentsSessionMatrixAnthropic(t *testing.T) {
	env, f := newMessagesMatrixEnv(t)
	lines := runNodeScript(t, env, "agents-session.mjs", filepath.Join("@openai", "agents"))
	wantAgentsSessionStore(t, env, lines)
	// The tool's call and result went up as tool_use and tool_result.
	round := false
	for _, r := range f.requests() {
		got := messagesBrief(r)
		if n := len(got); n >= 2 && got[n-2] == `assistant:->call_weather:get_weather({"city":"Paris"})` && strings.HasPrefix(got[n-1], "tool[call_weather]:") {
			round = true
		}
	}
	if !round {
		t.Errorf("no upstream request carried the tool round trip")
	}
}

// TestResponsesAISDKMatrixResponses runs testdata/node/ai-sdk-responses.mjs
// (the Vercel AI SDK's Responses model, five turns chained by
// previousResponseId, one streamed) in front of the Responses API.
func TestResponsesAISDKMatrixResponses(t *testing.T) {
	env, f := newResponsesUpstreamNodeEnv(t)
	lines := runNodeScript(t, env, "ai-sdk-responses.mjs", filepath.Join("@ai-sdk", "openai"))
	wantAISDKStore(t, env, lines)
	reqs := f.Requests()
	if len(reqs) != 5 {
		t.Fatalf("the upstream got %d requests, want 5", len(reqs))
	}
	for i, r := range reqs {
		if got := inputBrief(t, r); len(got) != 2*i+1 || got[len(got)-1] != fmt.Sprintf("user:turn %d: tell me more", i+1) {
			t.Errorf("upstream request %d carried %q", i+1, got)
		}
	}
	if stream, _ := reqs[3]["stream"].(bool); !stream {
		t.Errorf("the streamed turn went up unstreamed")
	}
}

// TestResponsesAISDKMatrixAnthropic runs testdata/node/ai-sdk-responses.mjs
// in front of Anthropic's Messages API.
func TestResponsesAISDKMatrixAnthropic(t *testing.T) {
	env, f := newMessagesMatrixEnv(t)
	lines := runNodeScript(t, env, "ai-sdk-responses.mjs", filepath.Join("@ai-sdk", "openai"))
	wantAISDKStore(t, env, lines)
	reqs := f.requests()
	if len(reqs) != 5 {
		t.Fatalf("the upstream got %d requests, want 5", len(reqs))
	}
	for i, r := range reqs {
		if got := messagesBrief(r); len(got) != 2*i+1 || got[len(got)-1] != fmt.Sprintf("user:turn %d: tell me more", i+1) {
			t.Errorf("upstream request %d carried %q", i+1, got)
		}
	}
	if stream, _ := reqs[3]["stream"].(bool); !stream {
		t.Errorf("the streamed turn went up unstreamed")
	}
}
