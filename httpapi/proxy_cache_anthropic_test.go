package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
)

// TestProxyCacheStableAnthropic: a 30-turn conversation under cache-stable
// recall, proxied to a fake Anthropic Messages API through the Anthropic
// transport. Every request carries at most four cache_control breakpoints:
// the system prompt, the last block and, once recall puts turns between
// the stable part and the newest turn, the end of the stable part; while
// the window's start stays, the prompt up to that breakpoint repeats at
// the front of the next request. The cache reads the fake reports reach
// chatmem_proxy_cached_prompt_tokens_total.
func TestProxyCacheStableAnthropic(t *testing.T) {
	var mu sync.Mutex
	var reqs []string // the messages of each request, as JSON
	reads := 0
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages json.RawMessage `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		reqs = append(reqs, string(req.Messages))
		read := 100 + len(reqs)
		reads += read
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Your parcel %d left the Pune warehouse."}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_read_input_tokens":%d,"cache_creation_input_tokens":3,"output_tokens":9}}`, read, read)
	}))
	t.Cleanup(fake.Close)
	tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: fake.URL, APIKey: "sk-ant-test", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	env := newProxyEnv(t, proxyConfig{baseURL: fake.URL, upClient: &http.Client{Transport: tr},
		policy: chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 400, Cache: chatmem.CacheStable}})
	topics := []string{"parcel to Pune", "refund for the blue shirt", "invoice address", "courier delayed in Chennai", "return label"}
	for i := range 30 {
		body := fmt.Sprintf(`{"model":"claude-test","messages":[{"role":"system","content":"You are ShopBot."},{"role":"user","content":"question %d about my %s: where is it now?"}]}`, i, topics[i%len(topics)])
		status, _, b := env.post(t, map[string]string{"X-Chatmem-Conversation": "stable-anthropic"}, body)
		if status != http.StatusOK {
			t.Fatalf("turn %d: status %d: %s", i, status, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	third, repeated := 0, 0
	for i, r := range reqs {
		n := strings.Count(r, "cache_control")
		if n > 3 { // the system prompt's is outside the messages
			t.Fatalf("request %d: %d breakpoints in the messages, want at most 3 (4 with the system prompt): %s", i, n, r)
		}
		if n < 2 {
			continue
		}
		third++
		// The prompt up to the stable part's breakpoint, and whether the
		// next request starts with it.
		cut := strings.Index(r, `,"cache_control"`)
		prefix := r[:cut]
		if i+1 < len(reqs) && strings.HasPrefix(reqs[i+1], prefix) {
			repeated++
		}
	}
	t.Logf("%d of %d requests had a stable-part breakpoint, %d of them repeated at the next request's front", third, len(reqs), repeated)
	if third < 10 || repeated < third/2 {
		t.Errorf("%d of %d requests had a stable-part breakpoint, %d of them repeated at the next request's front; want at least 10, and half", third, len(reqs), repeated)
	}
	rec := httptest.NewRecorder()
	env.api.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	line := grepLines(rec.Body.String(), "chatmem_proxy_cached_prompt_tokens_total{")
	if !strings.Contains(line, `model="claude-test"`) || !strings.HasSuffix(strings.TrimSpace(line), fmt.Sprintf(" %d", reads)) {
		t.Errorf("cached tokens metric %q, want the fake's %d cache reads", line, reads)
	}
}
