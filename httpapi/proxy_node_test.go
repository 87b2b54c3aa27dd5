package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
)

// TestProxyNodeClient runs testdata/node/openai-client.mjs, the official
// `openai` npm client, against the proxy (which points at the fake OpenAI
// upstream): three turns, one streamed. .ci/run installs the package with
// `npm ci --prefix testdata/node`; without Node.js or the package the test
// skips, or fails under CI=true.
func TestProxyNodeClient(t *testing.T) {
	node, dir := nodeClient(t)
	env := newProxyEnv(t, proxyConfig{})
	out := runNode(t, node, dir, "openai-client.mjs", "CHATMEM_PROXY_URL="+env.url+"/v1", "CHATMEM_API_KEY="+proxyKey, "CHATMEM_CONVERSATION=node-1")
	t.Logf("node client:\n%s", out)

	// The upstream saw the memory grow: each turn carries the earlier ones.
	reqs := env.up.requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if n := len(r.messages(t)); n != 2*i+1 {
			t.Errorf("upstream request %d carried %d messages, want %d", i+1, n, 2*i+1)
		}
	}
	stored := env.stored(t, "node-1")
	if len(stored) != 6 || !strings.Contains(stored[0].Content, "SE-10423") {
		t.Errorf("stored %d messages (%v), want the 3 turns with their replies", len(stored), brief(stored))
	}
}

// TestProxyNodeHistory runs testdata/node/openai-history.mjs: the `openai`
// npm client keeps a chat of 20 turns, one with a tool call round trip and
// some streamed, and sends the full history with every request, then (in
// another conversation) only its newest 6 messages; the conversation is
// named in the body's metadata. The stored conversation must be the
// client's history, message by message, each once and in order; an edit
// of an earlier message is refused with history_diverged.
func TestProxyNodeHistory(t *testing.T) {
	node, dir := nodeClient(t)
	for _, trim := range []int{0, 6} {
		t.Run(fmt.Sprintf("trim %d", trim), func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{})
			for i := 1; i <= 4; i++ {
				env.up.push(fakeReply{content: fmt.Sprintf("answer %d", i)})
			}
			env.up.push(fakeReply{toolCalls: []chatmem.ToolCall{{ID: "call_track_1", Type: "function", Function: chatmem.FunctionCall{Name: "track_order", Arguments: `{"id":"SE-10423"}`}}}})
			conv := fmt.Sprintf("node-history-%d", trim)
			out := runNode(t, node, dir, "openai-history.mjs", "CHATMEM_PROXY_URL="+env.url+"/v1", "CHATMEM_API_KEY="+proxyKey,
				"CHATMEM_CONVERSATION="+conv, "CHATMEM_TRIM="+strconv.Itoa(trim))
			_, line, ok := strings.Cut(out, "\nhistory: ")
			if !ok {
				t.Fatalf("no history line in the output:\n%s", out)
			}
			var history []map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &history); err != nil {
				t.Fatalf("history: %v", err)
			}
			if len(history) != 42 {
				t.Errorf("the client holds %d messages, want 20 turns, their replies and a tool round trip: 42", len(history))
			}
			wantBrief(t, "stored", brief(env.stored(t, conv)), brief(history))
			// The upstream got the whole conversation each time (the
			// budget holds it), after the request's system prompt.
			for i, r := range env.up.requests() {
				if got := len(r.messages(t)); i < 5 && got != 2*i+2 {
					t.Errorf("upstream request %d carried %d messages, want %d", i+1, got, 2*i+2)
				}
			}
		})
	}
}

// nodeClient returns Node.js and testdata/node, with its packages
// installed, or skips (fails under CI=true).
func nodeClient(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipOrFail(t, "Node.js is not installed: %v", err)
	}
	dir, err = filepath.Abs(filepath.Join("..", "testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.SkipOrFail(t, "the openai npm package is not installed (run npm ci --prefix testdata/node): %v", err)
	}
	return node, dir
}

// runNode runs script in dir with env added, and returns its output.
func runNode(t *testing.T, node, dir, script string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	return string(out)
}

// TestProxyNodeSDKs runs the Vercel AI SDK (testdata/node/ai-sdk-history.mjs:
// generateText and streamText over a growing messages array) and
// LangChain.js (langchain-history.mjs: ChatOpenAI invoked with the full
// message list) for 20 turns each, a tool call round trip included. Each
// sends the full history; the stored conversation must be what the
// client's last request held, and the reply to it, message by message.
func TestProxyNodeSDKs(t *testing.T) {
	node, dir := nodeClient(t)
	for _, script := range []string{"ai-sdk-history.mjs", "langchain-history.mjs"} {
		t.Run(script, func(t *testing.T) {
			pkg := map[string]string{"ai-sdk-history.mjs": "@ai-sdk/openai", "langchain-history.mjs": "@langchain/openai"}[script]
			if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
				testenv.SkipOrFail(t, "%s is not installed (run npm ci --prefix testdata/node): %v", pkg, err)
			}
			env := newProxyEnv(t, proxyConfig{})
			for i := 1; i <= 4; i++ {
				env.up.push(fakeReply{content: fmt.Sprintf("answer %d", i)})
			}
			env.up.push(fakeReply{toolCalls: []chatmem.ToolCall{{ID: "call_track_1", Type: "function", Function: chatmem.FunctionCall{Name: "track_order", Arguments: `{"id":"SE-10423"}`}}}})
			// The client's requests, as the proxy got them.
			var mu sync.Mutex
			var last []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == chatCompletionsPattern {
					b, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(b))
					mu.Lock()
					last = b
					mu.Unlock()
				}
				env.api.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			conv := strings.TrimSuffix(script, ".mjs")
			out := runNode(t, node, dir, script, "CHATMEM_PROXY_URL="+srv.URL+"/v1", "CHATMEM_API_KEY="+proxyKey, "CHATMEM_CONVERSATION="+conv)
			t.Logf("%s", out)

			var req struct {
				Messages []map[string]any `json:"messages"`
			}
			mu.Lock()
			err := json.Unmarshal(last, &req)
			mu.Unlock()
			if err != nil {
				t.Fatalf("the last request: %v", err)
			}
			var want []string
			for _, m := range brief(req.Messages) {
				if !strings.HasPrefix(m, "system:") {
					want = append(want, m)
				}
			}
			want = append(want, fmt.Sprintf("assistant:answer %d", len(env.up.requests())))
			if len(want) != 42 {
				t.Errorf("the client's history is %d messages, want 20 turns, their replies and a tool round trip: 42", len(want))
			}
			wantBrief(t, "stored", brief(env.stored(t, conv)), want)
		})
	}
}
