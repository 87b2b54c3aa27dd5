package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// The keys of the proxy tests: the client's chatmem key and the upstream's
// key, which must reach the upstream and nothing else.
const (
	proxyKey    = "proxy-tenant-key-1"
	upstreamKey = "sk-upstream-secret-4711"
)

// fakeReply is one scripted answer of the fake upstream.
type fakeReply struct {
	status      int    // non-zero: answer this status with body
	body        string // the error body
	contentType string
	content     string
	toolCalls   []chatmem.ToolCall
	// breakAfter, for a stream: abort the connection after this many
	// content events.
	breakAfter int
	// hang, for a stream: after the first event, wait for the client to go.
	hang bool
	// noDone, for a stream: end the body cleanly without data: [DONE].
	noDone bool
}

// fakeUsage is the usage the fake upstream reports, as OpenAI does, with
// cached input tokens.
var fakeUsage = map[string]any{"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49,
	"prompt_tokens_details": map[string]any{"cached_tokens": 32}, "completion_tokens_details": map[string]any{"reasoning_tokens": 3}}

// upstreamRequest is one request the fake upstream got.
type upstreamRequest struct {
	header http.Header
	raw    []byte
	body   map[string]json.RawMessage
}

// messages decodes the request's messages.
func (r upstreamRequest) messages(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(r.body["messages"], &out); err != nil {
		t.Fatalf("upstream request messages: %v", err)
	}
	return out
}

// fakeUpstream speaks the OpenAI chat completions wire format: a
// chat.completion object, or chat.completion.chunk events and data: [DONE]
// when the request streams. Replies come from the script, then default to
// "answer N" for the Nth request.
type fakeUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []upstreamRequest
	script []fakeReply
	done   int // requests answered
	// answer, if set, is the content of the Nth request's unscripted
	// reply; nil: "answer N".
	answer func(n int) string
	// header is added to every answer.
	header http.Header
	// models are the model requests answered, with their Authorization.
	models []string
	// forget, if set, keeps no requests (a benchmark's thousands would
	// grow the heap the proxy's garbage collector scans).
	forget bool
	// longIDs makes the reply's ID and X-Request-Id random, as long as
	// OpenAI's (chatcmpl- and 29 characters, req_ and 32 hex digits).
	longIDs bool
}

func newFakeUpstream(t testing.TB) *fakeUpstream {
	f := &fakeUpstream{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// serveModels answers GET /v1/models (gpt-4o-mini and gpt-4o) and
// /v1/models/{model} as OpenAI does: the model, or a 404 in OpenAI's
// error shape.
func (f *fakeUpstream) serveModels(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.models = append(f.models, r.URL.Path+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	model := func(id string) map[string]any {
		return map[string]any{"id": id, "object": "model", "created": 1715367049, "owned_by": "system"}
	}
	w.Header().Set("Content-Type", "application/json")
	id, one := strings.CutPrefix(r.URL.Path, "/v1/models/")
	switch {
	case !one:
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{model("gpt-4o-mini"), model("gpt-4o")}})
	case id == "gpt-4o-mini" || id == "gpt-4o":
		_ = json.NewEncoder(w).Encode(model(id))
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"message":"The model '%s' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`, id)
	}
}

func (f *fakeUpstream) modelRequests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.models)
}

func (f *fakeUpstream) push(r ...fakeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, r...)
}

func (f *fakeUpstream) requests() []upstreamRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func (f *fakeUpstream) last(t testing.TB) upstreamRequest {
	t.Helper()
	reqs := f.requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream got no request")
	}
	return reqs[len(reqs)-1]
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/models") {
		f.serveModels(w, r)
		return
	}
	defer func() {
		f.mu.Lock()
		f.done++
		f.mu.Unlock()
	}()
	raw, _ := io.ReadAll(r.Body)
	var body map[string]json.RawMessage
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	n := f.done + 1
	if !f.forget {
		f.reqs = append(f.reqs, upstreamRequest{header: r.Header.Clone(), raw: raw, body: body})
		n = len(f.reqs)
	}
	reply := fakeReply{content: fmt.Sprintf("answer %d", n)}
	if f.answer != nil {
		reply.content = f.answer(n)
	}
	if len(f.script) > 0 {
		reply, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()

	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
		return
	}
	id, reqID := fmt.Sprintf("chatcmpl-%d", n), fmt.Sprintf("req_fake_%d", n)
	if f.longIDs {
		id, reqID = "chatcmpl-"+(rand.Text() + rand.Text())[:29], "req_"+hex.EncodeToString([]byte(rand.Text()[:16]))
	}
	w.Header().Set("X-Request-Id", reqID)
	for k, v := range f.header {
		w.Header()[k] = v
	}
	if reply.status != 0 {
		ct := reply.contentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(reply.status)
		_, _ = io.WriteString(w, reply.body)
		return
	}
	var calls []map[string]any
	for _, c := range reply.toolCalls {
		calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}})
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	if string(body["stream"]) != "true" {
		msg := map[string]any{"role": "assistant", "content": reply.content, "refusal": nil}
		if reply.content == "" {
			msg["content"] = nil
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": 1764460800, "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   fakeUsage,
		})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	event := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 1764460800, "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	event(map[string]any{"role": "assistant", "content": ""}, nil)
	if reply.hang {
		event(map[string]any{"content": "partial"}, nil)
		<-r.Context().Done()
		return
	}
	// Content in pieces of up to 4 bytes.
	for i, sent := 0, 0; i < len(reply.content); i += 4 {
		if reply.breakAfter > 0 && sent == reply.breakAfter {
			panic(http.ErrAbortHandler)
		}
		event(map[string]any{"content": reply.content[i:min(i+4, len(reply.content))]}, nil)
		sent++
	}
	// Each tool call: id and name first, the arguments in two halves.
	for i, c := range reply.toolCalls {
		event(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Function.Name, "arguments": ""}}}}, nil)
		half := len(c.Function.Arguments) / 2
		for _, part := range []string{c.Function.Arguments[:half], c.Function.Arguments[half:]} {
			event(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil)
		}
	}
	event(map[string]any{}, finish)
	if reply.noDone {
		return
	}
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if json.Unmarshal(body["stream_options"], &so) == nil && so.IncludeUsage {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1764460800, "model": "gpt-4o-mini",
			"choices": []any{}, "usage": fakeUsage})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// proxyLog collects the server's log lines.
type proxyLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *proxyLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *proxyLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// proxyEnv is a chat proxy over a Memory, in front of a fake upstream.
type proxyEnv struct {
	url string
	mem *chatmem.Memory
	up  *fakeUpstream
	log *proxyLog
	api *Server
}

type proxyConfig struct {
	store    chatmem.Store // nil: memstore.New()
	memory   func(*chatmem.Options)
	policy   chatmem.Policy
	baseURL  string       // "": the fake upstream's /v1
	upClient *http.Client // nil: the default upstream client
	noUp     bool
	logLevel slog.Level
	// onDiverge, unnamed and derive are the Upstream's fields.
	onDiverge, unnamed string
	derive             bool
	// passthrough relays the client's Authorization, without a server key.
	passthrough bool
	// tracer is the server's Options.Tracer.
	tracer chatmem.Tracer
}

func newProxyEnv(t testing.TB, cfg proxyConfig) *proxyEnv {
	t.Helper()
	store := cfg.store
	if store == nil {
		store = memstore.New()
	}
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	if cfg.memory != nil {
		cfg.memory(&opts)
	}
	mem, err := chatmem.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	env := &proxyEnv{mem: mem, up: newFakeUpstream(t), log: &proxyLog{}}
	o := Options{
		Keys:   []Key{{Tenant: "acme", Key: proxyKey}},
		Logger: slog.New(slog.NewJSONHandler(env.log, &slog.HandlerOptions{Level: cfg.logLevel})),
		Tracer: cfg.tracer,
	}
	if !cfg.noUp {
		base := cfg.baseURL
		if base == "" {
			base = env.up.URL + "/v1"
		}
		key, auth := upstreamKey, UpstreamAuthServer
		if cfg.passthrough {
			key, auth = "", UpstreamAuthPassthrough
		}
		onDiverge := cfg.onDiverge
		if onDiverge == "" {
			onDiverge = DivergeRefuse // what most tests of the proxy's history rules expect; TestProxyRewind tests the default
		}
		o.Upstream = &Upstream{BaseURL: base, APIKey: key, Auth: auth, Policy: cfg.policy, HTTPClient: cfg.upClient,
			OnDiverge: onDiverge, Unnamed: cfg.unnamed, DeriveConversation: cfg.derive}
	}
	if env.api, err = New(mem, o); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(env.api)
	t.Cleanup(srv.Close)
	env.url = srv.URL
	return env
}

// client is the official openai-go client pointed at the proxy, naming
// conversation conv (none if empty). Retries are off so each call is one
// request.
func (e *proxyEnv) client(conv string, opts ...option.RequestOption) *openai.Client {
	o := []option.RequestOption{option.WithBaseURL(e.url + "/v1"), option.WithAPIKey(proxyKey), option.WithMaxRetries(0)}
	if conv != "" {
		o = append(o, option.WithHeader("X-Chatmem-Conversation", conv))
	}
	c := openai.NewClient(append(o, opts...)...)
	return &c
}

// post sends a raw request to the proxy.
func (e *proxyEnv) post(t testing.TB, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	return e.send(t, http.MethodPost, "/v1/chat/completions", proxyKey, header, body)
}

// send sends a raw request to path (with its query) under key, as JSON
// but for a GET.
func (e *proxyEnv) send(t testing.TB, method, path, key string, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// stored returns the conversation's messages in acme's tenant: the proxy
// commits a turn before the client has its reply, so there is nothing to
// wait for.
func (e *proxyEnv) stored(t testing.TB, id string) []chatmem.Message {
	t.Helper()
	msgs, err := e.mem.Store().Range(context.Background(), chatmem.Key{Tenant: "acme", ID: id}, 0, 0)
	if err != nil && !errors.Is(err, chatmem.ErrNotFound) {
		t.Fatalf("Range(%s): %v", id, err)
	}
	return msgs
}

// listed returns the messages of conversation id of tenant acme as
// GET /v1/conversations/{id}/messages answers them.
func (e *proxyEnv) listed(t testing.TB, id string) []chatmem.Message {
	t.Helper()
	status, _, body := e.send(t, http.MethodGet, "/v1/conversations/"+id+"/messages?limit=1000", proxyKey, nil, "")
	var page MessagesPage
	if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
		t.Fatalf("GET messages of %s: %d %s", id, status, body)
	}
	return page.Messages
}

// brief renders messages as "role:content" (tool calls as
// "role:->id:name(args)", tool results as "tool[id]:content").
func brief[T any](msgs []T) []string {
	var out []string
	for _, v := range msgs {
		b, _ := json.Marshal(v)
		var m struct {
			Role       string             `json:"role"`
			Content    *string            `json:"content"`
			ToolCalls  []chatmem.ToolCall `json:"tool_calls"`
			ToolCallID string             `json:"tool_call_id"`
		}
		_ = json.Unmarshal(b, &m)
		s := m.Role
		if m.ToolCallID != "" {
			s += "[" + m.ToolCallID + "]"
		}
		s += ":"
		if m.Content != nil {
			s += *m.Content
		}
		for _, c := range m.ToolCalls {
			s += "->" + c.ID + ":" + c.Function.Name + "(" + c.Function.Arguments + ")"
		}
		out = append(out, s)
	}
	return out
}

func wantBrief(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s =\n  %q\nwant\n  %q", what, got, want)
	}
}

func userTurn(content string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
	}
}

// TestProxyTurns drives three turns with the SDK: each upstream request
// carries the earlier turns, the request's system prompt goes first and is
// not stored, and each reply is stored with the usage next to chatmem's
// count.
func TestProxyTurns(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	client := env.client("c1")
	ctx := t.Context()

	first := userTurn("Hi, I'm Kavya.")
	first.Messages = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a shop assistant.")}, first.Messages...)
	var resp *http.Response
	cc, err := client.Chat.Completions.New(ctx, first, option.WithResponseInto(&resp))
	pmust(t, "turn 1", err)
	if cc.Choices[0].Message.Content != "answer 1" {
		t.Errorf("turn 1 reply = %q, want the upstream's %q", cc.Choices[0].Message.Content, "answer 1")
	}
	if resp.Header.Get("X-Chatmem-Window-Tokens") == "" {
		t.Error("no X-Chatmem-Window-Tokens header")
	}
	_, err = client.Chat.Completions.New(ctx, userTurn("Where is my order?"))
	pmust(t, "turn 2", err)
	_, err = client.Chat.Completions.New(ctx, userTurn("Thanks."))
	pmust(t, "turn 3", err)

	reqs := env.up.requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests, want 3", len(reqs))
	}
	wantBrief(t, "upstream request 1", brief(reqs[0].messages(t)), []string{"system:You are a shop assistant.", "user:Hi, I'm Kavya."})
	wantBrief(t, "upstream request 2", brief(reqs[1].messages(t)), []string{"user:Hi, I'm Kavya.", "assistant:answer 1", "user:Where is my order?"})
	wantBrief(t, "upstream request 3", brief(reqs[2].messages(t)),
		[]string{"user:Hi, I'm Kavya.", "assistant:answer 1", "user:Where is my order?", "assistant:answer 2", "user:Thanks."})
	for _, m := range reqs[2].messages(t) {
		for k := range m {
			if !slices.Contains([]string{"role", "content", "name", "tool_calls", "tool_call_id"}, k) {
				t.Errorf("upstream message has field %q: %v", k, m)
			}
		}
	}
	for i, r := range reqs {
		if got := r.header.Get("Authorization"); got != "Bearer "+upstreamKey {
			t.Errorf("upstream request %d: Authorization = %q, want the upstream key", i+1, got)
		}
		if string(r.body["model"]) != `"gpt-4o-mini"` {
			t.Errorf("upstream request %d: model = %s", i+1, r.body["model"])
		}
	}

	msgs := env.stored(t, "c1")
	wantBrief(t, "stored", brief(msgs), []string{"user:Hi, I'm Kavya.", "assistant:answer 1", "user:Where is my order?", "assistant:answer 2", "user:Thanks.", "assistant:answer 3"})
	msgs = env.listed(t, "c1") // the prompt tokens come from the receipts
	reply := msgs[1]
	if reply.Metadata[MetaPromptTokensUpstream] != "42" || reply.Metadata[MetaPromptTokensChatmem] != resp.Header.Get("X-Chatmem-Window-Tokens") {
		t.Errorf("reply metadata = %v, want upstream 42 and chatmem %s", reply.Metadata, resp.Header.Get("X-Chatmem-Window-Tokens"))
	}
	// Turn 3's user message was written with its reply: the count of the
	// prompt is that of all five messages sent.
	want := 0
	for _, m := range msgs[:5] {
		want += m.Tokens
	}
	if got := msgs[5].Metadata[MetaPromptTokensChatmem]; got != fmt.Sprint(want) || msgs[4].Metadata != nil {
		t.Errorf("turn 3: reply metadata %v, user metadata %v; want chatmem %d on the reply only", msgs[5].Metadata, msgs[4].Metadata, want)
	}

	// The usage reached the metrics.
	mreq := httptest.NewRequest("GET", "/metrics", nil)
	rec := httptest.NewRecorder()
	env.api.ServeHTTP(rec, mreq)
	if m := rec.Body.String(); !strings.Contains(m, `chatmem_proxy_prompt_tokens_total{counter="upstream"} 126`) || !strings.Contains(m, "chatmem_proxy_prompt_tokens_difference_count 3") {
		t.Errorf("metrics lack the proxy's prompt tokens:\n%s", grepLines(rec.Body.String(), "chatmem_proxy"))
	}
	// The tokens the upstream read from its cache, by tenant and model.
	if m := grepLines(rec.Body.String(), "chatmem_proxy_cached_prompt_tokens_total{"); !strings.Contains(m, `model="gpt-4o-mini"`) || !strings.HasSuffix(strings.TrimSpace(m), " 96") {
		t.Errorf("metrics lack the cached prompt tokens (3 turns of 32):\n%s", grepLines(rec.Body.String(), "chatmem_proxy"))
	}
}

// TestProxySystemPromptBudget: the request's system prompt is counted
// with the conversation's tokenizer and comes off the budget: the window
// of earlier turns shrinks to make room for it, the tokens header counts
// both, and a prompt that takes the whole budget is refused without
// calling the upstream; the turn's user message stays, as it does when
// any later step fails.
func TestProxySystemPromptBudget(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	h := map[string]string{"X-Chatmem-Conversation": "sp", "X-Chatmem-Budget": "60"}
	turn := func(system, user string) (int, http.Header, []byte) {
		t.Helper()
		msgs := []map[string]string{{"role": "user", "content": user}}
		if system != "" {
			msgs = append([]map[string]string{{"role": "system", "content": system}}, msgs...)
		}
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		return env.post(t, h, string(b))
	}
	for i := range 6 {
		if status, _, body := turn("", fmt.Sprintf("question number %d, with some words to count", i)); status != 200 {
			t.Fatalf("turn %d: %d %s", i, status, body)
		}
	}
	count := func(m chatmem.Message) int {
		n, err := tokenizer.Estimate{}.Count(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	prompt := "You are the shop's assistant. Answer in one short sentence."
	user := "and one more question"
	status, hdr, body := turn(prompt, user)
	if status != 200 {
		t.Fatalf("with a system prompt: %d %s", status, body)
	}
	sent := env.up.last(t).messages(t)
	if sent[0]["role"] != "system" || sent[0]["content"] != prompt {
		t.Fatalf("the upstream request starts with %v, want the system prompt", sent[0])
	}
	stored := env.stored(t, "sp")
	bySeq := map[string]chatmem.Message{}
	for _, m := range stored {
		bySeq[m.Content] = m
	}
	total := count(chatmem.Message{Role: chatmem.RoleSystem, Content: prompt})
	for _, m := range sent[1:] {
		sm, ok := bySeq[m["content"].(string)]
		if !ok {
			t.Fatalf("sent %v, which is not stored", m)
		}
		total += sm.Tokens
	}
	if got := hdr.Get("X-Chatmem-Window-Tokens"); got != fmt.Sprint(total) || total > 60 {
		t.Errorf("X-Chatmem-Window-Tokens = %s; the messages sent count %d, the budget is 60", got, total)
	}
	if n := len(sent) - 1; n >= 12 {
		t.Errorf("sent %d stored messages with the prompt; the budget cannot hold them all", n)
	}

	before, calls := len(env.stored(t, "sp")), len(env.up.requests())
	status, _, body = turn(strings.Repeat("Always be polite. ", 30), "a question kept without a reply")
	if status != 422 || !strings.Contains(string(body), "budget_too_small") {
		t.Errorf("a system prompt over the budget: %d %s, want 422 budget_too_small", status, body)
	}
	after := env.stored(t, "sp")
	if len(after) != before+1 || after[len(after)-1].Content != "a question kept without a reply" || len(env.up.requests()) != calls {
		t.Errorf("the refused turn stored %d messages (want its user message) and made %d upstream calls (want none)", len(after)-before, len(env.up.requests())-calls)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestProxyPolicy: turns under a budget of 25 tokens drop the first turn,
// but with facts on the order number it held still reaches the upstream.
func TestProxyPolicy(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{memory: func(o *chatmem.Options) {
		o.Extractors = []chatmem.Extractor{offline.DefaultExtractor()}
		o.Sync = true
	}})
	client := env.client("c1", option.WithHeader("X-Chatmem-Budget", "25"), option.WithHeader("X-Chatmem-Facts", "true"))
	ctx := t.Context()
	turns := []string{seed.History()[0].Content, "Ok. Also, do you have running socks?", "Add the DryFit ones to my cart please."}
	for i, turn := range turns {
		_, err := client.Chat.Completions.New(ctx, userTurn(turn))
		pmust(t, fmt.Sprintf("turn %d", i+1), err)
	}
	reqs := env.up.requests()
	third := string(reqs[2].body["messages"])
	t.Logf("third upstream request: %s", third)
	if !strings.Contains(third, "SE-10423") {
		t.Errorf("third upstream request lacks SE-10423: %s", third)
	}
	if strings.Contains(third, turns[0]) {
		t.Errorf("third upstream request still holds the first turn under budget 25: %s", third)
	}
	msgs := reqs[2].messages(t)
	if last := brief(msgs)[len(msgs)-1]; last != "user:"+turns[2] {
		t.Errorf("third upstream request ends with %q, want the new user message", last)
	}

	// The other policies by header; a bad value is a 400 in the OpenAI shape.
	_, err := env.client("c1", option.WithHeader("X-Chatmem-Policy", "last_turns"), option.WithHeader("X-Chatmem-Turns", "1")).
		Chat.Completions.New(ctx, userTurn("And the socks?"))
	pmust(t, "last_turns 1", err)
	wantBrief(t, "last_turns 1", brief(env.up.last(t).messages(t)), []string{"user:And the socks?"})
	for _, h := range []map[string]string{
		{"X-Chatmem-Budget": "many"},
		{"X-Chatmem-Budget": "0"},
		{"X-Chatmem-Turns": "-1"},
		{"X-Chatmem-Policy": "everything"},
		{"X-Chatmem-Policy": "last_turns", "X-Chatmem-Turns": "0"},
		{"X-Chatmem-Facts": "yes please"},
	} {
		_, err := env.client("c1", func() []option.RequestOption {
			var o []option.RequestOption
			for k, v := range h {
				o = append(o, option.WithHeader(k, v))
			}
			return o
		}()...).Chat.Completions.New(ctx, userTurn("x"))
		wantOpenAIError(t, fmt.Sprint(h), err, 400, "invalid_request", "invalid_request_error")
	}
	_, err = env.client("c1", option.WithHeader("X-Chatmem-Budget", "3")).Chat.Completions.New(ctx, userTurn("A message far longer than three tokens."))
	wantOpenAIError(t, "budget 3", err, 422, "budget_too_small", "invalid_request_error")
	_, err = env.client("bad id!").Chat.Completions.New(ctx, userTurn("x"))
	wantOpenAIError(t, "bad conversation id", err, 400, "invalid_request", "invalid_request_error")
}

// wantOpenAIError checks that err is the SDK's error for an OpenAI-shaped
// error body with the status, code and type.
func wantOpenAIError(t *testing.T, what string, err error, status int, code, typ string) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error = %v, want an *openai.Error", what, err)
		return nil
	}
	if e.StatusCode != status || e.Code != code || e.Type != typ || e.Message == "" {
		t.Errorf("%s: error = %d code=%q type=%q message=%q, want %d %q %q", what, e.StatusCode, e.Code, e.Type, e.Message, status, code, typ)
	}
	return e
}

// TestProxyStream: a streamed reply is relayed chunk by chunk and stored
// when the stream ends, content and tool calls assembled.
func TestProxyStream(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	client := env.client("s1")
	ctx := t.Context()
	env.up.push(fakeReply{content: "The parcel is out for delivery."})
	params := userTurn("Where is SE-10423?")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	pmust(t, "stream", stream.Err())
	if got := acc.Choices[0].Message.Content; got != "The parcel is out for delivery." || chunks < 5 {
		t.Errorf("streamed %d chunks with %q, want the upstream's content in pieces", chunks, got)
	}
	msgs := env.stored(t, "s1")
	wantBrief(t, "stored", brief(msgs), []string{"user:Where is SE-10423?", "assistant:The parcel is out for delivery."})
	if msgs = env.listed(t, "s1"); len(msgs) == 2 && msgs[1].Metadata[MetaPromptTokensUpstream] != "42" {
		t.Errorf("streamed reply metadata = %v, want the usage of the last chunk", msgs[1].Metadata)
	}
	if string(env.up.last(t).body["stream_options"]) != `{"include_usage":true}` {
		t.Errorf("stream_options reached the upstream as %s", env.up.last(t).body["stream_options"])
	}

	// The next turn, not streamed, carries the streamed one.
	_, err := client.Chat.Completions.New(ctx, userTurn("Thanks!"))
	pmust(t, "turn 2", err)
	wantBrief(t, "upstream request 2", brief(env.up.last(t).messages(t)), []string{"user:Where is SE-10423?", "assistant:The parcel is out for delivery.", "user:Thanks!"})
}

// TestProxyToolCalls runs a tool-call round trip, the call streamed or
// not: the model calls a tool, the client sends only the result, the model
// answers; all of it is stored in order with the call IDs intact.
func TestProxyToolCalls(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", streamed), func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{})
			client := env.client("t1")
			ctx := t.Context()
			calls := []chatmem.ToolCall{
				{ID: "call_abc", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{"order":"SE-10423"}`}},
				{ID: "call_def", Type: "function", Function: chatmem.FunctionCall{Name: "eta", Arguments: `{"city":"Pune"}`}},
			}
			env.up.push(fakeReply{toolCalls: calls}, fakeReply{content: "It arrives by 8 pm."})
			params := userTurn("Where is SE-10423?")
			params.Tools = []openai.ChatCompletionToolUnionParam{
				openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "order_status", Parameters: shared.FunctionParameters{"type": "object"}}),
				openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "eta", Parameters: shared.FunctionParameters{"type": "object"}}),
			}
			var got []openai.ChatCompletionMessageToolCallUnion
			if streamed {
				stream := client.Chat.Completions.NewStreaming(ctx, params)
				var acc openai.ChatCompletionAccumulator
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				pmust(t, "stream", stream.Err())
				got = acc.Choices[0].Message.ToolCalls
			} else {
				cc, err := client.Chat.Completions.New(ctx, params)
				pmust(t, "call", err)
				got = cc.Choices[0].Message.ToolCalls
			}
			if len(got) != 2 || got[0].ID != "call_abc" || got[1].Function.Arguments != `{"city":"Pune"}` {
				t.Fatalf("client got tool calls %+v", got)
			}
			params.Messages = []openai.ChatCompletionMessageParamUnion{
				openai.ToolMessage("out for delivery", got[0].ID),
				openai.ToolMessage("8 pm", got[1].ID),
			}
			cc, err := client.Chat.Completions.New(ctx, params)
			pmust(t, "answer", err)
			if cc.Choices[0].Message.Content != "It arrives by 8 pm." {
				t.Errorf("answer = %q", cc.Choices[0].Message.Content)
			}
			want := []string{
				"user:Where is SE-10423?",
				`assistant:->call_abc:order_status({"order":"SE-10423"})->call_def:eta({"city":"Pune"})`,
				"tool[call_abc]:out for delivery",
				"tool[call_def]:8 pm",
			}
			wantBrief(t, "upstream request 2", brief(env.up.last(t).messages(t)), want)
			wantBrief(t, "stored", brief(env.stored(t, "t1")), append(want, "assistant:It arrives by 8 pm."))
			if tools := env.up.last(t).body["tools"]; !bytes.Contains(tools, []byte(`"order_status"`)) {
				t.Errorf("tools reached the upstream as %s", tools)
			}
		})
	}
}

// TestProxyUpstreamErrors: upstream failures come back in the OpenAI
// shape with the upstream's status; the user message is kept, no reply is
// stored, and the next turn sends a valid history.
func TestProxyUpstreamErrors(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	client := env.client("e1")
	ctx := t.Context()

	env.up.push(fakeReply{status: 500, body: `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`})
	_, err := client.Chat.Completions.New(ctx, userTurn("one"))
	if e := wantOpenAIError(t, "upstream 500", err, 500, "", "server_error"); e != nil && e.Message != "The server had an error" {
		t.Errorf("upstream 500: message %q, want the upstream's", e.Message)
	}
	env.up.push(fakeReply{status: 429, contentType: "text/plain", body: "slow down"})
	_, err = client.Chat.Completions.New(ctx, userTurn("two"))
	if e := wantOpenAIError(t, "upstream 429", err, 429, "rate_limited", "upstream_error"); e != nil && !strings.Contains(e.Message, "slow down") {
		t.Errorf("upstream 429: message %q, want the upstream's text", e.Message)
	}
	wantBrief(t, "stored after the errors", brief(env.stored(t, "e1")), []string{"user:one", "user:two"})

	// A stream that breaks: the client sees an error, nothing of the reply
	// is stored.
	env.up.push(fakeReply{content: "a reply that never ends", breakAfter: 2})
	stream := client.Chat.Completions.NewStreaming(ctx, userTurn("three"))
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Error("a broken stream ended without an error")
	}
	waitHandled(t, env)
	wantBrief(t, "stored after a broken stream", brief(env.stored(t, "e1")), []string{"user:one", "user:two", "user:three"})

	// A stream that ends without data: [DONE] is incomplete too.
	env.up.push(fakeReply{content: "cut short", noDone: true})
	stream = client.Chat.Completions.NewStreaming(ctx, userTurn("four"))
	for stream.Next() {
	}
	waitHandled(t, env)
	wantBrief(t, "stored after a stream without [DONE]", brief(env.stored(t, "e1")), []string{"user:one", "user:two", "user:three", "user:four"})

	_, err = client.Chat.Completions.New(ctx, userTurn("five"))
	pmust(t, "turn after the errors", err)
	wantBrief(t, "upstream request after the errors", brief(env.up.last(t).messages(t)), []string{"user:one", "user:two", "user:three", "user:four", "user:five"})
	wantBrief(t, "stored", brief(env.stored(t, "e1"))[5:], []string{"assistant:answer 5"})

	// An upstream that cannot be reached is a 502.
	dead := newProxyEnv(t, proxyConfig{baseURL: "http://127.0.0.1:1/v1"})
	_, err = dead.client("e1").Chat.Completions.New(ctx, userTurn("hello"))
	wantOpenAIError(t, "unreachable upstream", err, 502, "unavailable", "upstream_error")
	wantBrief(t, "stored with the upstream down", brief(dead.stored(t, "e1")), []string{"user:hello"})

	// No upstream: 503.
	none := newProxyEnv(t, proxyConfig{noUp: true})
	_, err = none.client("e1").Chat.Completions.New(ctx, userTurn("hello"))
	if e := wantOpenAIError(t, "no upstream", err, 503, "unavailable", "server_error"); e != nil && e.Message != "no upstream configured" {
		t.Errorf("no upstream: message %q", e.Message)
	}
}

// waitHandled waits for the fake upstream to finish the requests it got,
// and a moment more for the proxy to finish its own.
func waitHandled(t *testing.T, env *proxyEnv) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		env.up.mu.Lock()
		done := env.up.done == len(env.up.reqs)
		env.up.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
}

// pmust fails the test on err.
func pmust(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestProxyClientGone: a client that disconnects mid-stream leaves its
// message stored and no reply.
func TestProxyClientGone(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	_, err := env.client("g1").Chat.Completions.New(t.Context(), userTurn("hi"))
	pmust(t, "first turn", err)
	env.up.push(fakeReply{hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	stream := env.client("g1").Chat.Completions.NewStreaming(ctx, userTurn("hello"))
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content == "partial" {
			cancel()
		}
	}
	cancel()
	waitHandled(t, env)
	wantBrief(t, "stored", brief(env.stored(t, "g1")), []string{"user:hi", "assistant:answer 1", "user:hello"})
	_, err = env.client("g1").Chat.Completions.New(t.Context(), userTurn("again"))
	pmust(t, "next turn", err)
	wantBrief(t, "next upstream request", brief(env.up.last(t).messages(t)), []string{"user:hi", "assistant:answer 1", "user:hello", "user:again"})
}

// TestProxyPassThrough: without a conversation the body goes up byte for
// byte, the answer comes back as it is, and nothing is stored; with one,
// every parameter but messages reaches the upstream untouched.
func TestProxyPassThrough(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi","x_custom":1}],` +
		`"temperature":0.25,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],` +
		`"response_format":{"type":"json_object"},"seed":7,"vendor_extension":{"a":[1,2]}}`
	status, h, resp := env.post(t, nil, body)
	if status != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("pass-through: %d %s %s", status, h.Get("Content-Type"), resp)
	}
	if got := string(env.up.last(t).raw); got != body {
		t.Errorf("pass-through body reached the upstream as\n%s\nwant\n%s", got, body)
	}
	var cc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp, &cc); err != nil || cc.ID != "chatcmpl-1" {
		t.Errorf("pass-through answer = %s", resp)
	}
	page, err := env.mem.Store().List(t.Context(), "acme", chatmem.PageRequest{})
	pmust(t, "List", err)
	if len(page.Conversations) != 0 {
		t.Errorf("pass-through stored conversations %v", page.Conversations)
	}
	stream := env.client("").Chat.Completions.NewStreaming(t.Context(), userTurn("hi"))
	for stream.Next() {
	}
	pmust(t, "pass-through stream", stream.Err())

	// With a conversation: the same parameters, the messages replaced.
	status, _, resp = env.post(t, map[string]string{"X-Chatmem-Conversation": "p1"}, body)
	if status != 200 {
		t.Fatalf("with a conversation: %d %s", status, resp)
	}
	var sent, got map[string]json.RawMessage
	pmust(t, "sent body", json.Unmarshal([]byte(body), &sent))
	got = env.up.last(t).body
	for k, v := range sent {
		if k == "messages" {
			continue
		}
		if !bytes.Equal(got[k], v) {
			t.Errorf("%s reached the upstream as %s, want %s", k, got[k], v)
		}
	}
	if len(got) != len(sent) {
		t.Errorf("upstream body has fields %v, want those of %v", keys(got), keys(sent))
	}
	wantBrief(t, "messages", brief(env.up.last(t).messages(t)), []string{"system:Be brief.", "user:hi"})

	// The SDK's typed parameters too.
	params := userTurn("and now?")
	params.Temperature = openai.Float(0.5)
	params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	_, err = env.client("p1").Chat.Completions.New(t.Context(), params)
	pmust(t, "typed parameters", err)
	if b := env.up.last(t).body; string(b["temperature"]) != "0.5" || string(b["response_format"]) != `{"type":"json_object"}` {
		t.Errorf("temperature %s, response_format %s reached the upstream", b["temperature"], b["response_format"])
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestProxyBadRequests: chatmem's own errors on the route are in the
// OpenAI shape.
func TestProxyBadRequests(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	conv := map[string]string{"X-Chatmem-Conversation": "b1"}
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   string
		status int
		code   string
	}{
		{"not JSON", conv, `{"messages":`, 400, "invalid_request"},
		{"not an object", conv, `[1]`, 400, "invalid_request"},
		{"no messages", conv, `{"model":"m"}`, 400, "invalid_request"},
		{"unknown role", conv, `{"messages":[{"role":"robot","content":"x"}]}`, 400, "invalid_request"},
		{"empty content", conv, `{"messages":[{"role":"user","content":""}]}`, 400, "invalid_request"},
		{"tool result without its call", conv, `{"messages":[{"role":"tool","tool_call_id":"nope","content":"x"}]}`, 400, "invalid_request"},
		{"bad stream", conv, `{"stream":"yes","messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request"},
		{"bad idempotency key", map[string]string{"X-Chatmem-Conversation": "b1", "Idempotency-Key": "é"}, `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request"},
		{"only a system prompt, new conversation", conv, `{"messages":[{"role":"system","content":"x"}]}`, 404, "not_found"},
	} {
		status, h, body := env.post(t, tc.header, tc.body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || status != tc.status || e.Error.Code != tc.code || e.Error.Type == "" || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with code %s in the OpenAI shape", tc.name, status, body, tc.status, tc.code)
		}
		if h.Get("Content-Type") != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, h.Get("Content-Type"))
		}
	}
	if n := len(env.up.requests()); n != 0 {
		t.Errorf("bad requests reached the upstream %d times", n)
	}
	if msgs := env.stored(t, "b1"); len(msgs) != 0 {
		t.Errorf("bad requests stored %q", brief(msgs))
	}
	// A wrong chatmem key is refused before the upstream.
	wrong := openai.NewClient(option.WithBaseURL(env.url+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err := wrong.Chat.Completions.New(t.Context(), userTurn("x"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 401 {
		t.Errorf("wrong key: %v, want 401", err)
	}
}

// TestProxyKeyNotLogged: the upstream key appears in no log line, whatever
// happened (success, upstream errors, an unreachable upstream), and the
// client's chatmem key never reaches the upstream.
func TestProxyKeyNotLogged(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{logLevel: slog.LevelDebug})
	client := env.client("k1")
	ctx := t.Context()
	_, err := client.Chat.Completions.New(ctx, userTurn("hello"))
	pmust(t, "turn", err)
	env.up.push(fakeReply{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-upst***4711","type":"invalid_request_error","code":"invalid_api_key"}}`})
	_, _ = client.Chat.Completions.New(ctx, userTurn("again"))
	env.up.push(fakeReply{status: 500, contentType: "text/html", body: "<h1>oops</h1>"})
	_, _ = client.Chat.Completions.New(ctx, userTurn("again"))
	env.up.push(fakeReply{content: "x", breakAfter: 1})
	s := client.Chat.Completions.NewStreaming(ctx, userTurn("stream"))
	for s.Next() {
	}
	waitHandled(t, env)
	dead := newProxyEnv(t, proxyConfig{baseURL: "http://127.0.0.1:1/v1", logLevel: slog.LevelDebug})
	_, _ = dead.client("k1").Chat.Completions.New(ctx, userTurn("hello"))

	for _, l := range []*proxyLog{env.log, dead.log} {
		log := l.String()
		if log == "" {
			t.Error("nothing was logged")
		}
		if strings.Contains(log, upstreamKey) {
			t.Errorf("the upstream key is in the log:\n%s", log)
		}
	}
	if !strings.Contains(env.log.String(), `"route":"/v1/chat/completions"`) {
		t.Errorf("no request line for the proxy in the log:\n%s", env.log.String())
	}
	for _, r := range env.up.requests() {
		if bytes.Contains(r.raw, []byte(proxyKey)) || strings.Contains(fmt.Sprint(r.header), proxyKey) {
			t.Errorf("the client's chatmem key reached the upstream: %v", r.header)
		}
	}
}

// TestMarshalOpenAIMessage: only the OpenAI fields go out.
func TestMarshalOpenAIMessage(t *testing.T) {
	for _, tc := range []struct {
		msg  chatmem.Message
		want string
	}{
		{chatmem.Message{Seq: 3, Role: chatmem.RoleUser, Content: "hi", Tokens: 4, CreatedAt: time.Now(), Metadata: map[string]string{"a": "b"}}, `{"role":"user","content":"hi"}`},
		{chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "c1", Function: chatmem.FunctionCall{Name: "f", Arguments: "{}"}}}},
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{chatmem.Message{Role: chatmem.RoleTool, Content: "ok", ToolCallID: "c1"}, `{"role":"tool","content":"ok","tool_call_id":"c1"}`},
		{chatmem.Message{Role: chatmem.RoleUser, Content: "hi", Name: "kavya"}, `{"role":"user","content":"hi","name":"kavya"}`},
	} {
		b, err := MarshalOpenAIMessage(tc.msg)
		if err != nil || string(b) != tc.want {
			t.Errorf("MarshalOpenAIMessage(%+v) = %s, %v; want %s", tc.msg, b, err, tc.want)
		}
	}
}
