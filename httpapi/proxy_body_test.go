package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/jsonstr"
	"github.com/chatmem/chatmem/memstore"
)

// TestProxyBodySplice: with a conversation, the upstream gets the client's
// body byte for byte (field order, spacing, unknown fields) but for the
// messages value.
func TestProxyBodySplice(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	prefix := "{\n  \"temperature\" : 0.25,\"z_vendor\":{\"b\":[1, 2]},\n  \"messages\" :  "
	suffix := " ,\n  \"model\":\"gpt-4o-mini\" , \"a\":\"\\u00e9\"\n}\n"
	for i, content := range []string{"hi", "and <now> & \"then\"?"} {
		msgs := `[{"role":"user","content":` + string(jsonstr.Append(nil, content)) + `}]`
		status, _, resp := env.post(t, map[string]string{"X-Chatmem-Conversation": "s1"}, prefix+msgs+suffix)
		if status != 200 {
			t.Fatalf("turn %d: %d %s", i+1, status, resp)
		}
		raw := string(env.up.last(t).raw)
		if !strings.HasPrefix(raw, prefix) || !strings.HasSuffix(raw, suffix) {
			t.Fatalf("turn %d reached the upstream as\n%s\nwant the client's body around the messages", i+1, raw)
		}
	}
	wantBrief(t, "messages", brief(env.up.last(t).messages(t)), []string{"user:hi", "assistant:answer 1", `user:and <now> & "then"?`})
}

func TestParseChatRequest(t *testing.T) {
	for _, tc := range []struct {
		body     string
		messages string // "": none
		stream   bool
		err      string // "": accepted
	}{
		{body: `{"messages":[]}`, messages: `[]`},
		{body: ` { "stream" : true , "messages" : [ {"role":"user"} ] } `, messages: `[ {"role":"user"} ]`, stream: true},
		{body: `{"stream":null,"model":"m"}`},
		{body: `{"a":1,"a":2,"messages":[1]}`, messages: `[1]`},
		{body: `{"messages":[],"messages":[]}`, err: "messages is given twice"},
		{body: `{"stream":true,"stream":false}`, err: "stream is given twice"},
		{body: `{"stream":"yes"}`, err: "stream must be true or false"},
		{body: `{"messages":[]} {}`, err: "must be a JSON object"},
		{body: `{"messages":[]}]`, err: "must be a JSON object"},
		{body: `[]`, err: "must be a JSON object"},
		{body: `null`, err: "must be a JSON object"},
		{body: `{"messages":[}`, err: "must be a JSON object"},
		{body: ``, err: "must be a JSON object"},
	} {
		r, err := parseChatRequest([]byte(tc.body))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, chatmem.ErrInvalid) {
				t.Errorf("parseChatRequest(%s) = %v, want ErrInvalid %q", tc.body, err, tc.err)
			}
		case err != nil:
			t.Errorf("parseChatRequest(%s) = %v", tc.body, err)
		case string(r.messages) != tc.messages || r.stream != tc.stream:
			t.Errorf("parseChatRequest(%s) = messages %s, stream %v; want %s, %v", tc.body, r.messages, r.stream, tc.messages, tc.stream)
		case r.messages != nil && string(r.withMessages([]byte("X"), "")) != strings.Replace(tc.body, tc.messages, "X", 1):
			t.Errorf("withMessages of %s = %s", tc.body, r.withMessages([]byte("X"), ""))
		}
	}
}

// appendOpenAIMessageCases are messages whose direct encoding must match
// MarshalOpenAIMessage's.
var appendOpenAIMessageCases = []chatmem.Message{
	{Role: chatmem.RoleUser, Content: "hi"},
	{Role: chatmem.RoleUser, Content: "", Name: "kavya"},
	{Role: chatmem.RoleTool, Content: "{\"ok\":true}", ToolCallID: "call_1"},
	{Role: chatmem.RoleAssistant, Content: "<b>&amp;</b> \"q\" \\ \b\f\n\r\t \x00\x1f\x7f é 日本 \u2028\u2029 😀 \xff\xfe bad"},
	{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "c1", Function: chatmem.FunctionCall{Name: "f", Arguments: "{}"}}}},
	{Role: chatmem.RoleUser, Content: "x", Seq: 3, Tokens: 9, Metadata: map[string]string{"a": "b"}, CreatedAt: time.Unix(1, 0)},
}

func TestAppendOpenAIMessage(t *testing.T) {
	for _, m := range appendOpenAIMessageCases {
		checkAppendOpenAIMessage(t, m)
	}
}

func FuzzAppendOpenAIMessage(f *testing.F) {
	for _, m := range appendOpenAIMessageCases {
		f.Add(string(m.Role), m.Content, m.Name, m.ToolCallID)
	}
	f.Fuzz(func(t *testing.T, role, content, name, toolCallID string) {
		checkAppendOpenAIMessage(t, chatmem.Message{Role: chatmem.Role(role), Content: content, Name: name, ToolCallID: toolCallID})
	})
}

func checkAppendOpenAIMessage(t *testing.T, m chatmem.Message) {
	t.Helper()
	want, werr := MarshalOpenAIMessage(m)
	got, err := appendOpenAIMessage([]byte("[,"), m)
	if err != nil || werr != nil || !bytes.Equal(got, append([]byte("[,"), want...)) {
		t.Errorf("appendOpenAIMessage(%+v) = %s, %v\nwant (MarshalOpenAIMessage) %s, %v", m, got[min(2, len(got)):], err, want, werr)
	}
}

// TestProxyRelayHeaders: the upstream's processing time, version, rate
// limits and retry hints reach the client, on answers and on errors; its
// request ID as X-Upstream-Request-Id beside the server's own; nothing
// else of its headers.
func TestProxyRelayHeaders(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	env.up.header = http.Header{
		"X-Request-Id":                   {"req_upstream_1"},
		"Openai-Processing-Ms":           {"231"},
		"Openai-Version":                 {"2020-10-01"},
		"Openai-Organization":            {"operator-org"},
		"X-Ratelimit-Remaining-Requests": {"499"},
		"X-Ratelimit-Reset-Tokens":       {"6ms"},
		"Set-Cookie":                     {"__cf_bm=x"},
	}
	want := map[string]string{
		"X-Upstream-Request-Id": "req_upstream_1", "Openai-Processing-Ms": "231", "Openai-Version": "2020-10-01",
		"X-Ratelimit-Remaining-Requests": "499", "X-Ratelimit-Reset-Tokens": "6ms", "Openai-Organization": "", "Set-Cookie": "",
	}
	check := func(what string, h http.Header) {
		t.Helper()
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", what, k, got, v)
			}
		}
		if id := h.Get("X-Request-Id"); id == "" || id == "req_upstream_1" {
			t.Errorf("%s: X-Request-Id = %q, want the server's own", what, id)
		}
	}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, conv := range []string{"", "r1"} {
		status, h, _ := env.post(t, map[string]string{"X-Chatmem-Conversation": conv}, body)
		if status != 200 {
			t.Fatalf("conversation %q: %d", conv, status)
		}
		check("conversation "+conv, h)
	}
	env.up.header.Set("Retry-After", "7")
	env.up.push(fakeReply{status: 429, body: `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`})
	status, h, _ := env.post(t, map[string]string{"X-Chatmem-Conversation": "r1"}, body)
	if status != 429 || h.Get("Retry-After") != "7" {
		t.Errorf("upstream 429: %d, Retry-After %q", status, h.Get("Retry-After"))
	}
	check("upstream 429", h)
}

// slowReplies is a store whose appends of a reply take a while.
type slowReplies struct {
	chatmem.Store
	delay time.Duration
	mu    sync.Mutex
	slow  int // reply appends started
}

func (s *slowReplies) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	if msgs[len(msgs)-1].Role == chatmem.RoleAssistant {
		s.mu.Lock()
		s.slow++
		s.mu.Unlock()
		time.Sleep(s.delay)
	}
	return s.Store.Append(ctx, key, msgs, opts)
}

// TestProxyNextTurnWaits: with a store slow to take a reply, the
// conversation's next turn, sent at once on another connection, still
// finds the reply: it was stored before the response went out.
func TestProxyNextTurnWaits(t *testing.T) {
	store := &slowReplies{Store: memstore.New(), delay: 100 * time.Millisecond}
	env := newProxyEnv(t, proxyConfig{store: store})
	for i, content := range []string{"one", "two", "three"} {
		// A new connection for every turn: nothing orders them but the
		// proxy.
		c := env.client("n1", option.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
		_, err := c.Chat.Completions.New(t.Context(), userTurn(content))
		pmust(t, "turn "+content, err)
		if i == 0 {
			continue
		}
		got := brief(env.up.last(t).messages(t))
		if len(got) != 2*i+1 || got[len(got)-2] != "assistant:answer "+string(rune('0'+i)) {
			t.Fatalf("turn %d reached the upstream with %q, want the reply before it", i+1, got)
		}
	}
	wantBrief(t, "stored", brief(env.stored(t, "n1")),
		[]string{"user:one", "assistant:answer 1", "user:two", "assistant:answer 2", "user:three", "assistant:answer 3"})
	if store.slow != 3 {
		t.Errorf("%d slow reply appends, want 3", store.slow)
	}
}

// TestWriteOpenAIErrorAuth: the errors answered before a route (a bad key,
// a tenant over its rate) come out of writeOpenAIError in the OpenAI shape
// with the headers writeError gives them.
func TestWriteOpenAIErrorAuth(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct {
		err        error
		status     int
		typ, code  string
		wantHeader string
	}{
		{fmt.Errorf("%w: bad key", ErrUnauthorized), 401, "authentication_error", "unauthorized", "WWW-Authenticate"},
		{fmt.Errorf("%w: over 5 requests per second", ErrRateLimited), 429, "rate_limit_error", "rate_limited", ""},
	} {
		rec := httptest.NewRecorder()
		s.writeOpenAIError(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), tc.err)
		var body struct {
			Error map[string]*string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: %s", tc.err, rec.Body)
		}
		e := body.Error
		if rec.Code != tc.status || e["type"] == nil || *e["type"] != tc.typ || e["code"] == nil || *e["code"] != tc.code ||
			e["message"] == nil || *e["message"] != tc.err.Error() {
			t.Errorf("%v: %d %s, want %d type %s code %s", tc.err, rec.Code, rec.Body, tc.status, tc.typ, tc.code)
		}
		if _, ok := e["param"]; !ok {
			t.Errorf("%v: %s has no param", tc.err, rec.Body)
		}
		if tc.wantHeader != "" && rec.Header().Get(tc.wantHeader) == "" {
			t.Errorf("%v: no %s header", tc.err, tc.wantHeader)
		}
	}
}
