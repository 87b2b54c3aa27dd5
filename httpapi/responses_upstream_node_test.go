package httpapi

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmem/chatmem/internal/responsesfake"
)

// newResponsesUpstreamNodeEnv is newResponsesEnv's upstream as the OpenAI
// Responses API behind the real transport (--upstream-kind
// openai-responses): it calls get_weather when the newest input item asks
// for the weather in Paris, and answers "answer N" to its Nth request
// otherwise, with the usage the scripts expect (42 in, 7 out).
func newResponsesUpstreamNodeEnv(t *testing.T) (*proxyEnv, *responsesfake.Server) {
	t.Helper()
	return newResponsesUpstreamEnv(t, func(n int, req map[string]any) responsesfake.Answer {
		items, _ := req["input"].([]any)
		if len(items) > 0 {
			last, _ := items[len(items)-1].(map[string]any)
			if last["type"] == "message" && last["role"] == "user" && last["content"] == "weather in Paris?" {
				return responsesfake.Answer{Calls: []responsesfake.Call{{CallID: "call_weather", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
			}
		}
		return responsesfake.Answer{Text: fmt.Sprintf("answer %d", n), Usage: responsesfake.Usage{Input: 42, Cached: 5, Output: 7, Reasoning: 1}}
	})
}

// wantStoreFalse fails for an upstream request without store false.
func wantStoreFalse(t *testing.T, f *responsesfake.Server) {
	t.Helper()
	for i, req := range f.Requests() {
		if req["store"] != false {
			t.Errorf("upstream request %d: store %v, want false", i+1, req["store"])
		}
	}
}

// TestResponsesNodeClientResponsesUpstream runs
// testdata/node/responses-client.mjs (the `openai` npm client: ten turns
// on a conversation, streaming, a function tool round trip, a
// previous_response_id chain) against a Responses upstream: what the
// client read back is what the store holds, item by item.
func TestResponsesNodeClientResponsesUpstream(t *testing.T) {
	env, f := newResponsesUpstreamNodeEnv(t)
	lines := runNodeScript(t, env, "responses-client.mjs", "openai")
	var res struct {
		Conversation string            `json:"conversation"`
		Items        []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("client output: %v\n%q", err, lines)
	}
	var items []item
	for _, m := range env.stored(t, res.Conversation) {
		if !hidden(m) {
			items = append(items, messageItems(m)...)
		}
	}
	if len(items) != len(res.Items) {
		t.Fatalf("the store holds %d items, the client read %d", len(items), len(res.Items))
	}
	for i, it := range items {
		if !jsonEqual(t, it.raw, res.Items[i]) {
			t.Errorf("item %d: stored %s, client read %s", i, it.raw, res.Items[i])
		}
	}
	reqs := f.Requests()
	if len(reqs) != 16 {
		t.Fatalf("upstream got %d requests, want 16", len(reqs))
	}
	// The tool's result went up after the call, as Responses items.
	got := inputBrief(t, reqs[12])
	if n := len(got); n < 2 || got[n-2] != `assistant:->call_weather:get_weather({"city":"Paris"})` || got[n-1][:len("tool[call_weather]:")] != "tool[call_weather]:" {
		t.Errorf("the tool round trip sent %q", got)
	}
	wantStoreFalse(t, f)
}

// TestResponsesAgentsSessionResponsesUpstream runs
// testdata/node/agents-session.mjs (an OpenAI Agents SDK agent with a
// function tool, ten turns on an OpenAIConversationsSession kept by
// chatmem) against a Responses upstream.
func TestResponsesAgentsSessionResponsesUpstream(t *testing.T) {
	env, f := newResponsesUpstreamNodeEnv(t)
	lines := runNodeScript(t, env, "agents-session.mjs", filepath.Join("@openai", "agents"))
	wantAgentsSessionStore(t, env, lines)
	wantStoreFalse(t, f)
}

// TestProxyNodeClientResponsesUpstream runs testdata/node/openai-client.mjs
// (the `openai` npm client, three chat turns, one streamed) against the
// chat proxy in front of a Responses upstream.
func TestProxyNodeClientResponsesUpstream(t *testing.T) {
	node, dir := nodeClient(t)
	env, f := newResponsesUpstreamNodeEnv(t)
	out := runNode(t, node, dir, "openai-client.mjs", "CHATMEM_PROXY_URL="+env.url+"/v1", "CHATMEM_API_KEY="+proxyKey, "CHATMEM_CONVERSATION=node-r1")
	t.Logf("node client:\n%s", out)
	reqs := f.Requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if n := len(inputBrief(t, r)); n != 2*i+1 {
			t.Errorf("upstream request %d carried %d input items, want %d", i+1, n, 2*i+1)
		}
	}
	if stored := env.stored(t, "node-r1"); len(stored) != 6 {
		t.Errorf("stored %d messages (%v), want the 3 turns with their replies", len(stored), brief(stored))
	}
}

// TestProxyNodeHistoryResponsesUpstream runs testdata/node/openai-history.mjs
// (20 turns with the full history each time, a tool call round trip, some
// streamed) against the chat proxy in front of a Responses upstream: the
// stored conversation is the client's history, message by message.
func TestProxyNodeHistoryResponsesUpstream(t *testing.T) {
	node, dir := nodeClient(t)
	env, f := newResponsesUpstreamEnv(t, func(n int, _ map[string]any) responsesfake.Answer {
		if n == 5 {
			return responsesfake.Answer{Calls: []responsesfake.Call{{CallID: "call_track_1", Name: "track_order", Arguments: `{"id":"SE-10423"}`}}}
		}
		return responsesfake.Answer{Text: fmt.Sprintf("answer %d", n), Usage: responsesfake.Usage{Input: 42, Output: 7}}
	})
	out := runNode(t, node, dir, "openai-history.mjs", "CHATMEM_PROXY_URL="+env.url+"/v1", "CHATMEM_API_KEY="+proxyKey,
		"CHATMEM_CONVERSATION=node-history-r", "CHATMEM_TRIM=0")
	_, line, ok := strings.Cut(out, "\nhistory: ")
	if !ok {
		t.Fatalf("no history line in the output:\n%s", out)
	}
	var history []map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &history); err != nil {
		t.Fatalf("history: %v", err)
	}
	if len(history) != 42 {
		t.Errorf("the client holds %d messages, want 42", len(history))
	}
	wantBrief(t, "stored", brief(env.stored(t, "node-history-r")), brief(history))
	wantStoreFalse(t, f)
}
