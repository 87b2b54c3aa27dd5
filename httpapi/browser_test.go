package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// browserEnv is a server without API keys (the default local setup) that
// holds acme's secret conversation (under the default tenant) and a user's
// facts, with a chat upstream and a stub at /mcp that counts its calls.
type browserEnv struct {
	*testServer
	up       *fakeUpstream
	mcpCalls atomic.Int64
	importND string // an import that would replace the secret conversation
}

const (
	browserUser = "kavya"
	appendBody  = `{"messages":[{"role":"user","content":"hi"}]}`
)

func newBrowserEnv(t *testing.T, opts Options) *browserEnv {
	t.Helper()
	env := &browserEnv{up: newFakeUpstream(t)}
	if opts.Keys == nil {
		opts.Keys = []Key{} // none: the server a page can drive without credentials
	}
	opts.Upstream = &Upstream{BaseURL: env.up.URL + "/v1", APIKey: upstreamKey}
	opts.MCP = func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			env.mcpCalls.Add(1)
			w.WriteHeader(http.StatusOK)
		})
	}
	env.testServer = newTestServer(t, newMemory(t, openSQLite(t), nil), opts)
	c := env.client("")
	ctx := t.Context()
	_, err := c.Append(ctx, secretID, []chatmem.Message{{Role: chatmem.RoleUser, Content: "My card is " + secretContent}}, client.AppendOptions{})
	must(t, "Append(secret)", err)
	_, err = c.PatchFacts(ctx, secretID, []FactInput{{Key: "card", Value: secretFact}})
	must(t, "PatchFacts(secret)", err)
	_, err = c.PatchUserFacts(ctx, browserUser, []FactInput{{Key: "email", Value: "kavya@example.com"}})
	must(t, "PatchUserFacts", err)
	var exp bytes.Buffer
	must(t, "ExportConversation", c.ExportConversation(ctx, secretID, &exp))
	env.importND = strings.ReplaceAll(exp.String(), secretContent, "REPLACED-BY-A-WEB-PAGE")
	return env
}

// snapshot is everything the tenant holds, as the API exports it.
func (env *browserEnv) snapshot(t *testing.T) string {
	t.Helper()
	c := env.client("")
	var b bytes.Buffer
	_, err := c.Export(t.Context(), "", 1000, &b)
	must(t, "Export", err)
	facts, err := c.UserFactHistory(t.Context(), browserUser, "")
	must(t, "UserFacts", err)
	for _, f := range facts {
		b.WriteString("\nuser fact " + f.Key + "=" + f.Value)
	}
	return b.String()
}

// browserRoute is a route as a test sends it: the path with the secret
// conversation and the user filled in, and a body that the route accepts.
type browserRoute struct {
	method, path, body string
	header             map[string]string
}

func (env *browserEnv) request(rt route) browserRoute {
	p := strings.NewReplacer("{id}", secretID, "{user}", browserUser, "{$}", "", "{file}", "app.js", "{item}", "msg_1", "{seq}", "1").Replace(rt.Pattern)
	br := browserRoute{method: rt.Method, path: p, body: routeBody(rt), header: map[string]string{headerConversation: secretID}}
	switch {
	case rt.Pattern == importPattern:
		br.path += "?on_conflict=replace"
		br.body = env.importND
	case rt.Pattern == mcpPattern:
		br.body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	case strings.HasSuffix(rt.Pattern, "/context"):
		br.path += "?policy=all"
	case strings.HasPrefix(rt.Pattern, "/v1/users/") && strings.HasSuffix(rt.Pattern, "/facts") && rt.Method == http.MethodDelete:
		br.path += "?key=email"
	case strings.HasSuffix(rt.Pattern, "/facts") && rt.Method == http.MethodDelete:
		br.path += "?key=card"
	case strings.HasPrefix(rt.Pattern, "/v1/users/") && (rt.Method == http.MethodPatch || rt.Method == http.MethodPut):
		br.body = `{"facts":[{"key":"email","value":"evil@example.com"}]}`
	}
	return br
}

// mutatingRoutes are the routes that change something: every POST, PUT,
// PATCH and DELETE of the routes table, and /mcp's POST.
func mutatingRoutes(t *testing.T) []route {
	var out []route
	for _, rt := range routes {
		if rt.Method != http.MethodGet {
			out = append(out, rt)
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d mutating routes; the routes table changed shape", len(out))
	}
	return append(out, route{Method: http.MethodPost, Pattern: mcpPattern})
}

func (env *browserEnv) send(t *testing.T, br browserRoute, header map[string]string) rawResponse {
	t.Helper()
	h := map[string]string{}
	for k, v := range br.header {
		h[k] = v
	}
	for k, v := range header {
		h[k] = v
	}
	return env.raw(t, br.method, br.path, "", h, br.body)
}

// TestBrowserRefusedOnEveryMutatingRoute: on a server without API keys, a
// request a web page can make a browser send is refused on every route
// that changes anything (the routes table's, so a route added later is
// covered, and /mcp): under another Host (DNS rebinding) 403, with the
// Origin of another site or Origin null 403, with a body that is not JSON
// (text/plain, a form, none named) 415. Nothing changes in the store, the
// upstream and the MCP handler are never called. The same requests sent
// as curl sends them (no Origin, JSON) still work.
func TestBrowserRefusedOnEveryMutatingRoute(t *testing.T) {
	env := newBrowserEnv(t, Options{})
	before := env.snapshot(t)
	upBefore := len(env.up.requests())
	attacks := []struct {
		name   string
		header map[string]string
		status int
	}{
		{"rebound Host", map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"rebound Host with port", map[string]string{"Host": "evil.example:8080"}, http.StatusForbidden},
		{"foreign Origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"foreign Origin, cross-site", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"Origin null", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"text/plain with charset", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, http.StatusUnsupportedMediaType},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"multipart", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, http.StatusUnsupportedMediaType},
		{"json-like", map[string]string{"Content-Type": "application/jsonx"}, http.StatusUnsupportedMediaType},
	}
	for _, rt := range mutatingRoutes(t) {
		br := env.request(rt)
		for _, a := range attacks {
			if a.status == http.StatusUnsupportedMediaType && br.body == "" {
				continue // a DELETE carries no body
			}
			r := env.send(t, br, a.header)
			if r.status != a.status {
				t.Errorf("%s %s, %s: status %d %s, want %d", br.method, br.path, a.name, r.status, r.body, a.status)
			}
			if l := leaks(r.body); len(l) > 0 {
				t.Errorf("%s %s, %s: the answer leaks %q", br.method, br.path, a.name, l)
			}
			if rt.Pattern == chatCompletionsPattern {
				wantType := map[int]string{http.StatusForbidden: "permission_error", http.StatusUnsupportedMediaType: "invalid_request_error"}[a.status]
				if !strings.Contains(string(r.body), `"type":"`+wantType+`"`) {
					t.Errorf("%s %s, %s: %s, want OpenAI's error shape with type %s", br.method, br.path, a.name, r.body, wantType)
				}
			} else {
				wantCode := map[int]string{http.StatusForbidden: "forbidden", http.StatusUnsupportedMediaType: "unsupported_media_type"}[a.status]
				if e := r.apiError(); e.Code != wantCode {
					t.Errorf("%s %s, %s: code %q, want %q", br.method, br.path, a.name, e.Code, wantCode)
				}
			}
		}
		if br.body != "" {
			// No Content-Type at all: a page's fetch with a Blob body sends none.
			req, err := http.NewRequestWithContext(t.Context(), br.method, env.URL+br.path, strings.NewReader(br.body))
			must(t, "NewRequest", err)
			req.Header.Set(headerConversation, secretID)
			resp, err := env.Client().Do(req)
			must(t, br.method+" "+br.path, err)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with no Content-Type: status %d, want 415", br.method, br.path, resp.StatusCode)
			}
		}
	}
	if after := env.snapshot(t); after != before {
		t.Errorf("refused requests changed the store:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(env.up.requests()) - upBefore; n != 0 {
		t.Errorf("refused requests reached the upstream %d times", n)
	}
	if n := env.mcpCalls.Load(); n != 0 {
		t.Errorf("refused requests reached the MCP handler %d times", n)
	}

	// As curl sends them (no Origin; JSON, with or without charset; the
	// import as NDJSON), and as the inspector's page sends them (its own
	// origin), every route works.
	good := []map[string]string{
		{},
		{"Content-Type": "application/json; charset=utf-8"},
		{"Origin": env.URL, "Sec-Fetch-Site": "same-origin"},
		{"Origin": strings.Replace(env.URL, "127.0.0.1", "localhost", 1)},
	}
	for i, h := range good {
		for _, rt := range mutatingRoutes(t) {
			br, h := env.request(rt), h
			if rt.Pattern == importPattern {
				h = maps(h, map[string]string{"Content-Type": ndjsonType})
			}
			r := env.send(t, br, h)
			if refusedByDesign(rt) {
				// Deleting an item or a response is refused once it is
				// found (chatmem's history is append-only); the fixture
				// holds no response.
				if !(r.status == http.StatusBadRequest && strings.Contains(string(r.body), "not supported") ||
					r.status == http.StatusNotFound && strings.Contains(string(r.body), "not_found")) {
					t.Errorf("good request %d, %s %s with %v: status %d %s, want the refusal", i, br.method, br.path, h, r.status, r.body)
				}
				continue
			}
			if r.status < 200 || r.status > 299 {
				t.Errorf("good request %d, %s %s with %v: status %d %s", i, br.method, br.path, h, r.status, r.body)
			}
		}
		env.restore(t)
	}
}

// refusedByDesign reports whether rt refuses every request it gets as far
// as its handler: the deletion of an OpenAI item or response.
func refusedByDesign(rt route) bool {
	return rt.Method == http.MethodDelete && (strings.HasSuffix(rt.Pattern, "/items/{item}") || strings.HasPrefix(rt.Pattern, openAIPrefix+"/responses/"))
}

// maps returns a merged with b.
func maps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{a, b} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// restore gives the secret conversation and the user's facts back after
// good requests deleted them.
func (env *browserEnv) restore(t *testing.T) {
	t.Helper()
	c := env.client("")
	ctx := t.Context()
	_ = c.Delete(ctx, secretID)
	_, err := c.Append(ctx, secretID, []chatmem.Message{{Role: chatmem.RoleUser, Content: "My card is " + secretContent}}, client.AppendOptions{})
	must(t, "Append(secret)", err)
	_, err = c.PatchUserFacts(ctx, browserUser, []FactInput{{Key: "email", Value: "kavya@example.com"}})
	must(t, "PatchUserFacts", err)
}

// TestBrowserHostOnEveryRoute: without API keys, every route, reads, the
// inspector and the ops endpoints included, refuses a Host that is not one
// of the server's names (a page under a name rebound to 127.0.0.1 would
// read the answers as its own), and serves localhost, loopback and other
// IP addresses (which no page can rebind), the allowed hosts, and any
// Host to a server with API keys.
func TestBrowserHostOnEveryRoute(t *testing.T) {
	env := newBrowserEnv(t, Options{AllowedHosts: []string{"chatmem.internal", "[fd00::5]"}})
	for _, rt := range routes {
		if rt.Method != http.MethodGet {
			continue
		}
		br := env.request(rt)
		for _, host := range []string{"evil.example", "evil.example:80", "localhost.evil.example", "127.0.0.1.nip.io", "chatmem.internal.evil.example"} {
			r := env.send(t, br, map[string]string{"Host": host})
			if r.status != http.StatusForbidden {
				t.Errorf("GET %s with Host %s: status %d, want 403", br.path, host, r.status)
			}
			if l := leaks(r.body); len(l) > 0 {
				t.Errorf("GET %s with Host %s leaks %q", br.path, host, l)
			}
		}
		for _, host := range []string{"localhost:8080", "LOCALHOST", "127.0.0.1", "[::1]:9", "127.0.0.5:80", "192.0.2.7:8080", "chatmem.internal:443", "Chatmem.Internal.", "[fd00::5]:8080"} {
			if r := env.send(t, br, map[string]string{"Host": host}); r.status == http.StatusForbidden {
				t.Errorf("GET %s with Host %s: 403 %s", br.path, host, r.body)
			}
		}
	}
	if r := env.raw(t, http.MethodGet, "/no/such/path", "", map[string]string{"Host": "evil.example"}, ""); r.status != http.StatusForbidden {
		t.Errorf("an unknown path under a foreign Host: %d, want 403", r.status)
	}

	// With keys, a page has no key to send: the Host is the operator's
	// (a reverse proxy's) business. The Origin and the body still count.
	keyed := newTestServer(t, newMemory(t, openSQLite(t), nil), Options{})
	if r := keyed.raw(t, http.MethodPost, "/v1/conversations/k/messages", acmeKey, map[string]string{"Host": "chat.example.com"}, appendBody); r.status != http.StatusCreated {
		t.Errorf("keys, Host chat.example.com: %d %s, want 201", r.status, r.body)
	}
	for _, h := range []map[string]string{{"Origin": "https://evil.example"}, {"Origin": "null"}, {"Content-Type": "text/plain"}} {
		if r := keyed.raw(t, http.MethodPost, "/v1/conversations/k/messages", acmeKey, h, appendBody); r.status != http.StatusForbidden && r.status != http.StatusUnsupportedMediaType {
			t.Errorf("keys, %v: %d %s, want 403 or 415", h, r.status, r.body)
		}
	}
	// Behind a proxy that rewrites the Host, the inspector's own requests
	// pass on the browser's word (Sec-Fetch-Site), which a page cannot set.
	if r := keyed.raw(t, http.MethodPost, "/v1/conversations/k/messages", acmeKey, map[string]string{"Origin": "https://chat.example.com", "Sec-Fetch-Site": "same-origin"}, appendBody); r.status != http.StatusCreated {
		t.Errorf("keys, same-origin behind a proxy: %d %s, want 201", r.status, r.body)
	}
	if r := keyed.raw(t, http.MethodPost, "/v1/conversations/k/messages", acmeKey, map[string]string{"Host": "chat.example.com", "Origin": "https://chat.example.com"}, appendBody); r.status != http.StatusCreated {
		t.Errorf("keys, Origin = Host: %d %s, want 201", r.status, r.body)
	}
}

// TestCORSOrigins: a configured origin's preflight is answered with what
// it may send, and its requests' answers, errors included, carry
// Access-Control-Allow-Origin; another origin gets neither, and is
// refused. The Go client (which sends no Origin) is unaffected.
func TestCORSOrigins(t *testing.T) {
	const app = "https://app.example.com"
	env := newBrowserEnv(t, Options{CORSOrigins: []string{"https://APP.example.com:443/", "http://localhost:5173"}})
	preflight := func(origin, method string) rawResponse {
		return env.raw(t, http.MethodOptions, "/v1/conversations/c1/messages", "", map[string]string{
			"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": "authorization,content-type,idempotency-key",
		}, "")
	}
	r := preflight(app, http.MethodPost)
	if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") ||
		r.header.Get("Access-Control-Allow-Headers") != "authorization,content-type,idempotency-key" ||
		r.header.Get("Access-Control-Allow-Credentials") != "" || !slices.Contains(r.header.Values("Vary"), "Origin") {
		t.Errorf("preflight from %s: %d %v", app, r.status, r.header)
	}
	if r := preflight("http://localhost:5173", http.MethodDelete); r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Errorf("preflight from http://localhost:5173: %d %v", r.status, r.header)
	}
	for _, o := range []string{"https://evil.example", "http://app.example.com", "https://app.example.com:8443", "null"} {
		if r := preflight(o, http.MethodPost); r.status == http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d %v, want refused without Access-Control-Allow-Origin", o, r.status, r.header)
		}
	}

	r = env.raw(t, http.MethodPost, "/v1/conversations/c1/messages", "", map[string]string{"Origin": app}, appendBody)
	if r.status != http.StatusCreated || r.header.Get("Access-Control-Allow-Origin") != app || r.header.Get("Access-Control-Expose-Headers") == "" {
		t.Errorf("POST from %s: %d %v %s", app, r.status, r.header, r.body)
	}
	r = env.raw(t, http.MethodGet, "/v1/conversations/nope", "", map[string]string{"Origin": app}, "")
	if r.status != http.StatusNotFound || r.header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("an error for %s: %d %v, want 404 that the app may read", app, r.status, r.header)
	}
	r = env.raw(t, http.MethodGet, "/v1/conversations/"+secretID+"/messages", "", map[string]string{"Origin": "https://evil.example"}, "")
	if r.status != http.StatusForbidden || r.header.Get("Access-Control-Allow-Origin") != "" || len(leaks(r.body)) > 0 {
		t.Errorf("GET from another origin: %d %v %s, want 403 without Access-Control-Allow-Origin", r.status, r.header, r.body)
	}
	// A configured origin still sends JSON: a text/plain body is 415.
	if r := env.raw(t, http.MethodPost, "/v1/conversations/c1/messages", "", map[string]string{"Origin": app, "Content-Type": "text/plain"}, appendBody); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain from %s: %d, want 415", app, r.status)
	}
	if _, err := env.client("").Append(t.Context(), "c1", []chatmem.Message{{Role: chatmem.RoleUser, Content: "from Go"}}, client.AppendOptions{}); err != nil {
		t.Errorf("the Go client with CORS origins configured: %v", err)
	}
}

// TestBrowserOptionsInvalid: New refuses allowed hosts and CORS origins it
// could never match, and the wildcard origin.
func TestBrowserOptionsInvalid(t *testing.T) {
	mem := newMemory(t, openSQLite(t), nil)
	for _, opts := range []Options{
		{AllowedHosts: []string{"http://chatmem.internal"}},
		{AllowedHosts: []string{"chatmem.internal:8080"}},
		{AllowedHosts: []string{""}},
		{AllowedHosts: []string{"*.example.com"}},
		{CORSOrigins: []string{"*"}},
		{CORSOrigins: []string{"app.example.com"}},
		{CORSOrigins: []string{"https://app.example.com/path"}},
		{CORSOrigins: []string{"ftp://app.example.com"}},
		{CORSOrigins: []string{"https://user@app.example.com"}},
		{CORSOrigins: []string{"null"}},
	} {
		if _, err := New(mem, opts); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", opts, err)
		}
	}
}
