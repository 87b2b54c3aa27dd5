package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/chatmem/chatmem/internal/responsesfake"
	chatopenai "github.com/chatmem/chatmem/openai"
)

// newResponsesUpstreamEnv is a proxy whose upstream is the OpenAI
// Responses API (the fake), reached through the real transport, as
// --upstream-kind openai-responses wires it.
func newResponsesUpstreamEnv(t *testing.T, answer func(n int, req map[string]any) responsesfake.Answer) (*proxyEnv, *responsesfake.Server) {
	t.Helper()
	f := responsesfake.New(t, answer)
	tr, err := chatopenai.NewResponsesTransport(chatopenai.TransportOptions{BaseURL: f.BaseURL(), APIKey: f.Key, Model: "gpt-default"})
	if err != nil {
		t.Fatal(err)
	}
	return newProxyEnv(t, proxyConfig{baseURL: f.BaseURL(), upClient: &http.Client{Transport: tr}}), f
}

// inputBrief renders a Responses request's input items as brief renders
// messages: "role:text", "assistant:->call_id:name(args)",
// "tool[call_id]:output".
func inputBrief(t *testing.T, body map[string]any) []string {
	t.Helper()
	if body["store"] != false {
		t.Errorf("store = %v, want false", body["store"])
	}
	items, _ := body["input"].([]any)
	var out []string
	for _, raw := range items {
		it := raw.(map[string]any)
		switch it["type"] {
		case "message":
			text, ok := it["content"].(string)
			if !ok {
				b, _ := json.Marshal(it["content"])
				text = string(b)
			}
			out = append(out, fmt.Sprint(it["role"], ":", text))
		case "function_call":
			out = append(out, fmt.Sprint("assistant:->", it["call_id"], ":", it["name"], "(", it["arguments"], ")"))
		case "function_call_output":
			out = append(out, fmt.Sprint("tool[", it["call_id"], "]:", it["output"]))
		default:
			out = append(out, fmt.Sprint(it["type"]))
		}
	}
	return out
}

// TestProxyResponsesUpstream: the chat proxy in front of the Responses
// API: a plain turn, a function call round trip and a streamed turn are
// stored as the client sent and the model produced them, each window is
// sent as input items with store false, and usage comes back with its
// cached and reasoning tokens.
func TestProxyResponsesUpstream(t *testing.T) {
	env, f := newResponsesUpstreamEnv(t, func(n int, _ map[string]any) responsesfake.Answer {
		u := responsesfake.Usage{Input: 40 * n, Cached: 32, Output: 9, Reasoning: 4}
		switch n {
		case 2:
			return responsesfake.Answer{Reasoning: true, Calls: []responsesfake.Call{{CallID: "call_t1", Name: "weather", Arguments: `{"city":"Oslo"}`}}, Usage: u}
		case 3:
			return responsesfake.Answer{Text: "3 degrees in Oslo.", Usage: u}
		}
		return responsesfake.Answer{Text: fmt.Sprintf("Answer %d", n), Usage: u}
	})
	ctx := context.Background()
	client := env.client("resp-up-1")

	p := userTurn("Hello")
	p.Messages = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief.")}, p.Messages...)
	c, err := client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Answer 1" || c.Usage.PromptTokensDetails.CachedTokens != 32 || c.Usage.CompletionTokensDetails.ReasoningTokens != 4 {
		t.Errorf("turn 1: %q, usage %+v", c.Choices[0].Message.Content, c.Usage)
	}
	body, _ := f.Last()
	wantBrief(t, "turn 1 input", inputBrief(t, body), []string{"system:Be brief.", "user:Hello"})

	tool := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "weather",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello"),
		openai.AssistantMessage("Answer 1"), openai.UserMessage("Weather in Oslo?")}
	c, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-5", Messages: msgs,
		Tools: []openai.ChatCompletionToolUnionParam{tool}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].FinishReason != "tool_calls" || len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("turn 2: %+v", c.Choices[0])
	}
	msgs = append(msgs, c.Choices[0].Message.ToParam(), openai.ToolMessage("3 degrees", "call_t1"))
	c, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-5", Messages: msgs,
		Tools: []openai.ChatCompletionToolUnionParam{tool}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = f.Last()
	wantBrief(t, "turn 3 input", inputBrief(t, body), []string{"system:Be brief.", "user:Hello", "assistant:Answer 1",
		"user:Weather in Oslo?", `assistant:->call_t1:weather({"city":"Oslo"})`, "tool[call_t1]:3 degrees"})

	msgs = append(msgs, c.Choices[0].Message.ToParam(), openai.UserMessage("Thanks"))
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-5", Messages: msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "Answer 4" || acc.Usage.PromptTokens != 160 || acc.Usage.PromptTokensDetails.CachedTokens != 32 {
		t.Errorf("streamed turn: %q, usage %+v", got, acc.Usage)
	}

	// System messages are sent, not stored (they are each request's own).
	wantBrief(t, "stored", brief(env.stored(t, "resp-up-1")), []string{"user:Hello", "assistant:Answer 1",
		"user:Weather in Oslo?", `assistant:->call_t1:weather({"city":"Oslo"})`, "tool[call_t1]:3 degrees",
		"assistant:3 degrees in Oslo.", "user:Thanks", "assistant:Answer 4"})
	for i, req := range f.Requests() {
		if req["store"] != false {
			t.Errorf("request %d: store %v", i+1, req["store"])
		}
	}

	// The upstream's request ID comes back; a field the Responses API
	// cannot take is refused and nothing is sent; the user message is kept,
	// as with any upstream error (TestProxyUpstreamErrors).
	status, h, _ := env.post(t, map[string]string{"X-Chatmem-Conversation": "resp-up-2"}, `{"model":"gpt-5","messages":[{"role":"user","content":"Hi"}]}`)
	if status != http.StatusOK || h.Get("X-Upstream-Request-Id") != "req_fake5" {
		t.Errorf("status %d, X-Upstream-Request-Id %q, want req_fake5", status, h.Get("X-Upstream-Request-Id"))
	}
	status, _, b := env.post(t, map[string]string{"X-Chatmem-Conversation": "resp-up-3"}, `{"model":"gpt-5","stop":["END"],"messages":[{"role":"user","content":"Hi"}]}`)
	if status != http.StatusBadRequest || !strings.Contains(string(b), "stop: the OpenAI Responses API has no stop sequences") {
		t.Errorf("stop: %d %s", status, b)
	}
	wantBrief(t, "stored after a refusal", brief(env.stored(t, "resp-up-3")), []string{"user:Hi"})
	if n := len(f.Requests()); n != 5 {
		t.Errorf("%d upstream requests, want 5: the refused one is not sent", n)
	}
}

// TestResponsesEndpointResponsesUpstream: /v1/responses in front of the
// Responses API: a response, streamed or not, and a function call round
// trip by previous_response_id; what went upstream was the window as
// input items with store false, and what is stored is what was sent and
// produced.
func TestResponsesEndpointResponsesUpstream(t *testing.T) {
	env, f := newResponsesUpstreamEnv(t, func(n int, req map[string]any) responsesfake.Answer {
		if n == 2 {
			return responsesfake.Answer{Calls: []responsesfake.Call{{CallID: "call_r1", Name: "lookup", Arguments: `{"q":"tides"}`}},
				Usage: responsesfake.Usage{Input: 20, Cached: 8, Output: 5, Reasoning: 2}}
		}
		return responsesfake.Answer{Text: fmt.Sprintf("upstream answer %d", n), Usage: responsesfake.Usage{Input: 20, Cached: 8, Output: 5, Reasoning: 2}}
	})
	status, b := env.do(t, "POST", "/responses", `{"model":"gpt-5","instructions":"Be brief.","input":"hi"}`)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	var r1 struct {
		ID    string `json:"id"`
		Usage struct {
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r1); err != nil || !strings.Contains(string(b), `"text":"upstream answer 1"`) {
		t.Fatalf("response: %s (%v)", b, err)
	}
	if r1.Usage.InputTokens != 20 || r1.Usage.InputTokensDetails.CachedTokens != 8 || r1.Usage.OutputTokensDetails.ReasoningTokens != 2 {
		t.Errorf("usage %+v", r1.Usage)
	}

	tools := `"tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]`
	status, b = env.do(t, "POST", "/responses", `{"model":"gpt-5","previous_response_id":"`+r1.ID+`","input":"tides?","stream":true,`+tools+`}`)
	if status != http.StatusOK || !strings.Contains(string(b), "event: response.completed") || !strings.Contains(string(b), `"call_id":"call_r1"`) {
		t.Fatalf("streamed call: %d %s", status, b)
	}
	i := strings.LastIndex(string(b), `"response":{"id":"`)
	if i < 0 {
		t.Fatalf("no response id in %s", b)
	}
	r2, _, _ := strings.Cut(string(b[i+len(`"response":{"id":"`):]), `"`)

	status, b = env.do(t, "POST", "/responses", `{"model":"gpt-5","previous_response_id":"`+r2+`",`+tools+`,
		"input":[{"type":"function_call_output","call_id":"call_r1","output":"high at noon"}]}`)
	if status != http.StatusOK || !strings.Contains(string(b), `"text":"upstream answer 3"`) {
		t.Fatalf("after the call: %d %s", status, b)
	}
	var r3 struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &r3)
	body, _ := f.Last()
	got := inputBrief(t, body)
	want := []string{"user:hi", "assistant:upstream answer 1", "user:tides?", `assistant:->call_r1:lookup({"q":"tides"})`, "tool[call_r1]:high at noon"}
	if len(got) < len(want) || !equalTail(got, want) {
		t.Errorf("last input = %q, want it to end with %q", got, want)
	}
	// The first request's instructions went as a system message item.
	wantBrief(t, "first input", inputBrief(t, f.Requests()[0]), []string{"system:Be brief.", "user:hi"})
	for i, req := range f.Requests() {
		if req["store"] != false {
			t.Errorf("request %d: store %v", i+1, req["store"])
		}
	}

	status, b = env.do(t, "GET", "/responses/"+r3.ID+"/input_items?order=asc", "")
	if status != http.StatusOK {
		t.Fatalf("input items: %d %s", status, b)
	}
	for _, s := range []string{`"type":"function_call_output"`, `"call_id":"call_r1"`, `"output":"high at noon"`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("input items lack %s: %s", s, b)
		}
	}
}

func equalTail(got, want []string) bool {
	tail := got[len(got)-len(want):]
	for i := range want {
		if tail[i] != want[i] {
			return false
		}
	}
	return true
}
