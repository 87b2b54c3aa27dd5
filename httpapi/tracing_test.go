package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
)

// spanRecorder is a chatmem.Tracer that keeps its spans; it propagates a
// context as "traceparent: parent=<span name>", so a test sees which span
// a request continued.
type spanRecorder struct {
	mu    sync.Mutex
	spans []*recordedSpan
}

type recordedSpan struct {
	mu     sync.Mutex
	name   string
	parent string        // the remote parent's traceparent
	up     *recordedSpan // the parent span in the process
	attrs  map[string]any
	ended  int
	err    error
}

type recordedKey struct{}

func (r *spanRecorder) Start(ctx context.Context, name string, _ chatmem.SpanKind, attrs ...chatmem.Attr) (context.Context, chatmem.Span) {
	s := &recordedSpan{name: name, attrs: map[string]any{}}
	if p, ok := ctx.Value(recordedKey{}).(*recordedSpan); ok {
		s.up = p
	} else if p, ok := ctx.Value(remoteKey{}).(string); ok {
		s.parent = p
	}
	s.SetAttributes(attrs...)
	r.mu.Lock()
	r.spans = append(r.spans, s)
	r.mu.Unlock()
	return context.WithValue(ctx, recordedKey{}, s), s
}

type remoteKey struct{}

func (r *spanRecorder) Inject(ctx context.Context, set func(string, string)) {
	if s, ok := ctx.Value(recordedKey{}).(*recordedSpan); ok {
		set("traceparent", "parent="+s.name)
	}
}

func (r *spanRecorder) Extract(ctx context.Context, get func(string) string) context.Context {
	if v := get("traceparent"); v != "" {
		return context.WithValue(ctx, remoteKey{}, v)
	}
	return ctx
}

func (r *spanRecorder) named(t *testing.T, name string) *recordedSpan {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for i := len(r.spans) - 1; i >= 0; i-- {
		if r.spans[i].name == name {
			return r.spans[i]
		}
		names = append(names, r.spans[i].name)
	}
	t.Fatalf("no span %q among %v", name, names)
	return nil
}

func (s *recordedSpan) SetName(name string) { s.mu.Lock(); s.name = name; s.mu.Unlock() }
func (s *recordedSpan) SetAttributes(attrs ...chatmem.Attr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range attrs {
		s.attrs[a.Key] = a.Value
	}
}
func (s *recordedSpan) End(err error) { s.mu.Lock(); s.ended++; s.err = err; s.mu.Unlock() }

func (s *recordedSpan) check(t *testing.T, want map[string]any) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != 1 {
		t.Errorf("span %s ended %d times, want once", s.name, s.ended)
	}
	for k, v := range want {
		got := s.attrs[k]
		if gs, ok := got.([]string); ok {
			if ws, _ := v.([]string); !slices.Equal(gs, ws) {
				t.Errorf("span %s: %s = %v, want %v", s.name, k, got, v)
			}
			continue
		}
		if got != v {
			t.Errorf("span %s: %s = %v (%T), want %v (%T)", s.name, k, got, got, v, v)
		}
	}
}

// TestTracingUpstream: the upstream call of a streamed turn, of a
// Responses API request and of a failed request is a GenAI span under the
// request's server span (which continues the client's trace context), with
// what the answer said (read from the stream's chunks), and the upstream
// gets the upstream span's trace context.
func TestTracingUpstream(t *testing.T) {
	rec := &spanRecorder{}
	env := newProxyEnv(t, proxyConfig{tracer: rec, memory: func(o *chatmem.Options) { o.Tracer = rec }})

	status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "kavya", "traceparent": "client"},
		`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"messages":[{"role":"user","content":"Where is my order?"}]}`)
	if status != http.StatusOK || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("streamed turn: %d %s", status, body)
	}
	server := rec.named(t, "POST /v1/chat/completions")
	server.check(t, map[string]any{"http.route": "/v1/chat/completions", "http.response.status_code": 200, "chatmem.tenant": "acme"})
	if server.parent != "client" {
		t.Errorf("server span's parent %q, want the client's", server.parent)
	}
	call := rec.named(t, "chat gpt-4o-mini")
	call.check(t, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.request.temperature": 0.5,
		"gen_ai.response.id": "chatcmpl-1", "gen_ai.response.model": "gpt-4o-mini", "gen_ai.response.finish_reasons": []string{"stop"},
		"gen_ai.usage.input_tokens": 42, "gen_ai.usage.output_tokens": 7, "chatmem.model.purpose": "proxy",
	})
	if call.up != server {
		t.Errorf("upstream span's parent %q, want the server span", call.parent)
	}
	if got := env.up.last(t).header.Get("traceparent"); got != "parent=chat gpt-4o-mini" {
		t.Errorf("the upstream got traceparent %q, want the upstream span's", got)
	}
	asm := rec.named(t, "chatmem.context")
	asm.check(t, map[string]any{"gen_ai.conversation.id": "kavya", "chatmem.window.sent": 1})
	if asm.up != server {
		t.Error("the context assembly's span is not under the server span")
	}

	// The Responses API: its upstream call is a chat completion too.
	if status, body := env.do(t, http.MethodPost, "/responses", `{"model":"gpt-4o","input":"Hello","max_output_tokens":64}`); status != http.StatusOK {
		t.Fatalf("responses: %d %s", status, body)
	}
	rec.named(t, "chat gpt-4o").check(t, map[string]any{"gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 42,
		"gen_ai.response.id": "chatcmpl-2", "gen_ai.request.max_tokens": 64})
	rec.named(t, "POST "+openAIPrefix+"/responses").check(t, map[string]any{"http.response.status_code": 200})

	// An upstream that fails: the upstream span and the server's (502)
	// fail.
	env.up.push(fakeReply{status: http.StatusInternalServerError, body: `{"error":{"message":"boom","type":"server_error"}}`})
	if status, _, _ := env.post(t, map[string]string{"X-Chatmem-Conversation": "kavya"}, `{"model":"gpt-fail","messages":[{"role":"user","content":"Again?"}]}`); status < 500 {
		t.Fatalf("failing upstream: %d", status)
	}
	failed := rec.named(t, "chat gpt-fail")
	failed.check(t, map[string]any{"error.type": "500"})
	if failed.err == nil {
		t.Error("the failed upstream call's span is not failed")
	}
	if s := rec.named(t, "POST /v1/chat/completions"); s.err == nil || s.attrs["error.type"] == nil {
		t.Errorf("the failed request's server span: err %v, error.type %v", s.err, s.attrs["error.type"])
	}
}

// TestTracingUpstreamAnthropic: with an Anthropic upstream (the chat
// proxy speaking OpenAI's format to the Anthropic transport), the
// upstream call's span names Anthropic as the GenAI provider, not the
// OpenAI format it was sent in.
func TestTracingUpstreamAnthropic(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"It left Pune today."}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_read_input_tokens":30,"cache_creation_input_tokens":3,"output_tokens":9}}`)
	}))
	t.Cleanup(fake.Close)
	tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: fake.URL, APIKey: "sk-ant-test", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &spanRecorder{}
	env := newProxyEnv(t, proxyConfig{tracer: rec, baseURL: fake.URL, upClient: &http.Client{Transport: tr}})
	status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "kavya"},
		`{"model":"claude-test","messages":[{"role":"user","content":"Where is my parcel?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("turn: %d %s", status, body)
	}
	rec.named(t, "chat claude-test").check(t, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-test",
		"gen_ai.usage.output_tokens": 9, "chatmem.model.purpose": "proxy",
	})
}
