package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
)

// fakeCountTokens is an httptest server that speaks the wire format of
// Anthropic's POST /v1/messages/count_tokens: a JSON body with model, messages
// (content as a string or an array of text, tool_use and tool_result blocks),
// an optional system (a string or text blocks) and optional tools; the
// x-api-key and anthropic-version headers; {"input_tokens": N} on success and
// {"type":"error","error":{"type":...,"message":...}} with the matching HTTP
// status on failure. It enforces the rules of the real API that the counter's
// scaffolding must respect: roles user and assistant only, non-empty text,
// tool_use blocks answered by tool_result blocks in the next message, tools
// declared for the tool_use blocks, and (like newer models, which refuse
// prefill) a last message from the user.
//
// Its tokenizer is made up but deterministic, so tests can predict counts:
// a request costs 3, a system prompt 2 plus its text, declaring tools 50 plus
// 5 and the name for each, every turn 4 (consecutive messages of one role are
// merged into one turn, as the API does), a text block its words, a tool_use
// block 3 plus its name plus a quarter of its input's JSON bytes (rounded up),
// a tool_result block 2 plus its text.
type fakeCountTokens struct {
	*httptest.Server
	key    string
	models map[string]bool

	mu       sync.Mutex
	requests int
	bodies   []string
	// fail, if set, is asked before each request is served (n counts from 1);
	// a non-zero status makes the server answer with that error.
	fail func(n int) (status int, errType string)
}

func newFakeCountTokens(t *testing.T) *fakeCountTokens {
	t.Helper()
	f := &fakeCountTokens{key: "test-key", models: map[string]bool{"claude-test": true}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeCountTokens) counter(t *testing.T, mod func(*CounterOptions)) *Counter {
	t.Helper()
	opts := CounterOptions{APIKey: f.key, Model: "claude-test", BaseURL: f.URL, MaxRetries: -1}
	if mod != nil {
		mod(&opts)
	}
	a, err := NewCounter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *fakeCountTokens) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func writeCountError(w http.ResponseWriter, status int, errType, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_test")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": errType, "message": msg},
		"request_id": "req_test",
	})
}

type countWireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

type countWireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	System json.RawMessage `json:"system"`
	Tools  []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// blocks decodes content given as a string or as an array of blocks.
func countBlocks(raw json.RawMessage) ([]countWireBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []countWireBlock{{Type: "text", Text: s}}, nil
	}
	var bs []countWireBlock
	err := json.Unmarshal(raw, &bs)
	return bs, err
}

// countValidSchema reports whether raw is a JSON schema object of type object, as
// the API requires of input_schema.
func countValidSchema(raw json.RawMessage) bool {
	var s struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &s) == nil && s.Type == "object"
}

func countWords(s string) int { return len(strings.Fields(s)) }

func (f *fakeCountTokens) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	n := f.requests
	fail := f.fail
	f.mu.Unlock()

	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages/count_tokens" {
		writeCountError(w, http.StatusNotFound, "not_found_error", "Not found")
		return
	}
	if r.Header.Get("X-Api-Key") != f.key || r.Header.Get("Authorization") != "" {
		writeCountError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeCountError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	if fail != nil {
		if status, errType := fail(n); status != 0 {
			writeCountError(w, status, errType, "injected failure")
			return
		}
	}
	var body strings.Builder
	var req countWireRequest
	if err := json.NewDecoder(countTeeReader{r.Body, &body}).Decode(&req); err != nil {
		writeCountError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON: "+err.Error())
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body.String())
	f.mu.Unlock()
	if !f.models[req.Model] {
		writeCountError(w, http.StatusNotFound, "not_found_error", "model: "+req.Model)
		return
	}
	tokens, err := f.tokens(req)
	if err != nil {
		writeCountError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"input_tokens":%d}`, tokens)
}

type countTeeReader struct {
	r interface{ Read([]byte) (int, error) }
	w *strings.Builder
}

func (t countTeeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.w.Write(p[:n])
	return n, err
}

// tokens validates req as the real API would and counts it with the fake
// tokenizer.
func (f *fakeCountTokens) tokens(req countWireRequest) (int, error) {
	if len(req.Messages) == 0 {
		return 0, errors.New("messages: at least one message is required")
	}
	total := 3
	if len(req.System) > 0 {
		sys, err := countBlocks(req.System)
		if err != nil {
			return 0, fmt.Errorf("system: %v", err)
		}
		total += 2
		for _, b := range sys {
			if b.Type != "text" || b.Text == "" {
				return 0, errors.New("system: text content blocks must be non-empty")
			}
			total += countWords(b.Text)
		}
	}
	declared := map[string]bool{}
	if len(req.Tools) > 0 {
		total += 50
		for _, t := range req.Tools {
			if !countValidSchema(t.InputSchema) {
				return 0, fmt.Errorf("tools: input_schema = %s", t.InputSchema)
			}
			declared[t.Name] = true
			total += 5 + countWords(t.Name)
		}
	}
	prevRole := ""
	var open map[string]bool // tool_use ids of the previous message, to be answered
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return 0, fmt.Errorf("messages.%d.role: unexpected value %q", i, m.Role)
		}
		if m.Role != prevRole {
			total += 4
		}
		prevRole = m.Role
		bs, err := countBlocks(m.Content)
		if err != nil || len(bs) == 0 {
			return 0, fmt.Errorf("messages.%d.content: invalid", i)
		}
		used := map[string]bool{}
		for j, b := range bs {
			switch b.Type {
			case "text":
				if b.Text == "" {
					return 0, fmt.Errorf("messages.%d.content.%d: text content blocks must be non-empty", i, j)
				}
				total += countWords(b.Text)
			case "tool_use":
				if m.Role != "assistant" || !declared[b.Name] {
					return 0, fmt.Errorf("messages.%d.content.%d: tool_use %q needs an assistant message and a declared tool", i, j, b.Name)
				}
				var obj map[string]any
				if json.Unmarshal(b.Input, &obj) != nil || obj == nil {
					return 0, fmt.Errorf("messages.%d.content.%d.input: must be an object", i, j)
				}
				used[b.ID] = true
				total += 3 + countWords(b.Name) + (len(b.Input)+3)/4
			case "tool_result":
				if !open[b.ToolUseID] {
					return 0, fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s", i, j, b.ToolUseID)
				}
				delete(open, b.ToolUseID)
				inner, err := countBlocks(b.Content)
				if err != nil {
					return 0, err
				}
				total += 2
				for _, ib := range inner {
					if ib.Text == "" {
						return 0, errors.New("tool_result: text content blocks must be non-empty")
					}
					total += countWords(ib.Text)
				}
			default:
				return 0, fmt.Errorf("messages.%d.content.%d.type: unexpected %q", i, j, b.Type)
			}
		}
		if len(open) > 0 {
			return 0, fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after", i-1)
		}
		open = used
	}
	if len(open) > 0 || prevRole != "user" {
		return 0, errors.New("This model does not support assistant message prefill. The conversation must end with a user message.")
	}
	return total, nil
}

var (
	anthUser      = chatmem.Message{Role: chatmem.RoleUser, Content: "hello big world"}
	anthSystem    = chatmem.Message{Role: chatmem.RoleSystem, Content: "be brief please"}
	anthAssistant = chatmem.Message{Role: chatmem.RoleAssistant, Content: "sure thing"}
	anthToolCalls = chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{
		{ID: "call_abc", Type: "function", Function: chatmem.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		{ID: "call_def", Type: "function", Function: chatmem.FunctionCall{Name: "get_time", Arguments: ``}},
	}}
	anthToolResult = chatmem.Message{Role: chatmem.RoleTool, ToolCallID: "call_abc", Content: "18 degrees"}
)

func TestAnthropicCount(t *testing.T) {
	f := newFakeCountTokens(t)
	a := f.counter(t, nil)
	ctx := context.Background()
	tests := []struct {
		name string
		msg  chatmem.Message
		want int
	}{
		// request 3 + turn 4 + 3 words.
		{"user", anthUser, 3 + 4 + 3},
		// system 2 + 3 words; the filler user message cancels out.
		{"system", anthSystem, 2 + 3},
		// assistant turn 4 + 2 words + the next user turn's 4; the fillers cancel.
		{"assistant", anthAssistant, 4 + 2 + 4},
		// assistant turn 4 + two tool_use blocks (3 + 1 name word + 16/4 input
		// bytes, 3 + 1 + 2/4 rounded up for "{}") + the next user turn 4 with two
		// empty tool_results (2 each), less the filler "." the baseline's second
		// user message has; the tool declarations cancel.
		{"tool calls", anthToolCalls, 4 + (3 + 1 + 4) + (3 + 1 + 1) + 4 + 2 + 2 - 1},
		// A tool message costs its content's words.
		{"tool result", anthToolResult, 2},
		// A name is not sent, so it changes nothing.
		{"named user", chatmem.Message{Role: chatmem.RoleUser, Name: "alice", Content: "hello big world"}, 3 + 4 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Count(ctx, tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Count = %d, want %d", got, tt.want)
			}
		})
	}
	if got, want := a.Name(), "anthropic:claude-test"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
}

// TestAnthropicRequestShape pins the request an assistant message with tool
// calls becomes, as the server received it.
func TestAnthropicRequestShape(t *testing.T) {
	f := newFakeCountTokens(t)
	a := f.counter(t, nil)
	if _, err := a.Count(context.Background(), anthToolCalls); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) != 2 {
		t.Fatalf("server got %d requests, want 2 (message and baseline)", len(f.bodies))
	}
	var got, want any
	if err := json.Unmarshal([]byte(f.bodies[0]), &got); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(`{
		"model": "claude-test",
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "."}]},
			{"role": "assistant", "content": [
				{"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Paris"}},
				{"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_0"},
				{"type": "tool_result", "tool_use_id": "toolu_1"}
			]}
		],
		"tools": [
			{"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
			{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}
		]
	}`), &want)
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("request body =\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}

func TestAnthropicCache(t *testing.T) {
	f := newFakeCountTokens(t)
	a := f.counter(t, nil)
	ctx := context.Background()

	first, err := a.Count(ctx, anthUser)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.requestCount(); got != 1 {
		t.Fatalf("requests after the first count = %d, want 1", got)
	}
	// The same role and content again: answered from the cache. The Seq,
	// Name and metadata do not reach the request, so they share the entry.
	again := anthUser
	again.Seq, again.Name = 7, "alice"
	second, err := a.Count(ctx, again)
	if err != nil || second != first {
		t.Fatalf("second Count = %d, %v; want %d", second, err, first)
	}
	if got := f.requestCount(); got != 1 {
		t.Errorf("requests after counting the same message again = %d, want 1", got)
	}

	// Another role with the same content is another request.
	if _, err := a.Count(ctx, chatmem.Message{Role: chatmem.RoleAssistant, Content: anthUser.Content}); err != nil {
		t.Fatal(err)
	}
	if got := f.requestCount(); got != 3 {
		t.Errorf("requests after an assistant message = %d, want 3 (message and baseline)", got)
	}
	// A second assistant message reuses the cached baseline: one request.
	if _, err := a.Count(ctx, anthAssistant); err != nil {
		t.Fatal(err)
	}
	if got := f.requestCount(); got != 4 {
		t.Errorf("requests after a second assistant message = %d, want 4 (the baseline is cached)", got)
	}
	// Tool calls with other IDs make the same requests.
	calls := anthToolCalls.Clone()
	if _, err := a.Count(ctx, calls); err != nil {
		t.Fatal(err)
	}
	n := f.requestCount()
	calls.ToolCalls[0].ID, calls.ToolCalls[1].ID = "call_x", "call_y"
	if _, err := a.Count(ctx, calls); err != nil {
		t.Fatal(err)
	}
	if got := f.requestCount(); got != n {
		t.Errorf("requests after recounting tool calls with new IDs = %d, want %d", got, n)
	}
}

func TestAnthropicCacheDisabledAndBounded(t *testing.T) {
	ctx := context.Background()
	t.Run("disabled", func(t *testing.T) {
		f := newFakeCountTokens(t)
		a := f.counter(t, func(o *CounterOptions) { o.CacheSize = -1 })
		for range 3 {
			if _, err := a.Count(ctx, anthUser); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.requestCount(); got != 3 {
			t.Errorf("requests = %d, want 3 with the cache disabled", got)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		f := newFakeCountTokens(t)
		a := f.counter(t, func(o *CounterOptions) { o.CacheSize = 2 })
		for i := range 5 {
			if _, err := a.Count(ctx, chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprint("message ", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if got := a.cache.len(); got != 2 {
			t.Errorf("cache holds %d answers, want 2", got)
		}
		// The newest is still there; the oldest was evicted.
		n := f.requestCount()
		a.Count(ctx, chatmem.Message{Role: chatmem.RoleUser, Content: "message 4"})
		if got := f.requestCount(); got != n {
			t.Errorf("recounting the newest message made a request")
		}
		a.Count(ctx, chatmem.Message{Role: chatmem.RoleUser, Content: "message 0"})
		if got := f.requestCount(); got != n+1 {
			t.Errorf("recounting an evicted message made %d requests, want 1", got-n)
		}
	})
}

func TestAnthropicErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		status  int
		errType string
		want    error
	}{
		{http.StatusTooManyRequests, "rate_limit_error", chatmem.ErrUnavailable},
		{http.StatusInternalServerError, "api_error", chatmem.ErrUnavailable},
		{529, "overloaded_error", chatmem.ErrUnavailable},
		{http.StatusServiceUnavailable, "api_error", chatmem.ErrUnavailable},
		{http.StatusBadRequest, "invalid_request_error", chatmem.ErrInvalid},
		{http.StatusUnauthorized, "authentication_error", chatmem.ErrInvalid},
		{http.StatusForbidden, "permission_error", chatmem.ErrInvalid},
		{http.StatusNotFound, "not_found_error", chatmem.ErrInvalid},
		{http.StatusRequestEntityTooLarge, "request_too_large", chatmem.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, " ", tt.errType), func(t *testing.T) {
			f := newFakeCountTokens(t)
			f.fail = func(int) (int, string) { return tt.status, tt.errType }
			a := f.counter(t, nil)
			_, err := a.Count(ctx, anthUser)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Count error = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.errType) || !strings.Contains(err.Error(), "injected failure") {
				t.Errorf("error %q does not carry the API's type and message", err)
			}
			// Failures are not cached: once the service recovers, the count
			// goes through.
			f.mu.Lock()
			f.fail = nil
			f.mu.Unlock()
			if _, err := a.Count(ctx, anthUser); err != nil {
				t.Errorf("Count after recovery: %v", err)
			}
		})
	}

	t.Run("the real API's own refusals", func(t *testing.T) {
		f := newFakeCountTokens(t)
		for name, a := range map[string]*Counter{
			"wrong key":     f.counter(t, func(o *CounterOptions) { o.APIKey = "wrong" }),
			"unknown model": f.counter(t, func(o *CounterOptions) { o.Model = "claude-nope" }),
		} {
			if _, err := a.Count(ctx, anthUser); !errors.Is(err, chatmem.ErrInvalid) {
				t.Errorf("%s: Count error = %v, want ErrInvalid", name, err)
			}
		}
		a := f.counter(t, nil)
		if _, err := a.Count(ctx, chatmem.Message{Role: chatmem.RoleUser}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("empty user message: Count error = %v, want ErrInvalid", err)
		}
		if _, err := a.Count(ctx, chatmem.Message{Role: "developer", Content: "x"}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("unknown role: Count error = %v, want ErrInvalid", err)
		}
	})

	t.Run("network", func(t *testing.T) {
		f := newFakeCountTokens(t)
		a := f.counter(t, nil)
		f.Close()
		if _, err := a.Count(ctx, anthUser); !errors.Is(err, chatmem.ErrUnavailable) {
			t.Errorf("Count against a closed server: error = %v, want ErrUnavailable", err)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		f := newFakeCountTokens(t)
		a := f.counter(t, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := a.Count(cctx, anthUser)
		if !errors.Is(err, context.Canceled) || errors.Is(err, chatmem.ErrUnavailable) {
			t.Errorf("Count with a canceled context: error = %v, want context.Canceled and not ErrUnavailable", err)
		}
	})
}

// TestAnthropicRetries checks that the SDK's retries are on by default: an
// overloaded answer (529) with retry-after-ms is retried and the count
// succeeds.
func TestAnthropicRetries(t *testing.T) {
	f := newFakeCountTokens(t)
	f.fail = func(n int) (int, string) {
		if n == 1 {
			return 529, "overloaded_error"
		}
		return 0, ""
	}
	a := f.counter(t, func(o *CounterOptions) { o.MaxRetries = 0; o.HTTPClient = countRetryFastClient() })
	if _, err := a.Count(context.Background(), anthUser); err != nil {
		t.Fatalf("Count: %v", err)
	}
	if got := f.requestCount(); got != 2 {
		t.Errorf("requests = %d, want 2 (one retry)", got)
	}
}

// countRetryFastClient returns an HTTP client whose responses ask the SDK to retry
// at once, so the retry test does not wait for the default backoff.
func countRetryFastClient() *http.Client {
	return &http.Client{Transport: countRoundTripFunc(func(r *http.Request) (*http.Response, error) {
		res, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && res.StatusCode >= 500 {
			res.Header.Set("retry-after-ms", "1")
		}
		return res, err
	})}
}

type countRoundTripFunc func(*http.Request) (*http.Response, error)

func (f countRoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAnthropicConcurrent(t *testing.T) {
	f := newFakeCountTokens(t)
	a := f.counter(t, func(o *CounterOptions) { o.CacheSize = 8 })
	ctx := context.Background()
	msgs := []chatmem.Message{anthUser, anthSystem, anthAssistant, anthToolCalls, anthToolResult}
	want := make([]int, len(msgs))
	for i, m := range msgs {
		n, err := a.Count(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = n
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				k := (g + i) % len(msgs)
				if got, err := a.Count(ctx, msgs[k]); err != nil || got != want[k] {
					t.Errorf("Count(%s) = %d, %v; want %d", msgs[k].Role, got, err, want[k])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestNewAnthropicInvalid(t *testing.T) {
	for _, opts := range []CounterOptions{
		{},
		{APIKey: "k"},
		{Model: "claude-test"},
	} {
		if _, err := NewCounter(opts); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("NewCounter(%+v) error = %v, want ErrInvalid", opts, err)
		}
	}
}

func TestLRU(t *testing.T) {
	c := newLRU(2)
	k := func(b byte) [32]byte { return [32]byte{b} }
	c.put(k(1), 10)
	c.put(k(2), 20)
	if v, ok := c.get(k(1)); !ok || v != 10 { // 1 is now the most recent
		t.Fatalf("get(1) = %d, %v", v, ok)
	}
	c.put(k(3), 30) // evicts 2, the least recently used
	if _, ok := c.get(k(2)); ok {
		t.Error("2 was not evicted")
	}
	for _, kv := range [][2]int{{1, 10}, {3, 30}} {
		if v, ok := c.get(k(byte(kv[0]))); !ok || v != kv[1] {
			t.Errorf("get(%d) = %d, %v; want %d", kv[0], v, ok, kv[1])
		}
	}
	c.put(k(3), 31)
	if v, _ := c.get(k(3)); v != 31 || c.len() != 2 {
		t.Errorf("after update: get(3) = %d, len = %d", v, c.len())
	}
	off := newLRU(0)
	off.put(k(1), 1)
	if _, ok := off.get(k(1)); ok || off.len() != 0 {
		t.Error("a zero-capacity cache kept an entry")
	}
}
