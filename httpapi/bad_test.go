package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// testLimits are the limits of the end-to-end server, small enough to
// cross cheaply.
var testLimits = Limits{MaxBodyBytes: 64 << 10, MaxMessages: 20, MaxContentBytes: 4 << 10}

// testBadRequests sends requests that must be refused, each with its
// status and code, and checks that the conversation is unchanged.
func testBadRequests(t *testing.T, ts *testServer) {
	const msgs = "/v1/conversations/seed/messages"
	const ctxPath = "/v1/conversations/seed/context"
	user := `{"role":"user","content":"hello"}`
	body := func(messages ...string) string { return `{"messages":[` + strings.Join(messages, ",") + `]}` }
	many := make([]string, testLimits.MaxMessages+1)
	for i := range many {
		many[i] = user
	}

	cases := []struct {
		name         string
		method, path string
		key          string
		header       map[string]string
		body         string
		status       int
		code         string
		msg          string // a substring the message must hold
	}{
		{"invalid JSON", "POST", msgs, acmeKey, nil, `{"messages":[`, 400, "invalid_request", "JSON"},
		{"not an object", "POST", msgs, acmeKey, nil, `[1,2]`, 400, "invalid_request", ""},
		{"empty body", "POST", msgs, acmeKey, nil, ``, 400, "invalid_request", "empty"},
		{"no messages", "POST", msgs, acmeKey, nil, `{"messages":[]}`, 400, "invalid_request", "messages"},
		{"null messages", "POST", msgs, acmeKey, nil, `{"messages":null}`, 400, "invalid_request", "messages"},
		{"unknown role", "POST", msgs, acmeKey, nil, body(`{"role":"wizard","content":"hi"}`), 400, "invalid_request", "role"},
		{"empty content", "POST", msgs, acmeKey, nil, body(`{"role":"user","content":""}`), 400, "invalid_request", "empty content"},
		{"NUL in content", "POST", msgs, acmeKey, nil, body(`{"role":"user","content":"a\u0000b"}`), 400, "invalid_request", "NUL"},
		{"image content part", "POST", msgs, acmeKey, nil, body(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`), 400, "invalid_request", "text"},
		{"unmatched tool result", "POST", msgs, acmeKey, nil, body(`{"role":"tool","tool_call_id":"call_9","content":"42"}`), 400, "invalid_request", "call_9"},
		{"tool result after a user message", "POST", msgs, acmeKey, nil, body(user, `{"role":"tool","tool_call_id":"call_9","content":"42"}`), 400, "invalid_request", ""},
		{"valid then invalid message", "POST", msgs, acmeKey, nil, body(user, `{"role":"user"}`), 400, "invalid_request", "message 1"},
		{"unknown top-level field", "POST", msgs, acmeKey, nil, `{"messages":[` + user + `],"conversation_id":"x"}`, 400, "invalid_request", "conversation_id"},
		{"trailing data", "POST", msgs, acmeKey, nil, body(user) + ` {}`, 400, "invalid_request", "after"},
		{"negative ttl", "POST", msgs, acmeKey, nil, `{"messages":[` + user + `],"ttl_seconds":-1}`, 400, "invalid_request", "ttl_seconds"},
		{"fractional ttl", "POST", msgs, acmeKey, nil, `{"messages":[` + user + `],"ttl_seconds":1.5}`, 400, "invalid_request", "ttl_seconds"},
		{"unknown tokenizer", "POST", "/v1/conversations/fresh/messages", acmeKey, nil, `{"messages":[` + user + `],"tokenizer":"nope"}`, 400, "invalid_request", "tokenizer"},
		{"oversized body", "POST", msgs, acmeKey, nil, body(`{"role":"user","content":"` + strings.Repeat("x", int(testLimits.MaxBodyBytes)) + `"}`), 413, "too_large", "body"},
		{"oversized content", "POST", msgs, acmeKey, nil, body(`{"role":"user","content":"` + strings.Repeat("x", testLimits.MaxContentBytes+1) + `"}`), 413, "too_large", "content"},
		{"too many messages", "POST", msgs, acmeKey, nil, body(many...), 413, "too_large", "messages"},
		{"bad If-Match", "POST", msgs, acmeKey, map[string]string{"If-Match": "abc"}, body(user), 400, "invalid_request", "If-Match"},
		{"negative If-Match", "POST", msgs, acmeKey, map[string]string{"If-Match": "-1"}, body(user), 400, "invalid_request", "If-Match"},
		{"stale If-Match", "POST", msgs, acmeKey, map[string]string{"If-Match": `"4"`}, body(user), 409, "conflict", ""},
		{"long Idempotency-Key", "POST", msgs, acmeKey, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, body(user), 400, "invalid_request", "Idempotency-Key"},
		{"bad ID", "POST", "/v1/conversations/bad%20id/messages", acmeKey, nil, body(user), 400, "invalid_request", "conversation id"},
		{"ID too long", "POST", "/v1/conversations/" + strings.Repeat("a", 129) + "/messages", acmeKey, nil, body(user), 400, "invalid_request", "conversation id"},
		{"encoded slash in ID", "POST", "/v1/conversations/x%2Fseed/messages", acmeKey, nil, body(user), 400, "invalid_request", "conversation id"},
		{"encoded dot-dot ID", "GET", "/v1/conversations/%2E%2E/messages", acmeKey, nil, "", 400, "invalid_request", ""},
		{"dot-dot in path", "POST", "/v1/conversations/other/../seed/messages", acmeKey, nil, body(user), 400, "invalid_request", "canonical"},
		{"doubled slash", "POST", "/v1/conversations//seed/messages", acmeKey, nil, body(user), 400, "invalid_request", "canonical"},
		{"budget 0", "GET", ctxPath + "?policy=token_budget&budget=0", acmeKey, nil, "", 400, "invalid_request", "budget"},
		{"budget negative", "GET", ctxPath + "?policy=token_budget&budget=-5", acmeKey, nil, "", 400, "invalid_request", "budget"},
		{"budget not a number", "GET", ctxPath + "?policy=token_budget&budget=lots", acmeKey, nil, "", 400, "invalid_request", "budget"},
		{"budget twice", "GET", ctxPath + "?policy=token_budget&budget=40&budget=50", acmeKey, nil, "", 400, "invalid_request", "budget"},
		{"policy empty", "GET", ctxPath + "?policy=&budget=40", acmeKey, nil, "", 400, "invalid_request", "policy"},
		{"unknown policy", "GET", ctxPath + "?policy=everything&budget=40", acmeKey, nil, "", 400, "invalid_request", "policy"},
		{"facts not a bool", "GET", ctxPath + "?policy=all&facts=maybe", acmeKey, nil, "", 400, "invalid_request", "facts"},
		{"messages limit 0", "GET", msgs + "?limit=0", acmeKey, nil, "", 400, "invalid_request", "limit"},
		{"messages limit over 1000", "GET", msgs + "?limit=1001", acmeKey, nil, "", 400, "invalid_request", "limit"},
		{"messages after negative", "GET", msgs + "?after=-1", acmeKey, nil, "", 400, "invalid_request", "after"},
		{"list bad cursor", "GET", "/v1/conversations?after=%2F", acmeKey, nil, "", 400, "invalid_request", "after"},
		{"facts unknown field", "PATCH", "/v1/conversations/seed/facts", acmeKey, nil, `{"facts":[{"key":"name","value":"x","set_by":"me"}]}`, 400, "invalid_request", "set_by"},
		{"facts missing", "PUT", "/v1/conversations/seed/facts", acmeKey, nil, `{}`, 400, "invalid_request", "facts"},
		{"delete fact with bad key", "DELETE", "/v1/conversations/seed/facts?key=Bad%20Key", acmeKey, nil, "", 400, "invalid_request", "key"},
		{"missing key", "POST", msgs, "", nil, body(user), 401, "unauthorized", "Authorization"},
		{"wrong key", "POST", msgs, "not-a-key", nil, body(user), 401, "unauthorized", ""},
		{"wrong key on GET", "GET", "/v1/conversations", "acme-secret-key-", nil, "", 401, "unauthorized", ""},
		{"basic auth", "GET", "/v1/conversations/seed", "", map[string]string{"Authorization": "Basic YWNtZTprMQ=="}, "", 401, "unauthorized", "Bearer"},
		{"hash as key", "GET", "/v1/conversations", HashKey(globexKey), nil, "", 401, "unauthorized", ""},
		{"method not allowed", "PUT", msgs, acmeKey, nil, body(user), 405, "method_not_allowed", "POST"},
		{"unknown route", "GET", "/v1/nope", acmeKey, nil, "", 404, "not_found", ""},
	}

	c := ts.client(acmeKey)
	before, err := c.Conversation(t.Context(), "seed")
	must(t, "Conversation(seed)", err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.raw(t, tc.method, tc.path, tc.key, tc.header, tc.body)
			e := r.apiError()
			if r.status != tc.status || e.Code != tc.code {
				t.Errorf("%s %.80s = %d %q (%s), want %d %q", tc.method, tc.path, r.status, e.Code, e.Message, tc.status, tc.code)
			}
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q does not mention %q", e.Message, tc.msg)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if r.header.Get("X-Request-Id") == "" || e.RequestID == "" {
				t.Error("no X-Request-Id")
			}
			switch tc.status {
			case http.StatusUnauthorized:
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want Bearer", got)
				}
			case http.StatusMethodNotAllowed:
				if got := r.header.Get("Allow"); got != "POST, GET, HEAD" {
					t.Errorf("Allow = %q, want POST, GET, HEAD", got)
				}
			}
			after, err := c.Conversation(t.Context(), "seed")
			must(t, "Conversation(seed) after", err)
			if describe(after) != describe(before) {
				t.Errorf("conversation changed:\n before %s\n after  %s", describe(before), describe(after))
			}
		})
	}
	if _, err := c.Conversation(t.Context(), "fresh"); err == nil {
		t.Error(`refused appends to "fresh" created it`)
	}
	page, err := c.Messages(t.Context(), "seed", 0, 1000)
	must(t, "Messages(seed)", err)
	if len(page.Messages) != int(before.LastSeq) {
		t.Errorf("seed has %d messages after the bad requests, want %d", len(page.Messages), before.LastSeq)
	}
	for _, m := range page.Messages {
		if m.Content == "hello" {
			t.Errorf("a refused message was stored: seq %d", m.Seq)
		}
	}
}
