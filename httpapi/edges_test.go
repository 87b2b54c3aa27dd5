package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// TestInputEdges sends, over every store, requests an attacker would try:
// invalid UTF-8 in each string, oversized parts of a message other than
// content, a reused idempotency key, malformed If-Match and
// Idempotency-Key headers, an unknown tokenizer on an existing
// conversation, bad facts and out-of-range times. Each is refused with its
// status and code, and the stored conversation (messages and facts) reads
// back exactly as before.
func TestInputEdges(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t)
			// The default limits, as a server runs with them.
			ts := newTestServer(t, newMemory(t, store, nil), Options{})
			testInputEdges(t, ts, store)
		})
	}
}

func testInputEdges(t *testing.T, ts *testServer, store chatmem.Store) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	const id = "edges"
	const msgs = "/v1/conversations/" + id + "/messages"
	const facts = "/v1/conversations/" + id + "/facts"
	_, err := c.Append(ctx, id, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello"}}, client.AppendOptions{Tokenizer: "estimate", IdempotencyKey: "req-1"})
	must(t, "Append(hello)", err)
	_, hasFacts := store.(chatmem.FactStore)
	if hasFacts {
		_, err = c.PatchFacts(ctx, id, []FactInput{{Key: "name", Value: "Ada", SourceSeq: 1}})
		must(t, "PatchFacts(name)", err)
	}

	body := func(messages ...string) string { return `{"messages":[` + strings.Join(messages, ",") + `]}` }
	user := `{"role":"user","content":"hi"}`
	withCall := func(id, name, args string) string {
		return fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"%s","type":"function","function":{"name":"%s","arguments":"%s"}}]}`, id, name, args)
	}
	big := func(n int) string { return strings.Repeat("x", n) }
	metaEntries := make([]string, 65)
	for i := range metaEntries {
		metaEntries[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	l := chatmem.DefaultLimits

	cases := []struct {
		name   string
		method string
		path   string
		header map[string]string
		body   string
		status int
		code   string
		msg    string // a substring the message must hold
		facts  bool   // needs a FactStore
	}{
		// Invalid UTF-8, wherever it is: 400, not stored as U+FFFD.
		{name: "UTF-8 content", body: body("{\"role\":\"user\",\"content\":\"a\xffb\"}"), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 content part", body: body("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xc3\"}]}"), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 name", body: body("{\"role\":\"user\",\"content\":\"hi\",\"name\":\"\xfe\"}"), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 metadata key", body: body("{\"role\":\"user\",\"content\":\"hi\",\"metadata\":{\"\xff\":\"v\"}}"), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 metadata value", body: body("{\"role\":\"user\",\"content\":\"hi\",\"metadata\":{\"k\":\"\xff\"}}"), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 tool call id", body: body(withCall("c\xff", "f", "{}")), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 function name", body: body(withCall("c", "f\xff", "{}")), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 arguments", body: body(withCall("c", "f", "\xff")), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "UTF-8 tool_call_id", body: body(withCall("c", "f", "{}"), "{\"role\":\"tool\",\"tool_call_id\":\"c\xff\",\"content\":\"42\"}"), status: 400, code: "invalid_request", msg: "UTF-8"},
		{name: "lone surrogate escape", body: body(`{"role":"user","content":"\ud800"}`), status: 400, code: "invalid_request", msg: "surrogate"},
		{name: "UTF-8 in the conversation ID", path: "/v1/conversations/%FF/messages", body: body(user), status: 400, code: "invalid_request", msg: "conversation id"},
		{name: "UTF-8 fact value", method: "PATCH", path: facts, body: "{\"facts\":[{\"key\":\"name\",\"value\":\"\xff\"}]}", status: 400, code: "invalid_request", msg: "UTF-8", facts: true},

		// Every part of a message is bounded.
		{name: "4 MB of metadata", header: nil, body: body(`{"role":"user","content":"hi","metadata":{"blob":"` + big(3<<20) + `"}}`), status: 413, code: "too_large", msg: "metadata"},
		{name: "metadata bytes", body: body(`{"role":"user","content":"hi","metadata":{"a":"` + big(l.MaxMetadataBytes) + `"}}`), status: 413, code: "too_large", msg: fmt.Sprint(l.MaxMetadataBytes)},
		{name: "metadata entries", body: body(`{"role":"user","content":"hi","metadata":{` + strings.Join(metaEntries, ",") + `}}`), status: 413, code: "too_large", msg: "metadata"},
		{name: "metadata key", body: body(`{"role":"user","content":"hi","metadata":{"` + big(l.MaxMetadataKeyBytes+1) + `":"v"}}`), status: 413, code: "too_large", msg: "metadata key"},
		{name: "name", body: body(`{"role":"user","content":"hi","name":"` + big(l.MaxNameBytes+1) + `"}`), status: 413, code: "too_large", msg: "name"},
		{name: "tool call id", body: body(withCall(big(l.MaxNameBytes+1), "f", "{}")), status: 413, code: "too_large", msg: "tool call 0 id"},
		{name: "arguments", body: body(withCall("c", "f", big(l.MaxArgumentsBytes+1))), status: 413, code: "too_large", msg: "arguments"},
		{name: "content parts", body: body(`{"role":"user","content":[{"type":"text","text":"` + big(l.MaxContentBytes/2) + `"},{"type":"text","text":"` + big(l.MaxContentBytes/2) + `"}]}`), status: 413, code: "too_large", msg: "content"},

		// The idempotency key names one request.
		{name: "key reused with another body", header: map[string]string{"Idempotency-Key": "req-1"}, body: body(`{"role":"user","content":"hello, edited"}`), status: 422, code: "idempotency_key_reused", msg: "req-1"},

		// Headers.
		{name: "If-Match +1", header: map[string]string{"If-Match": "+1"}, body: body(user), status: 400, code: "invalid_request", msg: "If-Match"},
		{name: "If-Match quoted +1", header: map[string]string{"If-Match": `"+1"`}, body: body(user), status: 400, code: "invalid_request", msg: "If-Match"},
		{name: "If-Match inner space", header: map[string]string{"If-Match": `" 1"`}, body: body(user), status: 400, code: "invalid_request", msg: "If-Match"},
		{name: "If-Match two numbers", header: map[string]string{"If-Match": `1 1`}, body: body(user), status: 400, code: "invalid_request", msg: "If-Match"},
		{name: "If-Match empty", header: map[string]string{"If-Match": ""}, body: body(user), status: 400, code: "invalid_request", msg: "If-Match"},
		{name: "If-Match empty tag", header: map[string]string{"If-Match": `""`}, body: body(user), status: 400, code: "invalid_request", msg: "If-Match"},
		{name: "Idempotency-Key empty", header: map[string]string{"Idempotency-Key": ""}, body: body(user), status: 400, code: "invalid_request", msg: "Idempotency-Key"},

		// An unknown tokenizer is a mistake on an existing conversation too.
		{name: "unknown tokenizer, existing conversation", body: `{"messages":[` + user + `],"tokenizer":"nope"}`, status: 400, code: "invalid_request", msg: "nope"},

		// Facts.
		{name: "fact source_seq past the last message", method: "PATCH", path: facts, body: `{"facts":[{"key":"city","value":"Paris","source_seq":2}]}`, status: 400, code: "invalid_request", msg: "source_seq", facts: true},
		{name: "fact key twice (PATCH)", method: "PATCH", path: facts, body: `{"facts":[{"key":"city","value":"Paris"},{"key":"city","value":"Rome"}]}`, status: 400, code: "invalid_request", msg: "city", facts: true},
		{name: "fact key twice (PUT)", method: "PUT", path: facts, body: `{"facts":[{"key":"name","value":"Bob"},{"key":"name","value":"Eve"}]}`, status: 400, code: "invalid_request", msg: "name", facts: true},

		// Times every store keeps, and only those.
		{name: "created_at before 1970", body: body(`{"role":"user","content":"hi","created_at":"1969-12-31T23:59:59Z"}`), status: 400, code: "invalid_request", msg: "created_at"},
		{name: "created_at 2262", body: body(`{"role":"user","content":"hi","created_at":"2262-01-01T00:00:00Z"}`), status: 400, code: "invalid_request", msg: "created_at"},
		{name: "created_at 9999", body: body(`{"role":"user","content":"hi","created_at":"9999-12-31T23:59:59Z"}`), status: 400, code: "invalid_request", msg: "created_at"},
	}

	before := readBack(t, c, id, hasFacts)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.facts && !hasFacts {
				t.Skip("the store keeps no facts")
			}
			method, path := tc.method, tc.path
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = msgs
			}
			r := ts.raw(t, method, path, acmeKey, tc.header, tc.body)
			e := r.apiError()
			if r.status != tc.status || e.Code != tc.code {
				t.Errorf("%s %.60s = %d %q (%.200s), want %d %q", method, path, r.status, e.Code, e.Message, tc.status, tc.code)
			}
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %.200q does not mention %q", e.Message, tc.msg)
			}
			if after := readBack(t, c, id, hasFacts); !reflect.DeepEqual(after, before) {
				t.Errorf("stored data changed:\n before %+v\n after  %+v", before, after)
			}
		})
	}

	// The edges that are accepted: the same key and body replay, and the
	// range's ends are kept exactly, in UTC, to the microsecond.
	r := ts.raw(t, "POST", msgs, acmeKey, map[string]string{"Idempotency-Key": "req-1"}, body(`{"role":"user","content":"hello"}`))
	if r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("same key, same body = %d, Idempotent-Replayed %q; want 200 true", r.status, r.header.Get("Idempotent-Replayed"))
	}
	res, err := c.Append(ctx, id, []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "first", CreatedAt: chatmem.MinTime},
		{Role: chatmem.RoleUser, Content: "last", CreatedAt: chatmem.MaxTime.Add(-time.Microsecond)},
		{Role: chatmem.RoleUser, Content: "zoned", CreatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("+02", 7200))},
	}, client.AppendOptions{})
	must(t, "Append(range ends)", err)
	want := []time.Time{chatmem.MinTime, chatmem.MaxTime.Add(-time.Microsecond), time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC)}
	page, err := c.Messages(ctx, id, res.Messages[0].Seq-1, 10)
	must(t, "Messages", err)
	for i, m := range page.Messages {
		if !m.CreatedAt.Equal(want[i]) || res.Messages[i].CreatedAt != m.CreatedAt {
			t.Errorf("message %d created_at: appended %v, read back %v; want %v", i, res.Messages[i].CreatedAt, m.CreatedAt, want[i])
		}
	}
}

// stored is what a conversation holds, as the API reads it back.
type stored struct {
	Conversation Conversation
	Messages     []chatmem.Message
	Facts        []chatmem.Fact
}

func readBack(t *testing.T, c *client.Client, id string, facts bool) stored {
	t.Helper()
	var s stored
	var err error
	s.Conversation, err = c.Conversation(t.Context(), id)
	must(t, "Conversation", err)
	page, err := c.Messages(t.Context(), id, 0, 1000)
	must(t, "Messages", err)
	s.Messages = page.Messages
	if facts {
		s.Facts, err = c.Facts(t.Context(), id)
		must(t, "Facts", err)
	}
	return s
}

// TestBodyReadTimeout checks that a body that does not arrive within the
// server's ReadTimeout is answered 408 request_timeout in the JSON error
// shape, naming no socket address, and that nothing is stored.
func TestBodyReadTimeout(t *testing.T) {
	mem := newMemory(t, openSQLite(t), nil)
	api, err := New(mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api)
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The headers promise 100 bytes; 10 come, then nothing.
	fmt.Fprintf(conn, "POST /v1/conversations/slow/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"messages")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	var e errorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("response body is not the JSON error shape: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || e.Error.Code != "request_timeout" {
		t.Errorf("slow body = %d %q (%s), want 408 request_timeout", resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	host, _, _ := net.SplitHostPort(srv.Listener.Addr().String())
	if strings.Contains(e.Error.Message, host) || strings.Contains(e.Error.Message, "tcp") {
		t.Errorf("error message %q carries a socket address", e.Error.Message)
	}
	if _, err := mem.Store().Conversation(t.Context(), chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "slow"}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("conversation after the timed-out append: %v, want ErrNotFound", err)
	}
}

// TestHeaderTooLarge checks that headers over Limits.MaxHeaderBytes (but
// under net/http's own bound) are answered 431 in the JSON error shape.
func TestHeaderTooLarge(t *testing.T) {
	ts := newTestServer(t, newMemory(t, openSQLite(t), nil), Options{Keys: []Key{}})
	r := ts.raw(t, "GET", "/v1/conversations", "", map[string]string{"X-Padding": strings.Repeat("p", DefaultMaxHeaderBytes)}, "")
	e := r.apiError()
	if r.status != http.StatusRequestHeaderFieldsTooLarge || e.Code != "header_too_large" || !strings.Contains(e.Message, fmt.Sprint(DefaultMaxHeaderBytes)) {
		t.Errorf("oversized headers = %d %q (%s), want 431 header_too_large naming the limit", r.status, e.Code, e.Message)
	}
	if r := ts.raw(t, "GET", "/v1/conversations", "", map[string]string{"X-Padding": strings.Repeat("p", DefaultMaxHeaderBytes/2)}, ""); r.status != http.StatusOK {
		t.Errorf("headers within the limit = %d, want 200", r.status)
	}
}
