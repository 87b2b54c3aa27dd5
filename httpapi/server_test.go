package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
)

func TestParseKeys(t *testing.T) {
	hash := HashKey("k2")
	keys, err := ParseKeys(" acme:k1 , globex:" + hash + ",initech:a:b")
	must(t, "ParseKeys", err)
	want := []Key{{Tenant: "acme", Key: "k1"}, {Tenant: "globex", Hash: hash}, {Tenant: "initech", Key: "a:b"}}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("ParseKeys = %v, want %v", keys, want)
	}
	if keys, err := ParseKeys("  "); err != nil || keys != nil {
		t.Errorf("ParseKeys(blank) = %v, %v; want none", keys, err)
	}
	for _, bad := range []string{
		"acme", "acme:", ":k1", "ac me:k1", "acme:k1,", "acme:k1,,globex:k2", "bad/tenant:k",
		"acme:sha256:xyz", "acme:sha256:" + strings.Repeat("a", 63), "acme:k1,globex:k1",
		"acme:k1,globex:" + HashKey("k1"),
	} {
		keys, err := ParseKeys(bad)
		if !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("ParseKeys(%q) = %v, %v; want ErrInvalid", bad, keys, err)
			continue
		}
		if strings.Contains(err.Error(), "k1") {
			t.Errorf("ParseKeys(%q) error %q repeats the key", bad, err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	mem := newMemory(t, memstore.New(), nil)
	for name, opts := range map[string]Options{
		"key and hash":    {Keys: []Key{{Tenant: "a", Key: "k", Hash: HashKey("k")}}},
		"neither":         {Keys: []Key{{Tenant: "a"}}},
		"bad tenant":      {Keys: []Key{{Tenant: "", Key: "k"}}},
		"key with space":  {Keys: []Key{{Tenant: "a", Key: "k k"}}},
		"negative limits": {Limits: Limits{MaxBodyBytes: -1}},
	} {
		if _, err := New(mem, opts); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("New(%s) = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := New(nil, Options{}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("New(nil Memory) = %v, want ErrInvalid", err)
	}
	reg := prometheus.NewRegistry()
	if _, err := New(mem, Options{Registerer: reg}); err != nil {
		t.Fatalf("New(registry): %v", err)
	}
	if _, err := New(mem, Options{Registerer: reg}); err == nil {
		t.Error("New on a registry that holds another server's metrics succeeded, want an error")
	}
}

// TestNoKeys checks that without keys every request is the default tenant.
func TestNoKeys(t *testing.T) {
	store := memstore.New()
	ts := newTestServer(t, newMemory(t, store, nil), Options{Keys: []Key{}})
	_, err := ts.client("").Append(t.Context(), "c1", seed.History(), client.AppendOptions{})
	must(t, "Append without a key", err)
	if _, err := store.Conversation(t.Context(), chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "c1"}); err != nil {
		t.Errorf("conversation not stored under the default tenant: %v", err)
	}
	// A key sent anyway changes nothing.
	page, err := ts.client("whatever").List(t.Context(), "", 0)
	if err != nil || len(page.Conversations) != 1 {
		t.Errorf("List with an unconfigured key = %v, %v; want c1", page, err)
	}
}

// TestOperations checks /healthz, /readyz, /metrics and /openapi.json, which
// need no key, and the metrics the other requests leave.
func TestOperations(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memstore.New(), nil), Options{})
	c := ts.client(acmeKey)
	ctx := t.Context()
	must(t, "Health", ts.client("").Health(ctx))
	must(t, "Ready", ts.client("").Ready(ctx))
	for _, p := range []string{"/healthz", "/readyz"} {
		r := ts.raw(t, "GET", p, "", nil, "")
		if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
			t.Errorf("GET %s = %d %s", p, r.status, r.body)
		}
	}

	_, err := c.Append(ctx, "m", seed.History(), client.AppendOptions{})
	must(t, "Append", err)
	_, err = c.Context(ctx, "m", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40})
	must(t, "Context", err)
	_, err = c.Conversation(ctx, "missing")
	wantAPIError(t, "Conversation(missing)", err, 404, "not_found")
	ts.raw(t, "GET", "/v1/nowhere", "", nil, "")

	r := ts.raw(t, "GET", "/metrics", "", nil, "")
	if r.status != 200 {
		t.Fatalf("GET /metrics = %d", r.status)
	}
	m := string(r.body)
	for _, want := range []string{
		`chatmem_http_requests_total{method="POST",route="/v1/conversations/{id}/messages",status="201"} 1`,
		`chatmem_http_requests_total{method="GET",route="/v1/conversations/{id}",status="404"} 1`,
		`chatmem_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`chatmem_http_requests_total{method="GET",route="/healthz",status="200"} 2`,
		`chatmem_http_request_duration_seconds_count{method="GET",route="/v1/conversations/{id}/context"} 1`,
		`chatmem_store_duration_seconds_count{op="append"} 1`,
		`chatmem_store_duration_seconds_count{op="context"} 1`,
		`chatmem_store_duration_seconds_count{op="conversation"} 1`,
		`chatmem_worker_queue_depth 0`,
		`chatmem_context_tokens_sum{policy="token_budget"} 36`,
		`chatmem_context_tokens_count{policy="token_budget"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	r = ts.raw(t, "GET", "/openapi.json", "", nil, "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || string(r.body) != string(openAPI) {
		t.Errorf("GET /openapi.json = %d %s, %d bytes; want the embedded document", r.status, r.header.Get("Content-Type"), len(r.body))
	}
	r = ts.raw(t, "HEAD", "/healthz", "", nil, "")
	if r.status != 200 {
		t.Errorf("HEAD /healthz = %d", r.status)
	}
}

// downStore is a store whose backend is unreachable.
type downStore struct{ chatmem.Store }

func (downStore) Ping(context.Context) error {
	return fmt.Errorf("%w: dial tcp 10.9.8.7:6379: connection refused", chatmem.ErrUnavailable)
}

func (downStore) Conversation(context.Context, chatmem.Key) (chatmem.Conversation, error) {
	return chatmem.Conversation{}, errors.New("disk on fire at /var/lib/secret")
}

func (downStore) Range(context.Context, chatmem.Key, int64, int) ([]chatmem.Message, error) {
	panic("range exploded")
}

func TestFailures(t *testing.T) {
	ts := newTestServer(t, newMemory(t, downStore{memstore.New()}, nil), Options{})
	err := ts.client("").Ready(t.Context())
	e := wantAPIError(t, "Ready(down)", err, http.StatusServiceUnavailable, "unavailable")
	if !errors.Is(err, chatmem.ErrUnavailable) || strings.Contains(e.Message, "10.9.8.7") {
		t.Errorf("Ready(down) = %v; want ErrUnavailable without the backend's details", err)
	}
	// An unmapped error is a 500 with no details for the client, and the
	// details in the log.
	_, err = ts.client(acmeKey).Conversation(t.Context(), "c")
	e = wantAPIError(t, "Conversation(broken store)", err, http.StatusInternalServerError, "internal")
	if strings.Contains(e.Message, "fire") || !strings.Contains(e.Message, e.RequestID) || errors.Unwrap(err) != nil {
		t.Errorf("500 message %q: want no details, the request ID %s, and no sentinel", e.Message, e.RequestID)
	}
	if log := ts.log.String(); !strings.Contains(log, "disk on fire") || !strings.Contains(log, e.RequestID) {
		t.Errorf("log lacks the 500's details under its request ID:\n%s", log)
	}
	// A panicking handler is a 500, logged, and the server goes on.
	_, err = ts.client(acmeKey).Messages(t.Context(), "c", 0, 0)
	wantAPIError(t, "Messages(panicking store)", err, http.StatusInternalServerError, "internal")
	if log := ts.log.String(); !strings.Contains(log, "range exploded") {
		t.Errorf("log lacks the panic:\n%s", log)
	}
	must(t, "Health after a panic", ts.client("").Health(t.Context()))
	// Unreachable servers are ErrUnavailable for the client too.
	ts.Close()
	if err := ts.client("").Health(t.Context()); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Health(closed server) = %v, want ErrUnavailable", err)
	}
}

// TestRequestLog checks the request ID and the log line: its fields, and
// that no message content or key is in it.
func TestRequestLog(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memstore.New(), nil), Options{})
	secret := "my card number is 4111-1111"
	r := ts.raw(t, "POST", "/v1/conversations/c/messages", acmeKey, map[string]string{"X-Request-Id": "trace-123"},
		`{"messages":[{"role":"user","content":"`+secret+`"}]}`)
	if r.status != 201 || r.header.Get("X-Request-Id") != "trace-123" {
		t.Fatalf("POST = %d, X-Request-Id %q; want 201, trace-123", r.status, r.header.Get("X-Request-Id"))
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "a/b<c>"} {
		r := ts.raw(t, "GET", "/healthz", "", map[string]string{"X-Request-Id": bad}, "")
		if got := r.header.Get("X-Request-Id"); got == bad || got == "" {
			t.Errorf("X-Request-Id %q echoed as %q, want a generated one", bad, got)
		}
	}
	ts.raw(t, "GET", "/v1/conversations/c", "wrong-key-value", nil, "")

	var line map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(ts.log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["request_id"] == "trace-123" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no log line with request_id trace-123:\n%s", ts.log.String())
	}
	for k, want := range map[string]any{"method": "POST", "route": "/v1/conversations/{id}/messages", "status": 201.0, "tenant": "acme", "msg": "http request"} {
		if line[k] != want {
			t.Errorf("log %s = %v, want %v", k, line[k], want)
		}
	}
	if _, ok := line["duration"]; !ok {
		t.Error("log line has no duration")
	}
	log := ts.log.String()
	for _, leak := range []string{secret, acmeKey, "wrong-key-value"} {
		if strings.Contains(log, leak) {
			t.Errorf("log contains %q", leak)
		}
	}
}

// TestSummary serves a summary written by the offline summarizer.
func TestSummary(t *testing.T) {
	mem := newMemory(t, memstore.New(), func(o *chatmem.Options) {
		o.Summarizer = offline.NewSummarizer(offline.Options{})
		o.Sync = true
		o.Summary = chatmem.SummaryOptions{Trigger: 30, Target: 10}
	})
	ts := newTestServer(t, mem, Options{})
	c := ts.client(acmeKey)
	ctx := t.Context()
	_, err := c.Append(ctx, "s", seed.History(), client.AppendOptions{})
	must(t, "Append", err)
	sum, err := c.Summary(ctx, "s")
	must(t, "Summary", err)
	if sum.Text == "" || sum.CoversSeq == 0 || sum.Summarizer != "offline" || sum.Tokens == 0 {
		t.Errorf("Summary = %+v; want text, covers_seq, summarizer offline, tokens", sum)
	}
	w, err := c.Context(ctx, "s", client.ContextParams{Policy: chatmem.PolicySummaryBuffer, Budget: 200})
	must(t, "Context(summary_buffer)", err)
	if w.Summary == nil || w.Summary.CoversSeq != sum.CoversSeq || w.Parts.Summary == 0 {
		t.Errorf("Context(summary_buffer) summary = %+v, parts %+v; want the summary sent", w.Summary, w.Parts)
	}
	_, err = ts.client(globexKey).Summary(ctx, "s")
	wantAPIError(t, "globex Summary(acme's)", err, 404, "not_found")
}

// TestErrorTable: the server answers each error of the table with its
// status and code, and the Go client's *Error for that code unwraps to it,
// so errors.Is works on both sides of the wire.
func TestErrorTable(t *testing.T) {
	for _, e := range client.ErrorCodes() {
		status, code := classify(fmt.Errorf("wrapped: %w", e.Err))
		if status != e.Status || code != e.Code {
			t.Errorf("classify(%v) = %d %s, want %d %s", e.Err, status, code, e.Status, e.Code)
		}
		if err := error(&client.Error{Status: status, Code: code}); !errors.Is(err, e.Err) {
			t.Errorf("the client's error for %d %s unwraps to %v, want %v", status, code, errors.Unwrap(err), e.Err)
		}
	}
	if status, code := classify(errors.New("disk on fire")); status != 500 || code != codeInternal {
		t.Errorf("classify(an unmapped error) = %d %s, want 500 %s", status, code, codeInternal)
	}
}

// A client that disconnects is logged as 499 at info level, not as a
// server error.
func TestClientGoneIsNotAnError(t *testing.T) {
	var logs bytes.Buffer // the handler runs in this goroutine
	srv, err := New(newMemory(t, memstore.New(), nil), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodGet, "http://localhost/v1/conversations/c1", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != statusClientClosed || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("status %d, log %q; want 499 logged below error", rec.Code, logs.String())
	}
}

// Each tenant has its own bucket: one over its rate gets 429 with
// Retry-After, another tenant is not affected.
func TestRateLimitPerTenant(t *testing.T) {
	keys, err := ParseKeys("acme:k1,globex:k2")
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(newMemory(t, memstore.New(), nil), Options{Keys: keys, RateLimit: RateLimit{PerSecond: 0.5, Burst: 2}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/conversations", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec
	}
	for i := range 2 {
		if rec := get("k1"); rec.Code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := get("k1")
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"rate_limited"`) || rec.Header().Get("Retry-After") != "2" {
		t.Errorf("over the rate: %d, Retry-After %q, %s; want 429 rate_limited, Retry-After 2", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := get("k2"); rec.Code != http.StatusOK {
		t.Errorf("another tenant: %d, want 200", rec.Code)
	}
	if rec := get("nope"); rec.Code != http.StatusUnauthorized {
		t.Errorf("a wrong key is refused before the limiter: %d", rec.Code)
	}
	if _, err := New(newMemory(t, memstore.New(), nil), Options{RateLimit: RateLimit{PerSecond: -1}}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("negative rate: %v", err)
	}
}
