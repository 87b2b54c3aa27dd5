package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/chatmem/chatmem/mcpserver"
)

// receivedSpans are the spans an OTLP receiver got, with their resource's
// attributes.
type receivedSpans struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
}

func (r *receivedSpans) take(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		if r.resource == nil {
			r.resource = map[string]string{}
		}
		for _, kv := range rs.GetResource().GetAttributes() {
			r.resource[kv.Key] = kv.Value.GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
}

func (r *receivedSpans) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// otlpHTTPReceiver is an OTLP/HTTP receiver on loopback: POST /v1/traces
// with a protobuf ExportTraceServiceRequest.
func otlpHTTPReceiver(t *testing.T, got *receivedSpans) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver got %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "unexpected", http.StatusNotFound)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.take(&req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// traceService is the OTLP collector's gRPC TraceService.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	got *receivedSpans
}

func (s *traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.got.take(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// otlpGRPCReceiver is an OTLP/gRPC receiver on loopback.
func otlpGRPCReceiver(t *testing.T, got *receivedSpans) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, &traceService{got: got})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String()
}

// fakeModel is an OpenAI-compatible model server that answers the chat
// proxy's requests (model "gpt-test") with a completion reporting usage,
// cached tokens included, and the extractor's (model "extract-test") with
// no facts; it records the traceparent of each request by model.
type fakeModel struct {
	mu          sync.Mutex
	traceparent map[string][]string
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.traceparent == nil {
		f.traceparent = map[string][]string{}
	}
	f.traceparent[req.Model] = append(f.traceparent[req.Model], r.Header.Get("Traceparent"))
	f.mu.Unlock()
	content := "Hello Kavya."
	if req.Model == "extract-test" {
		content = `{"facts":[]}`
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-otel-" + req.Model, "object": "chat.completion", "created": 1, "model": req.Model + "-2026",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage": map[string]any{"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26,
			"prompt_tokens_details": map[string]any{"cached_tokens": 8}}})
}

func (f *fakeModel) parents(model string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.traceparent[model]...)
}

// TestServeOpenTelemetry: with OTEL_* pointing at a real OTLP receiver
// (HTTP/protobuf and gRPC, in the test), chatmem serve exports the span
// tree of a proxied turn that carries a client's traceparent (the server
// span continues the client's trace; under it the context assembly with
// the window's attributes, the store calls, and the upstream call with
// the GenAI attributes, whose trace context the upstream gets), of a REST
// context read, and of the extractor's model call; the spans are flushed
// at shutdown.
func TestServeOpenTelemetry(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "_"), func(t *testing.T) {
			var got receivedSpans
			model := &fakeModel{}
			up := httptest.NewServer(http.StripPrefix("/v1/chat/completions", model))
			defer up.Close()
			if protocol == "grpc" {
				t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlpGRPCReceiver(t, &got))
			} else {
				t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
				t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", otlpHTTPReceiver(t, &got)+"/v1/traces")
			}
			t.Setenv("OTEL_SERVICE_NAME", "chatmem-otel-test")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw := io.Pipe()
			var log syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tokenizer", "estimate",
					"--upstream", up.URL + "/v1", "--extractors", "openai", "--llm-base-url", up.URL + "/v1", "--llm-model", "extract-test"}, nil, pw, &log)
				pw.Close()
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			if err != nil {
				t.Fatalf("reading the listen line: %v; log:\n%s", err, log.String())
			}
			go io.Copy(io.Discard, pr)
			base := strings.TrimSpace(strings.TrimPrefix(line, "chatmem listening on "))
			if l := logLine(t, log.String(), "chatmem serving"); !strings.Contains(l, `otel="otlp `+protocol+" ") {
				t.Errorf("startup log %q does not say OTel is on over %s", l, protocol)
			}

			const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			body := `{"model":"gpt-test","max_tokens":50,"messages":[{"role":"user","content":"Hi, I am Kavya."}]}`
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Chatmem-Conversation", "kavya")
			req.Header.Set("Traceparent", "00-"+traceID+"-"+clientSpan+"-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("proxied turn: %s", resp.Status)
			}
			resp, err = http.Get(base + "/v1/conversations/kavya/context?policy=token_budget&budget=100")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("context read: %s", resp.Status)
			}

			// Shutdown drains the worker (the extractor's call) and flushes
			// the spans.
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("serve returned %v after shutdown", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not shut down")
			}
			checkTrace(t, &got, model, traceID, clientSpan)
		})
	}
}

func checkTrace(t *testing.T, got *receivedSpans, model *fakeModel, traceID, clientSpan string) {
	t.Helper()
	spans := got.all()
	if got.resource["service.name"] != "chatmem-otel-test" || got.resource["deployment.environment.name"] != "test" {
		t.Errorf("resource = %v, want OTEL_SERVICE_NAME's and OTEL_RESOURCE_ATTRIBUTES' values", got.resource)
	}
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	children := func(parent *tracepb.Span) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range spans {
			if string(s.ParentSpanId) == string(parent.SpanId) && string(s.TraceId) == string(parent.TraceId) {
				out = append(out, s)
			}
		}
		return out
	}
	find := func(in []*tracepb.Span, name string) *tracepb.Span {
		for _, s := range in {
			if s.Name == name {
				return s
			}
		}
		var names []string
		for _, s := range in {
			names = append(names, s.Name)
		}
		t.Fatalf("no span %q among %v", name, names)
		return nil
	}

	// The proxied turn: the client's trace, continued.
	turn := find(spans, "POST /v1/chat/completions")
	if hex.EncodeToString(turn.TraceId) != traceID || hex.EncodeToString(turn.ParentSpanId) != clientSpan {
		t.Errorf("server span in trace %x under %x, want the client's %s under %s", turn.TraceId, turn.ParentSpanId, traceID, clientSpan)
	}
	if turn.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("server span kind %v", turn.Kind)
	}
	checkAttrs(t, turn, map[string]any{"http.request.method": "POST", "http.route": "/v1/chat/completions", "http.response.status_code": int64(200), "chatmem.tenant": "default"})
	under := children(turn)
	// The turn's messages are appended and its window read in one call
	// (Memory.Turn): one context span, under which the store is called.
	var asm *tracepb.Span
	for _, s := range under {
		if s.Name == "chatmem.context" {
			if asm != nil {
				t.Fatal("two context spans for one proxied turn")
			}
			asm = s
		}
	}
	if asm == nil {
		t.Fatal("no context span under the proxied turn")
	}
	checkAttrs(t, asm, map[string]any{"chatmem.policy": "token_budget", "gen_ai.conversation.id": "kavya", "chatmem.window.sent": int64(1),
		"chatmem.window.seq_ranges": "1", "chatmem.window.dropped": int64(0)})
	var names []string
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "store.") && string(s.TraceId) == string(turn.TraceId) {
			if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("store span %s kind %v", s.Name, s.Kind)
			}
			names = append(names, s.Name)
		}
	}
	t.Logf("store spans of the proxied turn: %v", names)
	find(under, "store.Append") // the turn committed with its reply
	call := find(under, "chat gpt-test")
	if call.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("upstream span kind %v", call.Kind)
	}
	checkAttrs(t, call, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test",
		"gen_ai.request.max_tokens": int64(50), "gen_ai.response.model": "gpt-test-2026", "gen_ai.response.id": "chatcmpl-otel-gpt-test",
		"gen_ai.usage.input_tokens": int64(21), "gen_ai.usage.output_tokens": int64(5), "gen_ai.usage.cache_read.input_tokens": int64(8),
		"chatmem.model.purpose": "proxy",
	})
	if ps := model.parents("gpt-test"); len(ps) != 1 || ps[0] != fmt.Sprintf("00-%s-%x-01", traceID, call.SpanId) {
		t.Errorf("upstream got traceparent %q, want the upstream span's 00-%s-%x-01", ps, traceID, call.SpanId)
	}

	// The REST context read, a trace of its own.
	read := find(spans, "GET /v1/conversations/{id}/context")
	if hex.EncodeToString(read.TraceId) == traceID || len(read.ParentSpanId) != 0 {
		t.Errorf("context read in trace %x under %x, want a new trace", read.TraceId, read.ParentSpanId)
	}
	asm = find(children(read), "chatmem.context")
	checkAttrs(t, asm, map[string]any{"chatmem.policy.budget": int64(100), "chatmem.window.sent": int64(2), "chatmem.window.seq_ranges": "1-2"})

	// The extractor's call, from the worker.
	var extract *tracepb.Span
	for _, s := range spans {
		if s.Name == "chat extract-test" {
			extract = s
		}
	}
	if extract == nil {
		t.Fatal("no span of the extractor's model call")
	}
	checkAttrs(t, extract, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "chatmem.model.purpose": "extractor",
		"gen_ai.request.model": "extract-test", "gen_ai.response.model": "extract-test-2026", "gen_ai.usage.input_tokens": int64(21), "gen_ai.usage.output_tokens": int64(5)})
	if ps := model.parents("extract-test"); len(ps) == 0 || !strings.Contains(ps[0], fmt.Sprintf("-%x-", extract.TraceId)) {
		t.Errorf("the extractor's request carried traceparent %q, want its span's trace %x", ps, extract.TraceId)
	}
}

// checkAttrs checks span's attributes against want (string, int64 or
// bool values).
func checkAttrs(t *testing.T, span *tracepb.Span, want map[string]any) {
	t.Helper()
	have := map[string]*commonpb.AnyValue{}
	for _, kv := range span.Attributes {
		have[kv.Key] = kv.Value
	}
	for k, w := range want {
		v, ok := have[k]
		var g any
		switch {
		case !ok:
		case v.GetValue() == nil:
		default:
			switch x := v.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				g = x.StringValue
			case *commonpb.AnyValue_IntValue:
				g = x.IntValue
			case *commonpb.AnyValue_BoolValue:
				g = x.BoolValue
			}
		}
		if g != w {
			t.Errorf("span %q: %s = %v, want %v", span.Name, k, g, w)
		}
	}
}

// TestMCPStdioOpenTelemetry: chatmem mcp over stdio, with OTEL_* pointing
// at a real OTLP receiver, exports a server span per request: a tool call
// named for its tool, continuing the trace context the client put in the
// request's _meta, with the context assembly under it; the spans are
// flushed when the client closes stdin.
func TestMCPStdioOpenTelemetry(t *testing.T) {
	var got receivedSpans
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", otlpHTTPReceiver(t, &got)+"/v1/traces")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp", "--data-dir", t.TempDir(), "--tenant", "acme", "--tokenizer", "estimate", "--log-level", "warn"}, inR, outW, io.Discard)
		outW.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "chatmem-test", Version: "v0"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A request without params reaches the tracing middleware as a typed
	// nil: it must be traced, not dereferenced.
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	var app mcpserver.AppendOutput
	callTool(t, cs, "append_messages", map[string]any{"conversation": "kavya", "messages": seedMessages()}, &app)
	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_context", Arguments: map[string]any{"conversation": "kavya", "budget": 40},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + clientSpan + "-01"}})
	if err != nil || res.IsError {
		t.Fatalf("get_context: %v %v", res, err)
	}
	cs.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chatmem mcp returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("chatmem mcp did not exit when the client closed stdin")
	}
	spans := got.all()
	var call *tracepb.Span
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
		if s.Name == "tools/call get_context" {
			call = s
		}
	}
	if call == nil {
		t.Fatalf("no span tools/call get_context among %v", names)
	}
	if hex.EncodeToString(call.TraceId) != traceID || hex.EncodeToString(call.ParentSpanId) != clientSpan || call.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("tools/call get_context: trace %x, parent %x, kind %v; want the client's trace and span, server", call.TraceId, call.ParentSpanId, call.Kind)
	}
	checkAttrs(t, call, map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_context", "network.transport": "pipe", "chatmem.tenant": "acme"})
	under := false
	for _, s := range spans {
		if s.Name == "chatmem.context" && string(s.ParentSpanId) == string(call.SpanId) {
			under = true
		}
	}
	if !under {
		t.Errorf("no chatmem.context span under the tool call among %v", names)
	}
	if !slices.Contains(names, "tools/call append_messages") {
		t.Errorf("no span for append_messages among %v", names)
	}
}
