package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/mcpserver"
)

// seedArgs is the seed's five messages as append_messages arguments.
func seedArgs(conv string) map[string]any {
	var msgs []map[string]any
	for _, m := range seed.History() {
		msgs = append(msgs, map[string]any{"role": string(m.Role), "content": m.Content})
	}
	return map[string]any{"conversation": conv, "messages": msgs}
}

// scenario is the done-when, run over each transport: append the
// seed, get the window at budget 40, set and read facts, search far back,
// read the conversation as a resource, list, and delete.
func scenario(t *testing.T, cs *mcp.ClientSession) {
	const conv = "kavya-1"
	var app mcpserver.AppendOutput
	mustOK(t, cs, "append_messages", seedArgs(conv), &app)
	if len(app.Messages) != 5 || app.Messages[0].Seq != 1 || app.Messages[4].Seq != 5 || app.LastSeq != 5 {
		t.Fatalf("append_messages = %+v, want seqs 1..5", app)
	}
	if app.Tokens != 63 {
		t.Errorf("append_messages tokens = %d, want 63 (the seed's five messages, estimate)", app.Tokens)
	}

	var w mcpserver.ContextOutput
	res := mustOK(t, cs, "get_context", map[string]any{"conversation": conv, "budget": 40}, &w)
	if len(w.Messages) != 3 || w.Tokens != 36 || w.Dropped != 2 || w.Policy != "token_budget" {
		t.Fatalf("get_context(budget 40) = %d msgs, %d tokens, %d dropped (%s); want 3, 36, 2 (token_budget)", len(w.Messages), w.Tokens, w.Dropped, w.Policy)
	}
	if w.Messages[0].Seq != 3 || w.Messages[0].Content != seed.History()[2].Content {
		t.Errorf("get_context first message = %+v, want seq 3 (the seed's third)", w.Messages[0])
	}
	if got := text(res); !strings.HasPrefix(got, "3 messages, 36 tokens") || !strings.Contains(got, "#5 user: Add the DryFit") {
		t.Errorf("get_context text = %q", got)
	}
	if w.Receipt != nil {
		t.Errorf("get_context without receipt: receipt %+v, want none", w.Receipt)
	}
	var wr mcpserver.ContextOutput
	mustOK(t, cs, "get_context", map[string]any{"conversation": conv, "budget": 40, "receipt": true}, &wr)
	if r := wr.Receipt; r == nil || r.LeftOut != 2 || len(r.Sent) != 1 || r.Sent[0].From != 3 || r.Sent[0].To != 5 || r.Tokens.Recent != 36 {
		t.Errorf("get_context(receipt) receipt = %+v, want messages 3-5 sent (36 tokens), 2 left out", r)
	}
	for budget, want := range map[int]int{100: 5, 25: 1} {
		mustOK(t, cs, "get_context", map[string]any{"conversation": conv, "budget": budget}, &w)
		if len(w.Messages) != want {
			t.Errorf("get_context(budget %d) = %d messages, want %d", budget, len(w.Messages), want)
		}
	}
	for _, pol := range []string{"all", "summary_buffer", "recall"} {
		mustOK(t, cs, "get_context", map[string]any{"conversation": conv, "policy": pol, "budget": 100}, &w)
		if len(w.Messages) != 5 || w.Policy != pol {
			t.Errorf("get_context(%s, budget 100) = %d messages (%s), want 5", pol, len(w.Messages), w.Policy)
		}
	}
	mustOK(t, cs, "get_context", map[string]any{"conversation": conv, "policy": "last_turns", "turns": 1}, &w)
	if len(w.Messages) != 1 || w.Messages[0].Seq != 5 {
		t.Errorf("get_context(last_turns 1) = %+v, want message 5", w.Messages)
	}

	var set mcpserver.SetFactOutput
	mustOK(t, cs, "set_fact", map[string]any{"conversation": conv, "key": "name", "value": "Kavya"}, &set)
	mustOK(t, cs, "set_fact", map[string]any{"conversation": conv, "key": "order_id", "value": "SE-10423"}, &set)
	if set.Fact.Key != "order_id" || set.Fact.Value != "SE-10423" || set.Fact.SetBy != "app" || set.Fact.Time.IsZero() {
		t.Errorf("set_fact = %+v", set)
	}
	var facts mcpserver.FactsOutput
	mustOK(t, cs, "get_facts", map[string]any{"conversation": conv}, &facts)
	if len(facts.Facts) != 2 || facts.Facts[0].Key != "name" || facts.Facts[0].Value != "Kavya" || facts.Facts[1].Value != "SE-10423" {
		t.Fatalf("get_facts = %+v, want name and order_id", facts)
	}
	mustOK(t, cs, "get_context", map[string]any{"conversation": conv, "budget": 100, "facts": true}, &w)
	if len(w.Facts) != 2 || w.Messages[0].Kind != chatmem.MetaFacts || !strings.Contains(w.Messages[0].Content, "Kavya") {
		t.Errorf("get_context(facts) = facts %+v, first message %+v; want the facts sent first", w.Facts, w.Messages[0])
	}

	var found mcpserver.SearchOutput
	res = mustOK(t, cs, "search_memory", map[string]any{"conversation": conv, "query": "where is order SE-10423?"}, &found)
	if len(found.Hits) == 0 || found.Hits[0].Seq != 1 || found.Hits[0].Role != "user" || found.Hits[0].Conversation != conv ||
		!strings.Contains(found.Hits[0].Text, "SE-10423") || found.Hits[0].Time.IsZero() {
		t.Fatalf("search_memory(SE-10423) = %+v, want message 1 first", found.Hits)
	}
	if !strings.Contains(text(res), "#1 user: Hi, I'm Kavya") {
		t.Errorf("search_memory text = %q", text(res))
	}

	var list mcpserver.ListOutput
	mustOK(t, cs, "list_conversations", map[string]any{}, &list)
	if len(list.Conversations) != 1 || list.Conversations[0].ID != conv || list.Conversations[0].Messages != 5 || list.NextCursor != "" {
		t.Fatalf("list_conversations = %+v, want %s with 5 messages", list, conv)
	}

	resources := listResources(t, cs)
	if !slices.Equal(resources, []string{mcpserver.ResourcePrefix + conv}) {
		t.Errorf("resources/list = %v, want [%s%s]", resources, mcpserver.ResourcePrefix, conv)
	}
	rc := readResource(t, cs, mcpserver.ResourcePrefix+conv)
	if rc.ID != conv || rc.LastSeq != 5 || len(rc.Messages) != 5 || rc.Messages[0].Content != seed.History()[0].Content || rc.FirstSeq != 1 {
		t.Errorf("resources/read = %+v, want the five messages", rc)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: mcpserver.ResourcePrefix + "nobody"}); err == nil {
		t.Error("resources/read of a missing conversation succeeded")
	}

	var df mcpserver.DeleteFactOutput
	mustOK(t, cs, "delete_fact", map[string]any{"conversation": conv, "key": "name"}, &df)
	mustFail(t, cs, "delete_fact", map[string]any{"conversation": conv, "key": "name"}, `has no fact "name"`)
	mustOK(t, cs, "get_facts", map[string]any{"conversation": conv}, &facts)
	if len(facts.Facts) != 1 || facts.Facts[0].Key != "order_id" {
		t.Errorf("get_facts after delete_fact = %+v, want only order_id", facts.Facts)
	}

	var del mcpserver.DeleteOutput
	mustOK(t, cs, "delete_conversation", map[string]any{"conversation": conv}, &del)
	if !del.Deleted {
		t.Errorf("delete_conversation = %+v", del)
	}
	mustFail(t, cs, "get_context", map[string]any{"conversation": conv, "budget": 40}, `conversation "kavya-1" does not exist`)
	mustFail(t, cs, "delete_conversation", map[string]any{"conversation": conv}, "does not exist")
	mustOK(t, cs, "list_conversations", map[string]any{}, &list)
	if len(list.Conversations) != 0 {
		t.Errorf("list_conversations after delete = %+v", list.Conversations)
	}
	if got := listResources(t, cs); len(got) != 0 {
		t.Errorf("resources/list after delete = %v", got)
	}
}

func listResources(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var uris []string
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		uris = append(uris, r.URI)
	}
	return uris
}

func readResource(t testing.TB, cs *mcp.ClientSession, uri string) mcpserver.ConversationResource {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("resources/read %s: %v", uri, err)
	}
	if res.CacheScope != "private" {
		t.Errorf("resources/read cacheScope = %q, want private (a tenant's data)", res.CacheScope)
	}
	var rc mcpserver.ConversationResource
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("resources/read %s = %+v", uri, res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestScenarioInMemory(t *testing.T) {
	scenario(t, connectInMemory(t, newMemory(t), "acme"))
}

func TestScenarioHTTP(t *testing.T) {
	env := newHTTPEnv(t, httpapi.Options{})
	scenario(t, env.connect(t, acmeKey))
}

// TestTools lists the tools with the names the issue gives, each with a
// description and input and output schemas.
func TestTools(t *testing.T) {
	cs := connectInMemory(t, newMemory(t), "acme")
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if len(tool.Description) < 40 || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s: description %q, input schema %v, output schema %v", tool.Name, tool.Description, tool.InputSchema, tool.OutputSchema)
		}
	}
	slices.Sort(names)
	want := []string{"append_messages", "delete_conversation", "delete_fact", "get_context", "get_facts", "list_conversations", "search_memory", "set_fact"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

// state is everything a tenant holds, to check that a failed call wrote
// nothing: its conversations with their users and facts, and the facts of
// those users and of users.
func state(t testing.TB, mem *chatmem.Memory, tenant string, users ...string) string {
	t.Helper()
	ctx := context.Background()
	users = slices.Clone(users)
	var b strings.Builder
	page, err := mem.Store().List(ctx, tenant, chatmem.PageRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range page.Conversations {
		msgs, err := mem.Store().Range(ctx, c.Key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		facts, err := mem.Facts(ctx, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %q %d %d %d\n", c.Key.ID, c.User, c.LastSeq, len(msgs), c.Tokens)
		for _, f := range facts {
			fmt.Fprintf(&b, "  %s=%s\n", f.Key, f.Value)
		}
		if c.User != "" && !slices.Contains(users, c.User) {
			users = append(users, c.User)
		}
	}
	// The users of its conversations, and the ones a test names, with
	// their facts.
	slices.Sort(users)
	for _, u := range slices.Compact(users) {
		facts, err := mem.UserFacts(ctx, chatmem.Key{Tenant: tenant, ID: u})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "user %s\n", u)
		for _, f := range facts {
			fmt.Fprintf(&b, "  %s=%s\n", f.Key, f.Value)
		}
	}
	return b.String()
}

// TestBadInput: every bad call is a tool error (isError, a message that
// says what was wrong), never a protocol error, and writes nothing.
func TestBadInput(t *testing.T) {
	mem := newMemory(t)
	cs := connectInMemory(t, mem, "acme")
	mustOK(t, cs, "append_messages", seedArgs("c1"), nil)
	mustOK(t, cs, "set_fact", map[string]any{"conversation": "c1", "key": "name", "value": "Kavya"}, nil)
	before := state(t, mem, "acme")

	user := map[string]any{"role": "user", "content": "hello"}
	cases := []struct {
		tool string
		args any
		want string
	}{
		{"append_messages", map[string]any{"conversation": "c1", "messages": []any{user, map[string]any{"role": "robot", "content": "x"}}}, "message 1"},
		{"append_messages", map[string]any{"conversation": "c1", "messages": []any{user, map[string]any{"role": "user", "content": ""}}}, "message 1"},
		{"append_messages", map[string]any{"conversation": "c1", "messages": []any{user, map[string]any{"role": "tool", "content": "42", "tool_call_id": "call_9"}}}, "call_9"},
		{"append_messages", map[string]any{"conversation": "../etc", "messages": []any{user}}, "conversation"},
		{"append_messages", map[string]any{"conversation": "c2", "messages": []any{}}, "messages is empty"},
		{"append_messages", map[string]any{"conversation": "c2"}, "messages"},
		{"append_messages", map[string]any{"conversation": "c2", "messages": []any{user}, "tenant": "globex"}, "tenant"},
		{"append_messages", map[string]any{"conversation": "c2", "messages": "hello"}, "messages"},
		{"append_messages", map[string]any{"conversation": "c2", "messages": []any{map[string]any{"role": "user", "content": "a\x00b"}}}, "NUL"},
		{"append_messages", map[string]any{"conversation": "c1", "messages": []any{user}, "context": map[string]any{"policy": "bogus"}}, `context: invalid input: unknown policy "bogus"`},
		{"append_messages", map[string]any{"conversation": "c1", "messages": []any{user}, "context": map[string]any{"turns": 2}}, "turns is an option of last_turns"},
		{"get_context", map[string]any{"conversation": "c1", "policy": "bogus"}, `unknown policy "bogus"`},
		{"get_context", map[string]any{"conversation": "c1", "budget": -1}, "negative"},
		{"get_context", map[string]any{"conversation": "c1", "budget": 3}, "budget too small"},
		{"get_context", map[string]any{"conversation": "c1", "turns": 2}, "turns is an option of last_turns"},
		{"get_context", map[string]any{"conversation": "nobody", "budget": 40}, `conversation "nobody" does not exist`},
		{"get_context", map[string]any{}, "conversation"},
		{"search_memory", map[string]any{"conversation": "c1", "query": "  "}, "query is empty"},
		{"search_memory", map[string]any{"conversation": "c1", "query": "kettle", "limit": 1000}, "limit 1000"},
		{"search_memory", map[string]any{"conversation": "nobody", "query": "kettle"}, "does not exist"},
		{"set_fact", map[string]any{"conversation": "c1", "key": "Name!", "value": "x"}, "fact key"},
		{"set_fact", map[string]any{"conversation": "c1", "key": "name", "value": ""}, "empty value"},
		{"set_fact", map[string]any{"conversation": "c1", "key": "name", "value": strings.Repeat("x", chatmem.MaxFactValueLen+1)}, "over"},
		{"set_fact", map[string]any{"conversation": "nobody", "key": "name", "value": "x"}, "does not exist"},
		{"get_facts", map[string]any{"conversation": "nobody"}, "does not exist"},
		{"delete_fact", map[string]any{"conversation": "c1", "key": "Bad Key"}, "fact key"},
		{"delete_fact", map[string]any{"conversation": "c1", "key": "email"}, `no fact "email"`},
		{"list_conversations", map[string]any{"limit": 5000}, "limit 5000"},
		{"list_conversations", map[string]any{"cursor": "a/b"}, "cursor"},
		{"delete_conversation", map[string]any{"conversation": ""}, "empty id"},
		{"delete_conversation", map[string]any{"conversation": "nobody"}, "does not exist"},
	}
	for _, c := range cases {
		mustFail(t, cs, c.tool, c.args, c.want)
		if after := state(t, mem, "acme"); after != before {
			t.Fatalf("%s(%v) failed but changed the store:\n%s\nwant\n%s", c.tool, c.args, after, before)
		}
	}
}

// TestTenantIsolation: over HTTP, another tenant's key sees nothing of
// acme's conversation, through any tool or resource, and changes nothing.
func TestTenantIsolation(t *testing.T) {
	env := newHTTPEnv(t, httpapi.Options{})
	acme := env.connect(t, acmeKey)
	globex := env.connect(t, globexKey)
	mustOK(t, acme, "append_messages", seedArgs("shared-id"), nil)
	mustOK(t, acme, "set_fact", map[string]any{"conversation": "shared-id", "key": "name", "value": "Kavya"}, nil)
	before := state(t, env.mem, "acme")

	var list mcpserver.ListOutput
	mustOK(t, globex, "list_conversations", map[string]any{}, &list)
	if len(list.Conversations) != 0 {
		t.Errorf("globex list_conversations = %+v, want none", list.Conversations)
	}
	if got := listResources(t, globex); len(got) != 0 {
		t.Errorf("globex resources/list = %v, want none", got)
	}
	if _, err := globex.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: mcpserver.ResourcePrefix + "shared-id"}); err == nil {
		t.Error("globex read acme's conversation as a resource")
	}
	id := map[string]any{"conversation": "shared-id"}
	mustFail(t, globex, "get_context", map[string]any{"conversation": "shared-id", "budget": 40}, "does not exist")
	mustFail(t, globex, "search_memory", map[string]any{"conversation": "shared-id", "query": "SE-10423"}, "does not exist")
	mustFail(t, globex, "get_facts", id, "does not exist")
	mustFail(t, globex, "set_fact", map[string]any{"conversation": "shared-id", "key": "name", "value": "Mallory"}, "does not exist")
	mustFail(t, globex, "delete_fact", map[string]any{"conversation": "shared-id", "key": "name"}, "no fact")
	mustFail(t, globex, "delete_conversation", id, "does not exist")
	if after := state(t, env.mem, "acme"); after != before {
		t.Errorf("globex's calls changed acme's data:\n%s\nwant\n%s", after, before)
	}

	// Globex's own conversation of the same ID is its own.
	var app mcpserver.AppendOutput
	mustOK(t, globex, "append_messages", map[string]any{"conversation": "shared-id", "messages": []any{map[string]any{"role": "user", "content": "hello"}}}, &app)
	if app.LastSeq != 1 {
		t.Errorf("globex append to its own shared-id = seq %d, want 1", app.LastSeq)
	}
	if after := state(t, env.mem, "acme"); after != before {
		t.Errorf("globex's append changed acme's data")
	}
}

// post sends one raw JSON-RPC request to /mcp.
func post(t testing.TB, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}`

// TestHTTPAuth: /mcp answers 401 without a valid key, as the REST API
// does, and 200 with one.
func TestHTTPAuth(t *testing.T) {
	env := newHTTPEnv(t, httpapi.Options{})
	for _, key := range []string{"", "wrong-key"} {
		resp := post(t, env.url, key, initialize)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("key %q: status %d, want 401 with WWW-Authenticate", key, resp.StatusCode)
		}
	}
	if resp := post(t, env.url, acmeKey, initialize); resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("initialize with a key: status %d: %s", resp.StatusCode, b)
	}
	// The client's transport gets the 401 too.
	_, err := newClient().Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: env.url + "/mcp", MaxRetries: -1}, nil)
	if err == nil {
		t.Error("a client without a key connected")
	}
}

// TestHTTPLimits: /mcp has the REST API's body limit and rate limit.
func TestHTTPLimits(t *testing.T) {
	env := newHTTPEnv(t, httpapi.Options{Limits: httpapi.Limits{MaxBodyBytes: 2048}})
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"append_messages","arguments":{"conversation":"c1","messages":[{"role":"user","content":"` +
		strings.Repeat("x", 4096) + `"}]}}}`
	if resp := post(t, env.url, acmeKey, big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 4 KiB body over a 2 KiB limit: status %d, want 413", resp.StatusCode)
	}
	if got := state(t, env.mem, "acme"); got != "" {
		t.Errorf("the refused body wrote %q", got)
	}

	env = newHTTPEnv(t, httpapi.Options{RateLimit: httpapi.RateLimit{PerSecond: 0.001, Burst: 2}})
	codes := make([]int, 3)
	for i := range codes {
		codes[i] = post(t, env.url, acmeKey, initialize).StatusCode
	}
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK || codes[2] != http.StatusTooManyRequests {
		t.Errorf("three requests at a burst of 2: statuses %v, want 200 200 429", codes)
	}
	// Another tenant has its own allowance.
	if code := post(t, env.url, globexKey, initialize).StatusCode; code != http.StatusOK {
		t.Errorf("globex after acme's limit: status %d, want 200", code)
	}
}

// TestPagination: list_conversations pages with limit and cursor, and
// resources/list pages through more conversations than one page holds.
func TestPagination(t *testing.T) {
	mem := newMemory(t)
	const n = 130
	var want []string
	for i := range n {
		id := fmt.Sprintf("c%03d", i)
		want = append(want, id)
		if _, err := mem.Append(context.Background(), chatmem.Key{Tenant: "acme", ID: id}, seed.History()[:1], chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cs := connectInMemory(t, mem, "acme")

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("list_conversations does not end")
		}
		var page mcpserver.ListOutput
		mustOK(t, cs, "list_conversations", map[string]any{"limit": 50, "cursor": cursor}, &page)
		if len(page.Conversations) > 50 {
			t.Fatalf("a page of limit 50 holds %d", len(page.Conversations))
		}
		for _, c := range page.Conversations {
			got = append(got, c.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("list_conversations pages = %d IDs, want the %d in order", len(got), len(want))
	}

	first, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Resources) == n || first.NextCursor == "" {
		t.Errorf("resources/list first page = %d resources, next %q; want a partial page and a cursor", len(first.Resources), first.NextCursor)
	}
	uris := listResources(t, cs) // follows the cursors
	if len(uris) != n || uris[0] != mcpserver.ResourcePrefix+"c000" || uris[n-1] != mcpserver.ResourcePrefix+want[n-1] {
		t.Errorf("resources/list over all pages = %d URIs (%v ...), want %d", len(uris), uris[:min(3, len(uris))], n)
	}
	if _, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: "not a cursor"}); err == nil {
		t.Error("resources/list with a bad cursor succeeded")
	}
}

// TestToolCalls: an assistant message's tool calls and the tool message
// answering them are stored and come back in the window, whole.
func TestToolCalls(t *testing.T) {
	cs := connectInMemory(t, newMemory(t), "acme")
	mustOK(t, cs, "append_messages", map[string]any{"conversation": "c1", "messages": []any{
		map[string]any{"role": "user", "content": "Where is order SE-10423?"},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_1", "function": map[string]any{"name": "track", "arguments": `{"order":"SE-10423"}`}}}},
	}}, nil)
	var app mcpserver.AppendOutput
	mustOK(t, cs, "append_messages", map[string]any{"conversation": "c1", "messages": []any{
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "out for delivery"},
	}}, &app)
	if app.LastSeq != 3 {
		t.Fatalf("append of the tool result = %+v", app)
	}
	var w mcpserver.ContextOutput
	mustOK(t, cs, "get_context", map[string]any{"conversation": "c1"}, &w)
	if len(w.Messages) != 3 || len(w.Messages[1].ToolCalls) != 1 || w.Messages[1].ToolCalls[0].Function.Name != "track" ||
		w.Messages[1].ToolCalls[0].Type != "function" || w.Messages[2].ToolCallID != "call_1" {
		t.Errorf("get_context = %+v, want the call and its result", w.Messages)
	}
	// A second result for the same call answers nothing open.
	mustFail(t, cs, "append_messages", map[string]any{"conversation": "c1", "messages": []any{
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "again"},
	}}, "call_1")
}

// TestHTTPHost: without AnyHost, a request that reached loopback with
// another Host (DNS rebinding, or a local reverse proxy) is refused; with
// it (serve sets it: httpapi checks the Host before /mcp) it is served.
func TestHTTPHost(t *testing.T) {
	mem := newMemory(t)
	for _, anyHost := range []bool{false, true} {
		ts := httptest.NewServer(mcpserver.NewHTTP(mem, mcpserver.HTTPOptions{AnyHost: anyHost}).Handler("acme"))
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "chatmem.example.com"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ts.Close()
		want := http.StatusForbidden
		if anyHost {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("AnyHost %v, Host chatmem.example.com: status %d, want %d", anyHost, resp.StatusCode, want)
		}
	}
}
