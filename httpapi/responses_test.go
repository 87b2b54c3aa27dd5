package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
)

// newResponsesEnv is a server in front of the fake Chat Completions
// upstream, which calls get_weather when the newest message asks for the
// weather in Paris, and answers "answer N" otherwise.
func newResponsesEnv(t testing.TB) *proxyEnv {
	t.Helper()
	var envp atomic.Pointer[proxyEnv]
	wrap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []struct {
				Content *string `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(raw, &body)
		if n := len(body.Messages); n > 0 && body.Messages[n-1].Content != nil && *body.Messages[n-1].Content == "weather in Paris?" {
			envp.Load().up.push(fakeReply{toolCalls: []chatmem.ToolCall{{ID: "call_weather", Type: "function", Function: chatmem.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}})
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		envp.Load().up.serve(w, r)
	}))
	t.Cleanup(wrap.Close)
	env := newProxyEnv(t, proxyConfig{baseURL: wrap.URL + "/v1"})
	envp.Store(env)
	return env
}

// do sends a request to the OpenAI-compatible APIs as acme.
func (e *proxyEnv) do(t testing.TB, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, e.url+openAIPrefix+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+proxyKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestResponsesNodeClient runs testdata/node/responses-client.mjs, the
// official `openai` npm client, against the Conversations and Responses
// APIs in front of the fake Chat Completions upstream, and checks that what
// the client read back is what the store holds, item by item.
func TestResponsesNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipOrFail(t, "Node.js is not installed: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.SkipOrFail(t, "the openai npm package is not installed (run npm ci --prefix testdata/node): %v", err)
	}
	env := newResponsesEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "responses-client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHATMEM_OPENAI_URL="+env.url+openAIPrefix, "CHATMEM_API_KEY="+proxyKey)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node responses-client.mjs: %v\n%s%s\nserver log:\n%s", err, out, stderr, env.log)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("node client: %s", lines[0])
	var res struct {
		Conversation string            `json:"conversation"`
		Items        []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}

	// The store holds those items, as messages: the metadata markers (one
	// at creation, one per update), then one message per item but for the
	// function call, which is an assistant message's tool call.
	stored := env.stored(t, res.Conversation)
	var visible []chatmem.Message
	for _, m := range stored {
		if !hidden(m) {
			visible = append(visible, m)
		}
	}
	if len(stored)-len(visible) != 2 {
		t.Errorf("stored %d metadata markers, want 2", len(stored)-len(visible))
	}
	var items []item
	for _, m := range visible {
		items = append(items, messageItems(m)...)
	}
	if len(items) != len(res.Items) {
		t.Fatalf("the store holds %d items, the client read %d", len(items), len(res.Items))
	}
	for i, it := range items {
		if !jsonEqual(t, it.raw, res.Items[i]) {
			t.Errorf("item %d: stored %s, client read %s", i, it.raw, res.Items[i])
		}
	}
	if m := visible[0]; m.Role != chatmem.RoleUser || m.Content != "My ticket is SE-10423." {
		t.Errorf("first message = %+v", m)
	}

	// The upstream saw the memory grow: turn N of the conversation carries
	// the initial item and the 2(N-1) messages before it, plus its own.
	reqs := env.up.requests()
	if len(reqs) != 16 {
		t.Fatalf("upstream got %d requests, want 16", len(reqs))
	}
	for i := range 10 {
		msgs := reqs[i].messages(t)
		if len(msgs) != 2*i+2 {
			t.Errorf("upstream request %d carried %d messages, want %d", i+1, len(msgs), 2*i+2)
		}
		for _, m := range msgs {
			if m["role"] == "system" {
				t.Errorf("upstream request %d carried a system message (the metadata marker?): %v", i+1, m)
			}
		}
	}
	// The tool's result went up after the call, as chat messages.
	msgs := reqs[12].messages(t)
	if last := msgs[len(msgs)-1]; last["role"] != "tool" || last["tool_call_id"] != "call_weather" {
		t.Errorf("the tool round trip sent %v last", last)
	}
	if _, ok := reqs[11].body["tools"]; !ok {
		t.Errorf("the tools did not go upstream: %s", reqs[11].raw)
	}
	// The chain: each response carries the ones before it.
	for i := range 3 {
		if n := len(reqs[13+i].messages(t)); n != 2*i+1 {
			t.Errorf("chain request %d carried %d messages, want %d", i+1, n, 2*i+1)
		}
	}
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
