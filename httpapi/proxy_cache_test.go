package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/chatmem/chatmem"
)

// TestProxyCacheStable: with the server's default cache mode stable (or
// X-Chatmem-Cache: stable), the proxy sends the upstream a cache-stable
// window, whose front repeats the previous request's over most turns, and
// a prompt_cache_key per conversation that names neither tenant nor
// conversation; the client's own key is kept; X-Chatmem-Cache: off and the
// plain default send none; a bad mode is a 400.
func TestProxyCacheStable(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{policy: chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 200, Cache: chatmem.CacheStable}})
	ctx := t.Context()
	client := env.client("c1")
	var prev []string
	repeats, turns := 0, 0
	key := ""
	for i := range 30 {
		_, err := client.Chat.Completions.New(ctx, userTurn(fmt.Sprintf("question %d: %s", i, strings.Repeat("where is it? ", 1+i%4))))
		pmust(t, fmt.Sprintf("turn %d", i), err)
		req := env.up.last(t)
		var k string
		if err := json.Unmarshal(req.body["prompt_cache_key"], &k); err != nil || !strings.HasPrefix(k, "chatmem-") || strings.Contains(k, "c1") || strings.Contains(k, "acme") {
			t.Fatalf("turn %d: prompt_cache_key %s (%v), want chatmem-<hash>", i, req.body["prompt_cache_key"], err)
		}
		if key != "" && k != key {
			t.Fatalf("turn %d: prompt_cache_key %s, want the conversation's %s", i, k, key)
		}
		key = k
		msgs := brief(req.messages(t))
		if prev != nil && len(msgs) > 0 && msgs[0] == prev[0] {
			turns++
			if len(msgs) > len(prev) && slices.Equal(msgs[:len(prev)], prev) {
				repeats++
			}
		}
		prev = msgs
	}
	// The reply is appended after each request, so a request repeats the
	// previous one (and its reply) at its front until the window moves.
	t.Logf("%d of 29 requests began with the previous request's messages", repeats)
	if repeats < 22 {
		t.Errorf("%d of 29 requests began with the previous request's messages, want at least 22 (a sliding window gets about 14; %d kept the first message)", repeats, turns)
	}

	other := env.client("c2")
	_, err := other.Chat.Completions.New(ctx, userTurn("hello"))
	pmust(t, "c2", err)
	if k := string(env.up.last(t).body["prompt_cache_key"]); k == "" || k == `"`+key+`"` {
		t.Errorf("c2's prompt_cache_key %s, want its own", k)
	}
	_, err = other.Chat.Completions.New(ctx, userTurn("mine"), option.WithJSONSet("prompt_cache_key", "client-key"))
	pmust(t, "client key", err)
	if k := string(env.up.last(t).body["prompt_cache_key"]); k != `"client-key"` {
		t.Errorf("a client's own prompt_cache_key became %s", k)
	}
	_, err = env.client("c2", option.WithHeader("X-Chatmem-Cache", "off")).Chat.Completions.New(ctx, userTurn("no cache"))
	pmust(t, "cache off", err)
	if k, ok := env.up.last(t).body["prompt_cache_key"]; ok {
		t.Errorf("X-Chatmem-Cache: off sent prompt_cache_key %s", k)
	}
	_, err = env.client("c2", option.WithHeader("X-Chatmem-Cache", "sticky")).Chat.Completions.New(ctx, userTurn("x"))
	wantOpenAIError(t, "X-Chatmem-Cache: sticky", err, 400, "invalid_request", "invalid_request_error")

	// The server's default mode applies to recall too, not to last_turns,
	// which has none.
	_, err = env.client("c1", option.WithHeader("X-Chatmem-Policy", "recall")).Chat.Completions.New(ctx, userTurn("where is it? recall"))
	pmust(t, "recall", err)
	if k := string(env.up.last(t).body["prompt_cache_key"]); k != `"`+key+`"` {
		t.Errorf("recall under the stable default: prompt_cache_key %s, want %s", k, key)
	}
	_, err = env.client("c1", option.WithHeader("X-Chatmem-Policy", "last_turns"), option.WithHeader("X-Chatmem-Turns", "2")).Chat.Completions.New(ctx, userTurn("last turns"))
	pmust(t, "last_turns", err)
	if k, ok := env.up.last(t).body["prompt_cache_key"]; ok {
		t.Errorf("last_turns under the stable default sent prompt_cache_key %s", k)
	}

	plain := newProxyEnv(t, proxyConfig{policy: chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 200}})
	_, err = plain.client("c1").Chat.Completions.New(ctx, userTurn("hello"))
	pmust(t, "plain", err)
	if k, ok := plain.up.last(t).body["prompt_cache_key"]; ok {
		t.Errorf("the plain default sent prompt_cache_key %s", k)
	}
	_, err = plain.client("c1", option.WithHeader("X-Chatmem-Cache", "stable")).Chat.Completions.New(ctx, userTurn("hello again"))
	pmust(t, "header stable", err)
	if _, ok := plain.up.last(t).body["prompt_cache_key"]; !ok {
		t.Errorf("X-Chatmem-Cache: stable sent no prompt_cache_key")
	}
}
