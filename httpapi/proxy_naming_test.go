package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// metricsText returns the server's /metrics page.
func (e *proxyEnv) metricsText() string {
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func (e *proxyEnv) postQuery(t *testing.T, query string, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	return e.send(t, http.MethodPost, "/v1/chat/completions?"+query, proxyKey, header, body)
}

// TestProxyNaming names the conversation without the header: the body's
// metadata.conversation_id (which the upstream does not get) and the
// ?conversation= query parameter, the header first, then the metadata.
func TestProxyNaming(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	withMeta := func(meta string, msgs ...string) string {
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(reconcileBody(t, msgs...)), &m)
		m["metadata"] = json.RawMessage(meta)
		b, _ := json.Marshal(m)
		return string(b)
	}

	status, h, body := env.post(t, nil, withMeta(`{"conversation_id":"m1"}`, "u:hi"))
	if status != http.StatusOK || h.Get(headerConversation) != "m1" {
		t.Fatalf("metadata: status %d, %s %q: %s", status, headerConversation, h.Get(headerConversation), body)
	}
	if got := string(env.up.last(t).body["metadata"]); got != "null" {
		t.Errorf("the upstream got metadata %s, want null (conversation_id is chatmem's)", got)
	}
	status, _, body = env.post(t, nil, withMeta(`{"conversation_id":"m1","app":"shop"}`, "u:hi", "a:answer 1", "u:more"))
	if status != http.StatusOK {
		t.Fatalf("metadata, turn 2: status %d: %s", status, body)
	}
	if got := string(env.up.last(t).body["metadata"]); got != `{"app":"shop"}` {
		t.Errorf("the upstream got metadata %s, want the client's other keys", got)
	}
	wantBrief(t, "m1", brief(env.stored(t, "m1")), []string{"user:hi", "assistant:answer 1", "user:more", "assistant:answer 2"})

	status, h, body = env.postQuery(t, "conversation=q1", nil, reconcileBody(t, "u:hello"))
	if status != http.StatusOK || h.Get(headerConversation) != "q1" {
		t.Fatalf("query: status %d, %s %q: %s", status, headerConversation, h.Get(headerConversation), body)
	}
	wantBrief(t, "q1", brief(env.stored(t, "q1")), []string{"user:hello", "assistant:answer 3"})

	// The header, then the metadata, then the query.
	env.postQuery(t, "conversation=q2", map[string]string{headerConversation: "h2"}, withMeta(`{"conversation_id":"m2"}`, "u:one"))
	env.postQuery(t, "conversation=q2", nil, withMeta(`{"conversation_id":"m2"}`, "u:two"))
	wantBrief(t, "h2", brief(env.stored(t, "h2")), []string{"user:one", "assistant:answer 4"})
	wantBrief(t, "m2", brief(env.stored(t, "m2")), []string{"user:two", "assistant:answer 5"})
	if n := len(env.stored(t, "q2")); n != 0 {
		t.Errorf("q2 holds %d messages, want none", n)
	}

	for _, tc := range []struct{ query, meta, want string }{
		{"", `{"conversation_id":"no spaces"}`, "metadata.conversation_id"},
		{"", `["not","an","object"]`, "metadata must be an object of strings"},
		{"conversation=bad%2Fid", "", "query parameter conversation"},
	} {
		b := reconcileBody(t, "u:x")
		if tc.meta != "" {
			b = withMeta(tc.meta, "u:x")
		}
		status, _, body := env.postQuery(t, tc.query, nil, b)
		if status != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: status %d %s, want 400 naming %q", tc.query, tc.meta, status, body, tc.want)
		}
	}
}

// TestProxyUnnamed: a request that names no conversation goes without
// memory, says so and is counted; under UnnamedRefuse it is refused.
func TestProxyUnnamed(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	status, h, body := env.post(t, nil, reconcileBody(t, "u:hi"))
	if status != http.StatusOK || h.Get(headerMemory) != "off" {
		t.Fatalf("status %d, %s %q, want 200 and off: %s", status, headerMemory, h.Get(headerMemory), body)
	}
	if m := env.metricsText(); !strings.Contains(m, `chatmem_proxy_unnamed_total{outcome="forwarded"} 1`) {
		t.Errorf("metrics lack the unnamed request:\n%s", grepLines(m, "chatmem_proxy"))
	}
	status, h, _ = env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, "u:hi"))
	if status != http.StatusOK || h.Get(headerMemory) != "" {
		t.Errorf("a named request: status %d, %s %q, want 200 and none", status, headerMemory, h.Get(headerMemory))
	}

	refusing := newProxyEnv(t, proxyConfig{unnamed: UnnamedRefuse})
	status, _, body = refusing.post(t, nil, reconcileBody(t, "u:hi"))
	if status != http.StatusBadRequest || !strings.Contains(string(body), "names no conversation") {
		t.Errorf("refused: status %d %s, want 400", status, body)
	}
	if n := len(refusing.up.requests()); n != 0 {
		t.Errorf("the upstream got %d requests, want none", n)
	}
	if m := refusing.metricsText(); !strings.Contains(m, `chatmem_proxy_unnamed_total{outcome="refused"} 1`) {
		t.Errorf("metrics lack the refused request:\n%s", grepLines(m, "chatmem_proxy"))
	}
}

// TestProxyDerivedConversation: with DeriveConversation, a chat sent with
// its full history each turn stays in one conversation derived from its
// first user message and its user; another user's chat with the same
// first message is another conversation; a request without a user goes
// without memory.
func TestProxyDerivedConversation(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{derive: true})
	withUser := func(user string, msgs ...string) string {
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(reconcileBody(t, msgs...)), &m)
		m["user"], _ = json.Marshal(user)
		b, _ := json.Marshal(m)
		return string(b)
	}
	post := func(body string) http.Header {
		t.Helper()
		status, h, b := env.post(t, nil, body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		return h
	}
	h1 := post(withUser("kavya", "s:be brief", "u:hi"))
	h2 := post(withUser("kavya", "s:be brief", "u:hi", "a:answer 1", "u:my order?"))
	h3 := post(withUser("omar", "u:hi"))
	id := h1.Get(headerConversation)
	if !strings.HasPrefix(id, "d-") || h2.Get(headerConversation) != id {
		t.Fatalf("derived conversations %q and %q, want one d-...", id, h2.Get(headerConversation))
	}
	if other := h3.Get(headerConversation); other == id || other == "" {
		t.Errorf("another user's chat is conversation %q, want another than %q", other, id)
	}
	wantBrief(t, "derived", brief(env.stored(t, id)), []string{"user:hi", "assistant:answer 1", "user:my order?", "assistant:answer 2"})

	_, h, _ := env.post(t, nil, reconcileBody(t, "u:hi"))
	if h.Get(headerMemory) != "off" {
		t.Errorf("no user: %s %q, want off", headerMemory, h.Get(headerMemory))
	}
	// X-Chatmem-User is the user too, and the first user message's text
	// counts, not how the client escaped it.
	if got := derivedID("acme", "kavya", json.RawMessage(`[{"role":"system","content":"x"},{"role":"user","content":"\u0068i"}]`)); got != id {
		t.Errorf("derivedID = %q, want %q", got, id)
	}
}
