package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/openai"
)

// usageUpstream is a fake model server in OpenAI's chat completions wire
// format whose every answer reports usage (cached and reasoning tokens
// included), different for each request: the proxy's upstream, or the
// summarizer's and extractor's model (an extractor's request is the one
// asking for a json_schema answer). It streams when asked, with the usage
// chunk when stream_options.include_usage is set.
type usageUpstream struct {
	*httptest.Server
	mu sync.Mutex
	n  int
	// byKind sums the usage answered, by what asked: chat, summarize,
	// extract.
	byKind map[string]chatmem.Tokens
	calls  map[string]int
}

func newUsageUpstream(t *testing.T) *usageUpstream {
	u := &usageUpstream{byKind: map[string]chatmem.Tokens{}, calls: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *usageUpstream) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model          string          `json:"model"`
		Stream         bool            `json:"stream"`
		ResponseFormat json.RawMessage `json:"response_format"`
		StreamOptions  *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.n++
	n := int64(u.n)
	kind, content := "chat", fmt.Sprintf("answer %d", n)
	switch {
	case len(req.ResponseFormat) > 0:
		kind, content = "extract", `{"facts":[]}`
	case len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, "summar"):
		kind, content = "summarize", "The customer asked about an order."
	}
	tok := chatmem.Tokens{Input: 100 + 13*n, CachedInput: 7 * n, Output: 10 + n, Reasoning: n % 3}
	u.byKind[kind] = u.byKind[kind].Add(tok)
	u.calls[kind]++
	u.mu.Unlock()
	usage := map[string]any{
		"prompt_tokens": tok.Input, "completion_tokens": tok.Output, "total_tokens": tok.Input + tok.Output,
		"prompt_tokens_details":     map[string]any{"cached_tokens": tok.CachedInput},
		"completion_tokens_details": map[string]any{"reasoning_tokens": tok.Reasoning},
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1764460800, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
			"usage":   usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(v map[string]any) {
		v["id"], v["object"], v["created"], v["model"] = fmt.Sprintf("chatcmpl-%d", n), "chat.completion.chunk", 1764460800, req.Model
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": content}, "finish_reason": nil}}})
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		chunk(map[string]any{"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// snapshot returns the usage answered and the calls made, by kind.
func (u *usageUpstream) snapshot() (map[string]chatmem.Tokens, map[string]int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	by, calls := map[string]chatmem.Tokens{}, map[string]int{}
	for k, v := range u.byKind {
		by[k] = v
	}
	for k, v := range u.calls {
		calls[k] = v
	}
	return by, calls
}

// reported reads the usage an OpenAI chat completion (or stream) the
// client got reports.
func reported(t *testing.T, body []byte) chatmem.Tokens {
	t.Helper()
	var u *usage
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("data:")) {
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || d == "[DONE]" {
				continue
			}
			var ch struct {
				Usage *usage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(d), &ch); err == nil && ch.Usage != nil {
				u = ch.Usage
			}
		}
	} else {
		var cc struct {
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal(body, &cc); err != nil {
			t.Fatalf("answer %s: %v", body, err)
		}
		u = cc.Usage
	}
	if u == nil {
		t.Fatalf("the answer reports no usage: %s", body)
	}
	return u.tokens()
}

// proxyCall posts a chat completion to the proxy as key for conversation
// conv (empty: none) and returns what the answer reports as its usage.
func proxyCall(t *testing.T, ts *testServer, key, conv, user, model, text string, stream bool) chatmem.Tokens {
	t.Helper()
	body := map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": text}}}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	b, _ := json.Marshal(body)
	h := map[string]string{}
	if conv != "" {
		h[headerConversation] = conv
	}
	if user != "" {
		h[headerUser] = user
	}
	r := ts.raw(t, http.MethodPost, "/v1/chat/completions", key, h, string(b))
	if r.status != http.StatusOK {
		t.Fatalf("chat completion for %s: %d %s", conv, r.status, r.body)
	}
	return reported(t, r.body)
}

// sumOf adds calls and tokens into m[key].
func sumOf(m map[string]chatmem.UsageCost, key string, tok chatmem.Tokens) {
	c := m[key]
	c.Calls++
	c.Tokens = c.Tokens.Add(tok)
	m[key] = c
}

// TestUsageLedger: GET /v1/usage answers, by tenant, conversation and
// model, the sums of what the fake upstreams reported for the proxy's
// calls (streamed or not, with cached and reasoning tokens), the
// Responses endpoint's and the summarizer's and extractor's, the last two
// counted apart; two servers over one store (two replicas) add to the
// same counts; a tenant sees its own usage only. Run against every store.
func TestUsageLedger(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			up := newUsageUpstream(t)
			models := newUsageUpstream(t)
			store := b.open(t)
			prices := chatmem.Prices{"gpt-4o": {Input: 2.5, CachedInput: 1.25, Output: 10, Reasoning: 10}, "mini": {Input: 0.15, CachedInput: 0.075, Output: 0.6, Reasoning: 0.6}}
			var ledgers []*chatmem.Ledger
			replica := func() *testServer {
				l := chatmem.NewLedger(chatmem.LedgerOptions{Store: chatmem.UsageStoreOf(store), Prices: prices, FlushInterval: time.Hour})
				ledgers = append(ledgers, l)
				opts := openai.Options{BaseURL: models.URL + "/v1", Model: "mini", MaxRetries: -1}
				sum, err := openai.NewSummarizer(opts)
				must(t, "NewSummarizer", err)
				x, err := openai.NewExtractor(openai.ExtractorOptions{Options: opts})
				must(t, "NewExtractor", err)
				mem := newMemory(t, store, func(o *chatmem.Options) {
					o.Ledger, o.Sync = l, true
					o.Summarizer, o.Extractors = sum, []chatmem.Extractor{x}
					o.Summary = chatmem.SummaryOptions{Trigger: 40, Target: 20}
				})
				return newTestServer(t, mem, Options{Upstream: &Upstream{BaseURL: up.URL + "/v1", APIKey: upstreamKey}})
			}
			a, bsrv := replica(), replica()
			byConv, byModel, byTenant := map[string]chatmem.UsageCost{}, map[string]chatmem.UsageCost{}, map[string]chatmem.UsageCost{}
			call := func(ts *testServer, key, tenant, conv, user, model string, stream bool, i int) {
				tok := proxyCall(t, ts, key, conv, user, model, fmt.Sprintf("turn %d of %s: where is my order A-%d? Please check the tracking for me.", i, conv, i), stream)
				sumOf(byConv, tenant+"/"+conv, tok)
				sumOf(byModel, tenant+"/"+model, tok)
				sumOf(byTenant, tenant, tok)
			}
			for i := range 4 {
				ana := "ana"
				if i >= 2 {
					ana = "" // no X-Chatmem-User: counted for the conversation's user
				}
				call(a, acmeKey, "acme", "c1", ana, "gpt-4o", false, i)
				call(bsrv, acmeKey, "acme", "c2", "bob", "mini", true, i)
			}
			call(a, acmeKey, "acme", "", "", "gpt-4o", false, 9) // no conversation: counted for none
			call(bsrv, globexKey, "globex", "g1", "", "gpt-4o", true, 0)

			// The Responses endpoint, for the same ledger.
			r := a.raw(t, http.MethodPost, openAIPrefix+"/responses", acmeKey, nil, `{"model":"gpt-4o","input":"what is my order?","store":false}`)
			if r.status != http.StatusOK {
				t.Fatalf("responses: %d %s", r.status, r.body)
			}
			var resp struct {
				Usage struct {
					InputTokens        int64 `json:"input_tokens"`
					OutputTokens       int64 `json:"output_tokens"`
					InputTokensDetails struct {
						CachedTokens int64 `json:"cached_tokens"`
					} `json:"input_tokens_details"`
					OutputTokensDetails struct {
						ReasoningTokens int64 `json:"reasoning_tokens"`
					} `json:"output_tokens_details"`
				} `json:"usage"`
			}
			must(t, "decode the response", json.Unmarshal(r.body, &resp))
			rtok := chatmem.Tokens{Input: resp.Usage.InputTokens, CachedInput: resp.Usage.InputTokensDetails.CachedTokens,
				Output: resp.Usage.OutputTokens, Reasoning: resp.Usage.OutputTokensDetails.ReasoningTokens}
			sumOf(byTenant, "acme", rtok)
			sumOf(byModel, "acme/gpt-4o", rtok)
			sumOf(byConv, "acme/", rtok)

			// What replica b counted reaches the store at its flush; a's
			// query writes a's own.
			must(t, "flush b", ledgers[1].Flush(t.Context()))

			// The memory's own calls, as the fake model answered them.
			memBy, memCalls := models.snapshot()
			if memCalls["summarize"] == 0 || memCalls["extract"] == 0 {
				t.Fatalf("model calls %v: want the summarizer's and the extractor's", memCalls)
			}
			now := time.Now().UTC()
			from, to := now.Truncate(time.Hour).Add(-time.Hour), now.Truncate(time.Hour).Add(2*time.Hour)
			ctx := t.Context()
			acme := a.client(acmeKey)

			rep, err := acme.Usage(ctx, from, to, chatmem.GroupByTenant)
			must(t, "usage by tenant", err)
			if len(rep.Groups) != 1 || rep.Groups[0].Key != "acme" {
				t.Fatalf("acme's usage by tenant = %+v, want acme's alone", rep.Groups)
			}
			g := rep.Groups[0]
			proxied := g.ByKind[chatmem.CallChat]
			proxied.Calls += g.ByKind[chatmem.CallResponses].Calls
			proxied.Tokens = proxied.Tokens.Add(g.ByKind[chatmem.CallResponses].Tokens)
			if want := byTenant["acme"]; proxied.Calls != want.Calls || proxied.Tokens != want.Tokens {
				t.Errorf("acme's proxied usage = %d calls %+v, want %d calls %+v (the sum of what the upstream reported)", proxied.Calls, proxied.Tokens, want.Calls, want.Tokens)
			}
			if c := g.ByKind[chatmem.CallResponses].Calls; c != 1 {
				t.Errorf("responses calls = %d, want 1", c)
			}
			// The memory's calls, acme's and globex's, counted apart.
			grep, err := bsrv.client(globexKey).Usage(ctx, from, to, chatmem.GroupByTenant)
			must(t, "globex usage by tenant", err)
			for _, k := range []string{"summarize", "extract"} {
				got := g.ByKind[k]
				for _, gg := range grep.Groups {
					got.Calls += gg.ByKind[k].Calls
					got.Tokens = got.Tokens.Add(gg.ByKind[k].Tokens)
				}
				if got.Calls != int64(memCalls[k]) || got.Tokens != memBy[k] {
					t.Errorf("%s usage = %d calls %+v, want %d calls %+v (what the model reported)", k, got.Calls, got.Tokens, memCalls[k], memBy[k])
				}
			}

			rep, err = acme.Usage(ctx, from, to, chatmem.GroupByConversation)
			must(t, "usage by conversation", err)
			for _, g := range rep.Groups {
				want := byConv["acme/"+g.Key]
				got := g.ByKind[chatmem.CallChat]
				got.Calls += g.ByKind[chatmem.CallResponses].Calls
				got.Tokens = got.Tokens.Add(g.ByKind[chatmem.CallResponses].Tokens)
				if got.Calls != want.Calls || got.Tokens != want.Tokens {
					t.Errorf("conversation %q: proxied %d calls %+v, want %d calls %+v", g.Key, got.Calls, got.Tokens, want.Calls, want.Tokens)
				}
			}
			if len(rep.Groups) != 3 {
				t.Errorf("acme's conversations = %d groups, want c1, c2 and none: %+v", len(rep.Groups), rep.Groups)
			}

			rep, err = acme.Usage(ctx, from, to, chatmem.GroupByModel)
			must(t, "usage by model", err)
			wantCost := 0.0
			for _, g := range rep.Groups {
				got := g.ByKind[chatmem.CallChat]
				got.Calls += g.ByKind[chatmem.CallResponses].Calls
				got.Tokens = got.Tokens.Add(g.ByKind[chatmem.CallResponses].Tokens)
				if want := byModel["acme/"+g.Key]; got.Calls != want.Calls || got.Tokens != want.Tokens {
					t.Errorf("model %s: proxied %d calls %+v, want %d calls %+v", g.Key, got.Calls, got.Tokens, want.Calls, want.Tokens)
				}
				wantCost += prices[g.Key].Cost(g.Tokens)
			}
			if math.Abs(rep.Total.Cost-wantCost) > 1e-9 || rep.Total.Cost == 0 || len(rep.Unpriced) != 0 {
				t.Errorf("total cost = %g (unpriced %v), want %g", rep.Total.Cost, rep.Unpriced, wantCost)
			}

			rep, err = acme.Usage(ctx, from, to, chatmem.GroupByUser)
			must(t, "usage by user", err)
			users := map[string]bool{}
			for _, g := range rep.Groups {
				users[g.Key] = true
				if g.Key == "ana" && g.ByKind[chatmem.CallChat].Calls != 4 {
					t.Errorf("ana's chat calls = %d, want all 4 of c1's, with the header or without", g.ByKind[chatmem.CallChat].Calls)
				}
			}
			if !users["ana"] || !users["bob"] {
				t.Errorf("acme's users = %v, want ana and bob", users)
			}

			// globex sees its own, on either replica.
			rep, err = bsrv.client(globexKey).Usage(ctx, from, to, chatmem.GroupByConversation)
			must(t, "globex usage", err)
			if len(rep.Groups) != 1 {
				t.Fatalf("globex's usage = %+v, want g1's alone", rep)
			}
			if chat := rep.Groups[0].ByKind[chatmem.CallChat]; rep.Groups[0].Key != "g1" || chat.Calls != 1 || chat.Tokens != byTenant["globex"].Tokens {
				t.Errorf("globex's usage = %+v, want g1's one chat call %+v", rep, byTenant["globex"].Tokens)
			}

			// Bad input gets a clear error.
			for _, q := range []string{"group_by=kind", "from=yesterday", "from=2026-01-01T00:30:00Z", "from=2026-01-02&to=2026-01-01", "from=2020-01-01&to=2026-01-01"} {
				r := a.raw(t, http.MethodGet, "/v1/usage?"+q, acmeKey, nil, "")
				if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "invalid_request") {
					t.Errorf("GET /v1/usage?%s = %d %s, want 400 invalid_request", q, r.status, r.body)
				}
			}

			// Erasing ana anonymizes her usage: acme's sums stay, nothing
			// names her or her conversation.
			before, err := acme.Usage(ctx, from, to, chatmem.GroupByTenant)
			must(t, "usage before the erasure", err)
			_, err = acme.DeleteUser(ctx, "ana")
			must(t, "delete ana", err)
			after, err := acme.Usage(ctx, from, to, chatmem.GroupByTenant)
			must(t, "usage after the erasure", err)
			if before.Total != after.Total {
				t.Errorf("acme's total after erasing ana = %+v, want %+v as before", after.Total, before.Total)
			}
			for _, g := range []string{chatmem.GroupByUser, chatmem.GroupByConversation} {
				rep, err := acme.Usage(ctx, from, to, g)
				must(t, "usage after the erasure", err)
				for _, gr := range rep.Groups {
					if gr.Key == "ana" || gr.Key == "c1" {
						t.Errorf("usage by %s after erasing ana still has %q", g, gr.Key)
					}
				}
			}

			// The counters on /metrics.
			m := a.raw(t, http.MethodGet, "/metrics", "", nil, "")
			for _, want := range []string{
				`chatmem_usage_tokens_total{call="chat",model="gpt-4o",tenant="acme",token="cached_input"}`,
				`chatmem_usage_calls_total{call="summarize",model="mini",tenant="acme"}`,
				`chatmem_usage_calls_total{call="responses",model="gpt-4o",tenant="acme"}`,
			} {
				if !strings.Contains(string(m.body), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		})
	}
}

// TestSpendLimits: a tenant over its memory spend limit gets no further
// summarizer or extractor calls, and every message it appends is stored;
// once the limit allows, the summary catches up over all of them. A
// tenant over its proxy spend limit gets 429 budget_exhausted in OpenAI's
// shape, and the upstream is not called.
func TestSpendLimits(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			up := newUsageUpstream(t)
			models := newUsageUpstream(t)
			store := b.open(t)
			var memoryLimit atomic.Int64
			memoryLimit.Store(1) // one token: the first call spends it
			limits := func(tenant string) chatmem.TenantLimits {
				switch tenant {
				case "acme":
					return chatmem.TenantLimits{Memory: chatmem.Limit{Tokens: memoryLimit.Load(), Period: chatmem.PeriodDay}}
				case "globex":
					return chatmem.TenantLimits{Proxy: chatmem.Limit{Cost: 0.0001, Period: chatmem.PeriodMonth}}
				}
				return chatmem.TenantLimits{}
			}
			logs := &syncBuffer{}
			l := chatmem.NewLedger(chatmem.LedgerOptions{Store: chatmem.UsageStoreOf(store), Limits: limits,
				Prices: chatmem.Prices{"gpt-4o": {Input: 2.5, Output: 10, CachedInput: 2.5, Reasoning: 10}}, FlushInterval: -1,
				Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			opts := openai.Options{BaseURL: models.URL + "/v1", Model: "mini", MaxRetries: -1}
			sum, err := openai.NewSummarizer(opts)
			must(t, "NewSummarizer", err)
			x, err := openai.NewExtractor(openai.ExtractorOptions{Options: opts})
			must(t, "NewExtractor", err)
			mem := newMemory(t, store, func(o *chatmem.Options) {
				o.Ledger, o.Sync = l, true
				o.Summarizer, o.Extractors = sum, []chatmem.Extractor{x}
				o.Summary = chatmem.SummaryOptions{Trigger: 40, Target: 20}
			})
			ts := newTestServer(t, mem, Options{Upstream: &Upstream{BaseURL: up.URL + "/v1", APIKey: upstreamKey}})
			acme := ts.client(acmeKey)
			ctx := t.Context()

			appendTurn := func(i int) {
				t.Helper()
				_, err := acme.Append(ctx, "c1", []chatmem.Message{
					{Role: chatmem.RoleUser, Content: fmt.Sprintf("message %d: my order A-%d has not arrived, could you look into the tracking?", i, i)},
					{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("reply %d: I am checking the tracking of A-%d for you now.", i, i)},
				}, client.AppendOptions{})
				must(t, fmt.Sprintf("append %d", i), err)
			}
			appendTurn(0) // the extractor's call spends the limit
			_, before := models.snapshot()
			if before["extract"] == 0 {
				t.Fatalf("model calls after the first turn = %v, want the extractor's", before)
			}
			for i := 1; i <= 6; i++ {
				appendTurn(i)
			}
			_, after := models.snapshot()
			if after["extract"] != before["extract"] || after["summarize"] != before["summarize"] {
				t.Errorf("model calls over the limit: %v, then %v; want none more", before, after)
			}
			page, err := acme.Messages(ctx, "c1", 0, 1000)
			must(t, "messages", err)
			if len(page.Messages) != 14 {
				t.Errorf("stored %d messages, want all 14", len(page.Messages))
			}
			if mem.Held() != 1 {
				t.Errorf("Held() = %d, want c1's work held", mem.Held())
			}
			if !strings.Contains(logs.String(), "over its memory spend limit") {
				t.Errorf("the log does not say acme is over its memory limit:\n%s", logs)
			}
			m := ts.raw(t, http.MethodGet, "/metrics", "", nil, "")
			if !strings.Contains(string(m.body), `chatmem_usage_limit_refused_total{limit="memory",tenant="acme"}`) {
				t.Errorf("/metrics does not count the refusals")
			}

			// The limit allows again: the next append does the held work,
			// and the summary covers the messages appended over it.
			memoryLimit.Store(1 << 40)
			appendTurn(7)
			_, resumed := models.snapshot()
			if resumed["summarize"] <= after["summarize"] {
				t.Errorf("summarizer calls after the limit allows = %d, want more than %d", resumed["summarize"], after["summarize"])
			}
			s, err := acme.Summary(ctx, "c1")
			must(t, "summary", err)
			if s.CoversSeq < 14 {
				t.Errorf("summary covers up to seq %d, want the messages appended over the limit (through 14)", s.CoversSeq)
			}

			// globex: the first proxied call spends the proxy limit, the
			// second is refused before the upstream.
			hello := `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`
			idem := map[string]string{headerConversation: "g1", "Idempotency-Key": "hello-1"}
			if r := ts.raw(t, http.MethodPost, "/v1/chat/completions", globexKey, idem, hello); r.status != http.StatusOK {
				t.Fatalf("first proxied call: %d %s", r.status, r.body)
			}
			_, calls := up.snapshot()
			// A retry of a stored turn is a replay, which costs nothing: it
			// is answered over the limit.
			if r := ts.raw(t, http.MethodPost, "/v1/chat/completions", globexKey, idem, hello); r.status != http.StatusOK {
				t.Errorf("replay over the proxy limit: %d %s, want 200", r.status, r.body)
			}
			r := ts.raw(t, http.MethodPost, "/v1/chat/completions", globexKey, map[string]string{headerConversation: "g1"}, `{"model":"gpt-4o","messages":[{"role":"user","content":"again"}]}`)
			var e openAIErrorBody
			_ = json.Unmarshal(r.body, &e)
			if r.status != http.StatusTooManyRequests || e.Error.Code != "budget_exhausted" || e.Error.Type != "insufficient_quota" {
				t.Errorf("over the proxy limit: %d %s, want 429 budget_exhausted of type insufficient_quota", r.status, r.body)
			}
			if _, now := up.snapshot(); now["chat"] != calls["chat"] {
				t.Errorf("the upstream was called over the limit")
			}
			rr := ts.raw(t, http.MethodPost, openAIPrefix+"/responses", globexKey, nil, `{"model":"gpt-4o","input":"again","store":false}`)
			if rr.status != http.StatusTooManyRequests || !strings.Contains(string(rr.body), "budget_exhausted") {
				t.Errorf("responses over the proxy limit: %d %s, want 429 budget_exhausted", rr.status, rr.body)
			}
			// acme has no proxy limit.
			proxyCall(t, ts, acmeKey, "c9", "", "gpt-4o", "hello", false)
		})
	}
}
