package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// The data of acme's conversation that no other tenant may see.
const (
	secretID      = "secret"
	secretContent = "ACME-SECRET-CONTENT-7731"
	secretFact    = "ACME-SECRET-FACT-8842"
	secretSummary = "ACME-SECRET-SUMMARY-9953"
)

// trickIDs are path segments that try to name another conversation, or
// another tenant's, or to widen a store's key pattern: dot segments plain
// and encoded, encoded slashes, double encoding, and the characters of
// SQL, LIKE, glob and Redis key patterns and hash tags.
var trickIDs = []string{
	"acme%2F" + secretID, "acme%2f" + secretID, "..%2F" + secretID, "%2e%2e", "%2E%2E", ".%2e", "%2e%2e%2F" + secretID,
	"%252e%252e", "%252F" + secretID, "acme%252F" + secretID, "..", ".", "x/../" + secretID, secretID + "/..",
	"%2e%2e%2Facme%2F" + secretID, secretID + "%00", secretID + "%20", "%20" + secretID, secretID + "%0A",
	secretID + "*", "secre%3F", "secre%5Bt%5D", "%2A", "%7Bacme%2F" + secretID + "%7D", "%7B" + secretID + "%7D",
	"%27%3B%20DROP%20TABLE%20messages%3B%20--", secretID + "%25", secretID + "%3Bx",
}

// guessIDs are valid IDs near acme's: each names a conversation globex does
// not have (and, once globex writes under it, globex's own).
var guessIDs = []string{secretID, "secre_", "secre%5F", "acme:" + secretID, "acme%3A" + secretID, "Secret", secretID + ".", "acme@" + secretID}

// setupSecret gives acme a conversation with messages, facts (if the store
// keeps them) and a summary (if it keeps them), and returns what Range
// reads of it.
func setupSecret(t *testing.T, ts *testServer) []chatmem.Message {
	t.Helper()
	ctx := t.Context()
	acme := ts.client(acmeKey)
	msgs := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "You are ShopBot for acme."},
		{Role: chatmem.RoleUser, Content: "My card is " + secretContent},
		{Role: chatmem.RoleAssistant, Content: "Noted: " + secretContent},
	}
	_, err := acme.Append(ctx, secretID, msgs, client.AppendOptions{})
	must(t, "acme Append(secret)", err)
	store := ts.api.mem.Store()
	if _, ok := store.(chatmem.FactStore); ok {
		_, err := acme.PatchFacts(ctx, secretID, []FactInput{{Key: "card", Value: secretFact}})
		must(t, "acme PatchFacts(secret)", err)
	}
	if ss, ok := store.(chatmem.SummaryStore); ok {
		must(t, "PutSummary", ss.PutSummary(ctx, chatmem.Key{Tenant: "acme", ID: secretID},
			chatmem.Summary{Text: secretSummary, CoversSeq: 2, Tokens: 5, Summarizer: "test", CreatedAt: time.Now()}, 0))
	}
	got, err := store.Range(ctx, chatmem.Key{Tenant: "acme", ID: secretID}, 0, 0)
	must(t, "Range(acme/secret)", err)
	return got
}

// checkSecretIntact fails the test unless acme's conversation is as
// setupSecret left it.
func checkSecretIntact(t *testing.T, ts *testServer, want []chatmem.Message) {
	t.Helper()
	ctx := t.Context()
	store := ts.api.mem.Store()
	key := chatmem.Key{Tenant: "acme", ID: secretID}
	got, err := store.Range(ctx, key, 0, 0)
	if err != nil || len(got) != len(want) {
		t.Fatalf("acme's conversation after the attempts: %d messages, %v; want %d", len(got), err, len(want))
	}
	for i := range got {
		if got[i].Content != want[i].Content || got[i].Seq != want[i].Seq {
			t.Errorf("acme's message %d = %q (seq %d), want %q (seq %d)", i, got[i].Content, got[i].Seq, want[i].Content, want[i].Seq)
		}
	}
	if fs, ok := store.(chatmem.FactStore); ok {
		facts, err := fs.Facts(ctx, key)
		if err != nil || len(facts) != 1 || facts[0].Value != secretFact {
			t.Errorf("acme's facts after the attempts = %+v, %v; want the card fact", facts, err)
		}
	}
	if ss, ok := store.(chatmem.SummaryStore); ok {
		if s, err := ss.Summary(ctx, key); err != nil || s.Text != secretSummary {
			t.Errorf("acme's summary after the attempts = %+v, %v", s, err)
		}
	}
}

// leaks reports which of acme's secrets b holds.
func leaks(b []byte) []string {
	var out []string
	for _, s := range []string{secretContent, secretFact, secretSummary, "You are ShopBot for acme."} {
		if strings.Contains(string(b), s) {
			out = append(out, s)
		}
	}
	return out
}

// routeBody is a valid body for a route, so that a refusal is about the
// conversation and not the body.
func routeBody(rt route) string {
	switch {
	case rt.Method == http.MethodPost && (strings.HasSuffix(rt.Pattern, "/messages") || strings.HasSuffix(rt.Pattern, "/turn")):
		return `{"messages":[{"role":"user","content":"globex was here"}]}`
	case rt.Method == http.MethodPatch || rt.Method == http.MethodPut:
		return `{"facts":[{"key":"card","value":"globex overwrote it"}]}`
	case rt.Method == http.MethodPost && strings.HasSuffix(rt.Pattern, "/search"):
		return `{"query":"card"}`
	case rt.Method == http.MethodPost && strings.HasSuffix(rt.Pattern, "/rewind"):
		return `{"to_seq":0}`
	case rt.Method == http.MethodPost && strings.HasSuffix(rt.Pattern, "/redact"):
		return `{"content":"globex was here"}`
	case rt.Pattern == "/v1/chat/completions", rt.Pattern == openAIPrefix+"/chat/completions":
		return `{"model":"m","messages":[{"role":"user","content":"what is my card?"}]}`
	case rt.Method == http.MethodPost && strings.HasSuffix(rt.Pattern, "/items"):
		return `{"items":[{"type":"message","role":"user","content":"globex was here"}]}`
	case rt.Method == http.MethodPost && strings.HasPrefix(rt.Pattern, openAIPrefix+"/conversations"):
		return `{"metadata":{"topic":"globex was here"}}`
	case rt.Pattern == openAIPrefix+"/responses":
		return `{"model":"m","input":"what is my card?"}`
	}
	return ""
}

// routePath is rt's path for the conversation id (a raw path segment),
// with the query a route needs to get as far as reading the conversation.
func routePath(rt route, id string) string {
	p := strings.Replace(rt.Pattern, "{id}", id, 1)
	p = strings.Replace(p, "{seq}", "2", 1)
	if strings.HasSuffix(rt.Pattern, "/context") {
		p += "?policy=all"
	}
	return p
}

// TestTenantIsolationAllRoutes: globex, with its own valid key, cannot read,
// change or delete acme's conversation through any route of the API (every
// {id} route in routes, the list, the chat proxy's X-Chatmem-Conversation,
// the inspector's files), neither by guessing its ID nor with path tricks
// (dot segments, encoded and double-encoded slashes and dots) nor with the
// characters of key patterns and queries in the ID; and requests with no
// key, a wrong key or another scheme reach nothing. Run against every
// store (Redis and PostgreSQL when reachable).
func TestTenantIsolationAllRoutes(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			up := newFakeUpstream(t)
			ts := newTestServer(t, newMemory(t, b.open(t), nil), Options{Upstream: &Upstream{BaseURL: up.URL + "/v1", APIKey: upstreamKey}})
			want := setupSecret(t, ts)
			idRoutes := slices.DeleteFunc(slices.Clone(routes), func(rt route) bool { return !strings.Contains(rt.Pattern, "{id}") })
			if len(idRoutes) < 10 {
				t.Fatalf("only %d routes with {id}; the routes table changed shape", len(idRoutes))
			}

			check := func(what string, r rawResponse, ok func(status int) bool) {
				t.Helper()
				if !ok(r.status) {
					t.Errorf("%s: status %d %s", what, r.status, r.body)
				}
				if l := leaks(r.body); len(l) > 0 {
					t.Errorf("%s: response leaks %q: %s", what, l, r.body)
				}
				if loc := r.header.Get("Location"); loc != "" {
					t.Errorf("%s: redirected to %s", what, loc)
				}
			}
			refused := func(status int) bool { return status >= 400 && status < 500 }
			notFound := func(status int) bool { return status == http.StatusNotFound }

			// Guessing the ID: acme's conversation is not globex's.
			for _, rt := range idRoutes {
				if rt.Method == http.MethodPost {
					continue // creates globex's own; below
				}
				for _, id := range guessIDs {
					path := routePath(rt, id)
					check("globex "+rt.Method+" "+path, ts.raw(t, rt.Method, path, globexKey, nil, routeBody(rt)), notFound)
				}
			}
			// Path tricks and pattern characters.
			for _, rt := range idRoutes {
				for _, id := range trickIDs {
					path := routePath(rt, id)
					check("globex "+rt.Method+" "+path, ts.raw(t, rt.Method, path, globexKey, nil, routeBody(rt)), refused)
				}
			}
			// No key, a wrong key, another scheme, acme's key as something
			// else than a bearer token.
			for _, auth := range []string{"", "Bearer", "Bearer wrong-key", "Bearer " + acmeKey + "x", "Bearer " + strings.ToUpper(acmeKey),
				"Basic " + base64.StdEncoding.EncodeToString([]byte("acme:"+acmeKey)), "Token " + acmeKey, acmeKey, "Bearer " + HashKey(acmeKey)} {
				for _, rt := range append(idRoutes, route{Method: http.MethodGet, Pattern: "/v1/conversations"}, route{Method: http.MethodPost, Pattern: "/v1/chat/completions"}) {
					path := routePath(rt, secretID)
					h := map[string]string{headerConversation: secretID}
					if auth != "" {
						h["Authorization"] = auth
					}
					check(fmt.Sprintf("%s %s with Authorization %q", rt.Method, path, auth), ts.raw(t, rt.Method, path, "", h, routeBody(rt)),
						func(s int) bool { return s == http.StatusUnauthorized })
				}
			}
			checkSecretIntact(t, ts, want)

			// The list is globex's own, whatever the cursor.
			for _, q := range []string{"", "?after=", "?after=" + secretID[:3], "?after=%2A", "?after=%25", "?after=%27%20OR%20%271%27%3D%271", "?after=acme%2Fa", "?limit=1000"} {
				r := ts.raw(t, http.MethodGet, "/v1/conversations"+q, globexKey, nil, "")
				check("globex list"+q, r, func(s int) bool { return s == http.StatusOK || s == http.StatusBadRequest })
				if r.status == http.StatusOK {
					var page ConversationPage
					if err := json.Unmarshal(r.body, &page); err != nil || len(page.Conversations) != 0 {
						t.Errorf("globex list%s = %s, want empty", q, r.body)
					}
				}
			}

			// Writing under the guessed ID makes globex's own conversation.
			r := ts.raw(t, http.MethodPost, "/v1/conversations/"+secretID+"/messages", globexKey, nil, `{"messages":[{"role":"user","content":"globex was here"}]}`)
			check("globex POST messages", r, func(s int) bool { return s == http.StatusCreated })
			var res AppendResponse
			if err := json.Unmarshal(r.body, &res); err != nil || len(res.Messages) != 1 || res.Messages[0].Seq != 1 {
				t.Errorf("globex's append = %s, want its own conversation at seq 1", r.body)
			}

			// The chat proxy: the header names globex's conversation; tricks
			// are refused before the upstream.
			r = ts.raw(t, http.MethodPost, "/v1/chat/completions", globexKey, map[string]string{headerConversation: secretID},
				`{"model":"m","messages":[{"role":"user","content":"what is my card?"}]}`)
			check("globex chat proxy on "+secretID, r, func(s int) bool { return s == http.StatusOK })
			for _, req := range up.requests() {
				if l := leaks(req.raw); len(l) > 0 {
					t.Errorf("the upstream got acme's %q in globex's turn: %s", l, req.raw)
				}
			}
			before := len(up.requests())
			for _, id := range []string{"acme/" + secretID, "../" + secretID, "*", secretID + "*", "{acme/" + secretID + "}", "secre?", "secre[t]", "%2e%2e", "acme%2F" + secretID, "'; DROP TABLE messages; --"} {
				r := ts.raw(t, http.MethodPost, "/v1/chat/completions", globexKey, map[string]string{headerConversation: id},
					`{"model":"m","messages":[{"role":"user","content":"x"}]}`)
				check(fmt.Sprintf("globex chat proxy with %s %q", headerConversation, id), r, func(s int) bool { return s == http.StatusBadRequest })
			}
			if n := len(up.requests()) - before; n != 0 {
				t.Errorf("refused proxy requests reached the upstream %d times", n)
			}

			// The inspector serves its own three files, nothing else.
			for _, p := range []string{"/inspector/..%2Fhandlers.go", "/inspector/%2e%2e%2Fserver.go", "/inspector/../routes.go", "/inspector/..%2F..%2Fgo.mod",
				"/inspector/inspector.go", "/inspector/%2e%2e", "/inspector/app.js%00", "/inspector/.", "/inspector/"} {
				r := ts.raw(t, http.MethodGet, p, "", nil, "")
				check("inspector "+p, r, refused)
				if strings.Contains(string(r.body), "package ") {
					t.Errorf("inspector %s served Go source", p)
				}
			}
			checkSecretIntact(t, ts, want)
			if l := leaks([]byte(ts.log.String())); len(l) > 0 {
				t.Errorf("the log holds acme's %q", l)
			}
		})
	}
}

// TestSecretsNotLogged runs a server with API keys (one plain, one given by
// its hash) and an upstream key, logging at debug level as JSON, through
// successes and every kind of failure (no key, wrong keys, other schemes,
// bad bodies, bad headers, an upstream that answers 401, 429 and 500 or
// breaks a stream, an upstream that cannot be reached) and checks that no
// key, and no Authorization header value, appears in a log line. The
// client's key never reaches the upstream either.
func TestSecretsNotLogged(t *testing.T) {
	up := newFakeUpstream(t)
	var logs syncBuffer
	mem := newMemory(t, openSQLite(t), nil)
	start := func(baseURL string) *httptest.Server {
		api, err := New(mem, Options{
			Keys:     testKeys(),
			Logger:   slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true})),
			Upstream: &Upstream{BaseURL: baseURL, APIKey: upstreamKey},
		})
		if err != nil {
			t.Fatal(err)
		}
		return httptest.NewServer(api)
	}
	srv := start(up.URL + "/v1")
	dead := start("http://127.0.0.1:1/v1")

	send := func(srv *httptest.Server, method, path, auth string, header map[string]string, body string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		buf := make([]byte, 1<<16)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		resp.Body.Close()
	}
	acme, globex := "Bearer "+acmeKey, "Bearer "+globexKey
	conv := map[string]string{headerConversation: "s1"}
	turn := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	wrongKeys := []string{"Bearer wrong-key-5521", "Bearer " + acmeKey + "-typo", "Basic " + base64.StdEncoding.EncodeToString([]byte("acme:"+acmeKey)),
		"Token " + globexKey, acmeKey, "Bearer " + upstreamKey}

	// Successes.
	send(srv, "POST", "/v1/conversations/s1/messages", acme, nil, `{"messages":[{"role":"user","content":"hi"}]}`)
	send(srv, "GET", "/v1/conversations/s1/context?policy=token_budget&budget=100", acme, nil, "")
	send(srv, "GET", "/v1/conversations", globex, nil, "")
	send(srv, "POST", "/v1/chat/completions", acme, conv, turn)
	send(srv, "POST", "/v1/chat/completions", acme, conv, stream)
	send(srv, "POST", "/v1/chat/completions", acme, nil, turn)
	// Bad credentials on every kind of route.
	for _, auth := range wrongKeys {
		send(srv, "GET", "/v1/conversations/s1", auth, nil, "")
		send(srv, "POST", "/v1/chat/completions", auth, conv, turn)
	}
	// Bad requests.
	send(srv, "POST", "/v1/conversations/s1/messages", acme, nil, `{"messages":`)
	send(srv, "POST", "/v1/conversations/s1/messages", acme, map[string]string{"If-Match": "nope", "Idempotency-Key": "é"}, `{"messages":[{"role":"user","content":"x"}]}`)
	send(srv, "POST", "/v1/chat/completions", acme, conv, `{"messages":[{"role":"robot","content":"x"}]}`)
	send(srv, "POST", "/v1/chat/completions", acme, map[string]string{headerConversation: "../x"}, turn)
	// Upstream failures, in the OpenAI shape and not, and broken streams.
	up.push(
		fakeReply{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-upst***4711.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		fakeReply{status: 429, contentType: "text/plain", body: "slow down"},
		fakeReply{status: 500, contentType: "text/html", body: "<h1>Internal Server Error</h1>"},
		fakeReply{status: 502, body: `{"error":{"message":"bad gateway"}}`},
		fakeReply{content: "a reply that breaks", breakAfter: 1},
		fakeReply{status: 401, body: `{"error":{"message":"no"}}`},
	)
	for range 4 {
		send(srv, "POST", "/v1/chat/completions", acme, conv, turn)
	}
	send(srv, "POST", "/v1/chat/completions", acme, conv, stream)
	send(srv, "POST", "/v1/chat/completions", acme, nil, turn)
	send(dead, "POST", "/v1/chat/completions", acme, conv, turn)
	send(dead, "POST", "/v1/chat/completions", globex, nil, stream)
	srv.Close() // waits for the handlers, and so for their log lines
	dead.Close()

	log := logs.String()
	if strings.Count(log, `"msg":"http request"`) < 30 {
		t.Fatalf("too few request lines logged:\n%s", log)
	}
	if !strings.Contains(log, `"level":"ERROR"`) {
		t.Errorf("no error was logged; the failures did not happen:\n%s", log)
	}
	secrets := []string{acmeKey, globexKey, upstreamKey, HashKey(acmeKey), HashKey(globexKey), "wrong-key-5521", "Bearer ", "Basic ",
		base64.StdEncoding.EncodeToString([]byte("acme:" + acmeKey))}
	for _, s := range secrets {
		if strings.Contains(log, s) {
			t.Errorf("the log holds %q:\n%s", s, grepLines(log, s))
		}
	}
	for _, r := range up.requests() {
		if strings.Contains(string(r.raw), acmeKey) || strings.Contains(fmt.Sprint(r.header), acmeKey) || strings.Contains(fmt.Sprint(r.header), globexKey) {
			t.Errorf("a client's key reached the upstream: %v", r.header)
		}
		if got := r.header.Get("Authorization"); got != "Bearer "+upstreamKey {
			t.Errorf("upstream Authorization = %q, want the upstream key", got)
		}
	}
}
