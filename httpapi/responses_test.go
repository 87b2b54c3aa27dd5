package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// newResponsesEnv is a server in front of the fake Chat Completions
// upstream, which calls get_weather when the newest message asks for the
// weather in Paris, and answers "answer N" otherwise.
func newResponsesEnv(t testing.TB) *proxyEnv {
	t.Helper()
	return newResponsesEnvOn(t, nil)
}

// newResponsesEnvOn is newResponsesEnv on store (nil: memstore.New()).
func newResponsesEnvOn(t testing.TB, store chatmem.Store) *proxyEnv {
	t.Helper()
	var envp atomic.Pointer[proxyEnv]
	wrap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []struct {
				Content *string `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(raw, &body)
		if n := len(body.Messages); n > 0 && body.Messages[n-1].Content != nil && *body.Messages[n-1].Content == "weather in Paris?" {
			envp.Load().up.push(fakeReply{toolCalls: []chatmem.ToolCall{{ID: "call_weather", Type: "function", Function: chatmem.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}})
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		envp.Load().up.serve(w, r)
	}))
	t.Cleanup(wrap.Close)
	env := newProxyEnv(t, proxyConfig{store: store, baseURL: wrap.URL + "/v1"})
	envp.Store(env)
	return env
}

// do sends a request to the OpenAI-compatible APIs as acme.
func (e *proxyEnv) do(t testing.TB, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, e.url+openAIPrefix+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+proxyKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestResponsesNodeClient runs testdata/node/responses-client.mjs, the
// official `openai` npm client, against the Conversations and Responses
// APIs in front of the fake Chat Completions upstream, and checks that what
// the client read back is what the store holds, item by item.
func TestResponsesNodeClient(t *testing.T) {
	env := newResponsesEnv(t)
	lines := runNodeScript(t, env, "responses-client.mjs", "openai")
	var res struct {
		Conversation string            `json:"conversation"`
		Items        []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("client output: %v\n%q", err, lines)
	}

	// The store holds those items, as messages: the metadata markers (one
	// at creation, one per update), then one message per item but for the
	// function call, which is an assistant message's tool call.
	stored := env.stored(t, res.Conversation)
	var visible []chatmem.Message
	for _, m := range stored {
		if !hidden(m) {
			visible = append(visible, m)
		}
	}
	if len(stored)-len(visible) != 2 {
		t.Errorf("stored %d metadata markers, want 2", len(stored)-len(visible))
	}
	var items []item
	for _, m := range visible {
		items = append(items, messageItems(m)...)
	}
	if len(items) != len(res.Items) {
		t.Fatalf("the store holds %d items, the client read %d", len(items), len(res.Items))
	}
	for i, it := range items {
		if !jsonEqual(t, it.raw, res.Items[i]) {
			t.Errorf("item %d: stored %s, client read %s", i, it.raw, res.Items[i])
		}
	}
	if m := visible[0]; m.Role != chatmem.RoleUser || m.Content != "My ticket is SE-10423." {
		t.Errorf("first message = %+v", m)
	}

	// The upstream saw the memory grow: turn N of the conversation carries
	// the initial item and the 2(N-1) messages before it, plus its own.
	reqs := env.up.requests()
	if len(reqs) != 16 {
		t.Fatalf("upstream got %d requests, want 16", len(reqs))
	}
	for i := range 10 {
		msgs := reqs[i].messages(t)
		if len(msgs) != 2*i+2 {
			t.Errorf("upstream request %d carried %d messages, want %d", i+1, len(msgs), 2*i+2)
		}
		for _, m := range msgs {
			if m["role"] == "system" {
				t.Errorf("upstream request %d carried a system message (the metadata marker?): %v", i+1, m)
			}
		}
	}
	// The tool's result went up after the call, as chat messages.
	msgs := reqs[12].messages(t)
	if last := msgs[len(msgs)-1]; last["role"] != "tool" || last["tool_call_id"] != "call_weather" {
		t.Errorf("the tool round trip sent %v last", last)
	}
	if _, ok := reqs[11].body["tools"]; !ok {
		t.Errorf("the tools did not go upstream: %s", reqs[11].raw)
	}
	// The chain: each response carries the ones before it.
	for i := range 3 {
		if n := len(reqs[13+i].messages(t)); n != 2*i+1 {
			t.Errorf("chain request %d carried %d messages, want %d", i+1, n, 2*i+1)
		}
	}
}

// runNodeScript runs a script of testdata/node against env's
// /openai/v1 and returns its output lines; it skips (or fails under
// CI=true) without Node.js or the npm package pkg.
func runNodeScript(t *testing.T, env *proxyEnv, script, pkg string) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipOrFail(t, "Node.js is not installed: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		testenv.SkipOrFail(t, "the %s npm package is not installed (run npm ci --prefix testdata/node): %v", pkg, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHATMEM_OPENAI_URL="+env.url+openAIPrefix, "CHATMEM_API_KEY="+proxyKey)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %s: %v\n%s%s\nserver log:\n%s", script, err, out, stderr, env.log)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("%s: %s", script, lines[0])
	return lines
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// tenantSnapshot is every conversation of acme with its messages, as JSON.
func (e *proxyEnv) tenantSnapshot(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	page, err := e.mem.Store().List(ctx, "acme", chatmem.PageRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, c := range page.Conversations {
		out = append(out, c.Key.ID, e.stored(t, c.Key.ID))
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// openAIErrorOf decodes an answer in OpenAI's error shape.
func openAIErrorOf(t testing.TB, b []byte) openAIErrorDetail {
	t.Helper()
	var e struct {
		Error *openAIErrorDetail `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not OpenAI's error shape: %s", b)
	}
	return *e.Error
}

// TestResponsesBadInput: each refused request answers OpenAI's error shape
// with its status, stores nothing and calls no upstream.
func TestResponsesBadInput(t *testing.T) {
	env := newResponsesEnv(t)
	status, b := env.do(t, "POST", "/conversations", `{"items":[{"role":"user","content":"hello"}]}`)
	if status != http.StatusOK {
		t.Fatalf("create: %d %s", status, b)
	}
	var conv conversationObject
	_ = json.Unmarshal(b, &conv)
	status, b = env.do(t, "POST", "/responses", `{"model":"m","conversation":"`+conv.ID+`","input":"hi"}`)
	if status != http.StatusOK {
		t.Fatalf("response: %d %s", status, b)
	}
	var resp responseObject
	_ = json.Unmarshal(b, &resp)
	before, calls := env.tenantSnapshot(t), len(env.up.requests())

	items21 := make([]string, 21)
	for i := range items21 {
		items21[i] = `{"role":"user","content":"m"}`
	}
	many := "[" + strings.Join(items21, ",") + "]"
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"unknown conversation", "GET", "/conversations/conv_nope", "", 404, "not found"},
		{"unknown conversation's items", "GET", "/conversations/conv_nope/items", "", 404, "not found"},
		{"unknown item", "GET", "/conversations/" + conv.ID + "/items/msg_99", "", 404, "not found"},
		{"unknown response", "GET", "/responses/resp_nope", "", 404, "not found"},
		{"forged response", "GET", "/responses/" + strings.Replace(resp.ID, "resp_", "resp_0", 1), "", 404, "not found"},
		{"response in unknown conversation", "POST", "/responses", `{"model":"m","conversation":"conv_nope","input":"x"}`, 404, "not found"},
		{"unknown previous response", "POST", "/responses", `{"model":"m","previous_response_id":"resp_nope","input":"x"}`, 404, "not found"},
		{"both", "POST", "/responses", `{"model":"m","conversation":"` + conv.ID + `","previous_response_id":"` + resp.ID + `","input":"x"}`, 400, "cannot be used together"},
		{"21 items at creation", "POST", "/conversations", `{"items":` + many + `}`, 400, "over the limit of 20"},
		{"21 items added", "POST", "/conversations/" + conv.ID + "/items", `{"items":` + many + `}`, 400, "over the limit of 20"},
		{"unsupported item", "POST", "/responses", `{"model":"m","conversation":"` + conv.ID + `","input":[{"role":"user","content":"x"},{"type":"web_search_call","id":"ws_1"}]}`, 400, "web_search_call"},
		{"image part", "POST", "/conversations/" + conv.ID + "/items", `{"items":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, 400, "input_image"},
		{"hosted tool, new conversation", "POST", "/responses", `{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, 400, "web_search"},
		{"bad tool_choice, new conversation", "POST", "/responses", `{"model":"m","input":"x","tool_choice":"sometimes"}`, 400, "tool_choice"},
		{"hosted tool", "POST", "/responses", `{"model":"m","conversation":"` + conv.ID + `","input":"x","tools":[{"type":"web_search"}]}`, 400, "web_search"},
		{"tool output without its call", "POST", "/responses", `{"model":"m","conversation":"` + conv.ID + `","input":[{"type":"function_call_output","call_id":"call_x","output":"1"}]}`, 400, ""},
		{"no input", "POST", "/responses", `{"model":"m","conversation":"` + conv.ID + `"}`, 400, "input"},
		{"item deletion", "DELETE", "/conversations/" + conv.ID + "/items/msg_2", "", 400, "not supported"},
		{"response deletion", "DELETE", "/responses/" + resp.ID, "", 400, "not supported"},
		{"metadata over 16 pairs", "POST", "/conversations/" + conv.ID, `{"metadata":{"1":"","2":"","3":"","4":"","5":"","6":"","7":"","8":"","9":"","10":"","11":"","12":"","13":"","14":"","15":"","16":"","17":""}}`, 400, "16"},
		{"bad order", "GET", "/conversations/" + conv.ID + "/items?order=up", "", 400, "order"},
	} {
		status, b := env.do(t, tc.method, tc.path, tc.body)
		e := openAIErrorOf(t, b)
		if status != tc.status || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, status, b, tc.status, tc.msg)
		}
	}
	if after := env.tenantSnapshot(t); after != before {
		t.Errorf("refused requests changed the store:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(env.up.requests()) - calls; n != 0 {
		t.Errorf("refused requests called the upstream %d times", n)
	}
}

// TestResponsesUnmodelledItems: an item type chatmem does not model is
// stored and read back as it was sent (but for its ID), and never goes to
// the upstream; the metadata marker does not either.
func TestResponsesUnmodelledItems(t *testing.T) {
	env := newResponsesEnv(t)
	reasoning := `{"type":"reasoning","id":"rs_abc","summary":[{"type":"summary_text","text":"thought about it"}],"encrypted_content":"gAAA"}`
	status, b := env.do(t, "POST", "/conversations", `{"metadata":{"k":"v"},"items":[{"role":"user","content":"hello"},`+reasoning+`]}`)
	if status != http.StatusOK {
		t.Fatalf("create: %d %s", status, b)
	}
	var conv conversationObject
	_ = json.Unmarshal(b, &conv)
	status, b = env.do(t, "GET", "/conversations/"+conv.ID+"/items?order=asc", "")
	var list itemList
	if err := json.Unmarshal(b, &list); status != http.StatusOK || err != nil || len(list.Data) != 2 {
		t.Fatalf("items: %d %s", status, b)
	}
	want := strings.Replace(reasoning, `"rs_abc"`, `"rs_3"`, 1)
	if !jsonEqual(t, list.Data[1], []byte(want)) {
		t.Errorf("reasoning item read back as %s, want %s", list.Data[1], want)
	}
	status, b = env.do(t, "POST", "/responses", `{"model":"m","conversation":"`+conv.ID+`","input":"next","instructions":"be brief"}`)
	if status != http.StatusOK {
		t.Fatalf("response: %d %s", status, b)
	}
	msgs := env.up.last(t).messages(t)
	got, _ := json.Marshal(msgs)
	wantUp := `[{"content":"be brief","role":"system"},{"content":"hello","role":"user"},{"content":"next","role":"user"}]`
	if !jsonEqual(t, got, []byte(wantUp)) {
		t.Errorf("upstream got %s, want %s", got, wantUp)
	}
}

// TestResponsesMemoryPolicy: the metadata's chatmem_* keys, like the
// X-Chatmem-* headers, choose what the upstream gets.
func TestResponsesMemoryPolicy(t *testing.T) {
	env := newResponsesEnv(t)
	_, b := env.do(t, "POST", "/conversations", `{}`)
	var conv conversationObject
	_ = json.Unmarshal(b, &conv)
	for i := range 4 {
		body := `{"model":"m","conversation":"` + conv.ID + `","input":"turn ` + string(rune('1'+i)) + `","metadata":{"chatmem_policy":"last_turns","chatmem_turns":"2"}}`
		if status, b := env.do(t, "POST", "/responses", body); status != http.StatusOK {
			t.Fatalf("turn %d: %d %s", i+1, status, b)
		}
	}
	if n := len(env.up.last(t).messages(t)); n != 3 {
		t.Errorf("last_turns 2 sent %d messages, want 3 (user, assistant, user)", n)
	}
	if status, b := env.do(t, "POST", "/responses", `{"model":"m","conversation":"`+conv.ID+`","input":"x","metadata":{"chatmem_policy":"nope"}}`); status != http.StatusBadRequest {
		t.Errorf("unknown policy: %d %s", status, b)
	}
}

// TestResponsesStreamBroken: a stream the upstream breaks ends with
// response.failed and stores nothing of the response.
func TestResponsesStreamBroken(t *testing.T) {
	env := newResponsesEnv(t)
	_, b := env.do(t, "POST", "/conversations", `{"items":[{"role":"user","content":"hello"}]}`)
	var conv conversationObject
	_ = json.Unmarshal(b, &conv)
	before := env.tenantSnapshot(t)
	env.up.push(fakeReply{content: "a reply that breaks", breakAfter: 1})
	status, b := env.do(t, "POST", "/responses", `{"model":"m","conversation":"`+conv.ID+`","input":"go on","stream":true}`)
	if status != http.StatusOK || !strings.Contains(string(b), "event: response.failed") || strings.Contains(string(b), "response.completed") {
		t.Errorf("broken stream: %d %s", status, b)
	}
	if after := env.tenantSnapshot(t); after != before {
		t.Errorf("a broken stream changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// TestResponsesTenants: another tenant's key reads none of acme's
// responses, even with their IDs.
func TestResponsesTenants(t *testing.T) {
	store := memstore.New()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	up := newFakeUpstream(t)
	api, err := New(mem, Options{Keys: []Key{{Tenant: "acme", Key: proxyKey}, {Tenant: "globex", Key: "globex-key-1"}}, Upstream: &Upstream{BaseURL: up.URL + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	env := &proxyEnv{url: srv.URL, mem: mem, up: up}
	status, b := env.do(t, "POST", "/responses", `{"model":"m","input":"secret"}`)
	var resp responseObject
	if err := json.Unmarshal(b, &resp); status != http.StatusOK || err != nil {
		t.Fatalf("response: %d %s", status, b)
	}
	// globex, with a conversation of the same name.
	key, _, _ := parseResponseID("globex", resp.ID)
	if _, err := mem.Append(context.Background(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "a"}, {Role: chatmem.RoleAssistant, Content: "b"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/responses/" + resp.ID, "/responses/" + resp.ID + "/input_items", "/conversations/" + key.ID + "/items"} {
		req, _ := http.NewRequest("GET", srv.URL+openAIPrefix+p, nil)
		req.Header.Set("Authorization", "Bearer globex-key-1")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if strings.Contains(string(b), "secret") || strings.HasPrefix(p, "/responses/") && r.StatusCode != http.StatusNotFound {
			t.Errorf("globex GET %s: %d %s", p, r.StatusCode, b)
		}
	}
}

// TestResponsesBranch: previous_response_id naming a response that is not
// the newest of its chain makes a branch: a conversation of its own
// holding the history up to that response, and the new turn; the
// original chain stays as it was, and both branches' responses and input
// items read back. Without store, a branch is refused (409) and stores
// nothing.
func TestResponsesBranch(t *testing.T) {
	env := newResponsesEnv(t)
	respond := func(body string) responseObject {
		t.Helper()
		status, b := env.do(t, "POST", "/responses", body)
		var r responseObject
		if err := json.Unmarshal(b, &r); status != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", body, status, b)
		}
		return r
	}
	inputs := func(id string) []string {
		t.Helper()
		status, b := env.do(t, "GET", "/responses/"+id+"/input_items?order=asc", "")
		var list itemList
		if err := json.Unmarshal(b, &list); status != http.StatusOK || err != nil {
			t.Fatalf("input_items of %s: %d %s", id, status, b)
		}
		var out []string
		for _, raw := range list.Data {
			var it struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			_ = json.Unmarshal(raw, &it)
			for _, c := range it.Content {
				out = append(out, c.Text)
			}
		}
		return out
	}
	var ids []string
	for i := range 3 {
		body := `{"model":"m","input":"step ` + string(rune('0'+i)) + `"}`
		if i > 0 {
			body = `{"model":"m","input":"step ` + string(rune('0'+i)) + `","previous_response_id":"` + ids[i-1] + `"}`
		}
		ids = append(ids, respond(body).ID)
	}
	origKey, _, _ := parseResponseID("acme", ids[0])
	original := env.stored(t, origKey.ID)

	// Without store: refused, nothing stored.
	before := env.tenantSnapshot(t)
	status, b := env.do(t, "POST", "/responses", `{"model":"m","input":"branch","store":false,"previous_response_id":"`+ids[0]+`"}`)
	if e := openAIErrorOf(t, b); status != http.StatusConflict || !strings.Contains(e.Message, "branching") {
		t.Errorf("branch without store: %d %s", status, b)
	}
	if after := env.tenantSnapshot(t); after != before {
		t.Errorf("a refused branch changed the store")
	}

	// From the first response: the upstream gets its history and the branch's input.
	br := respond(`{"model":"m","input":"branch","previous_response_id":"` + ids[0] + `"}`)
	got, _ := json.Marshal(env.up.last(t).messages(t))
	want := `[{"role":"user","content":"step 0"},{"role":"assistant","content":"answer 1"},{"role":"user","content":"branch"}]`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("the branch sent %s, want %s", got, want)
	}
	brKey, _, _ := parseResponseID("acme", br.ID)
	if brKey.ID == origKey.ID || br.PreviousResponseID == nil || *br.PreviousResponseID != ids[0] {
		t.Fatalf("the branch %s (previous %v) is in the original conversation %s", br.ID, br.PreviousResponseID, origKey.ID)
	}
	// The branch goes on from its own newest response.
	br2 := respond(`{"model":"m","input":"branch 2","previous_response_id":"` + br.ID + `"}`)
	if k, _, _ := parseResponseID("acme", br2.ID); k != brKey {
		t.Errorf("the branch's next response is in %s, want %s", k.ID, brKey.ID)
	}
	var brItems []string
	for _, m := range env.stored(t, brKey.ID) {
		brItems = append(brItems, m.Content)
	}
	if want := []string{"step 0", "answer 1", "branch", "answer 4", "branch 2", "answer 5"}; !slices.Equal(brItems, want) {
		t.Errorf("the branch holds %q, want %q", brItems, want)
	}
	// The original is as it was, and every response reads back.
	if now := env.stored(t, origKey.ID); len(now) != len(original) {
		t.Errorf("the original conversation went from %d to %d messages", len(original), len(now))
	}
	for id, want := range map[string][]string{ids[0]: {"step 0"}, ids[1]: {"step 1"}, ids[2]: {"step 2"}, br.ID: {"branch"}, br2.ID: {"branch 2"}} {
		if got := inputs(id); !slices.Equal(got, want) {
			t.Errorf("input_items of %s = %q, want %q", id, got, want)
		}
		if status, b := env.do(t, "GET", "/responses/"+id, ""); status != http.StatusOK {
			t.Errorf("GET %s: %d %s", id, status, b)
		}
	}
	// A branch from the middle one, with an Idempotency-Key, retried.
	h := map[string]string{"Idempotency-Key": "branch-key"}
	body := `{"model":"m","input":"other","previous_response_id":"` + ids[1] + `"}`
	status, _, b1 := env.respondWith(t, h, body)
	status2, _, b2 := env.respondWith(t, h, body)
	var m1, m2 responseObject
	_ = json.Unmarshal(b1, &m1)
	_ = json.Unmarshal(b2, &m2)
	if status != http.StatusOK || status2 != http.StatusOK || m1.ID == "" || m1.ID != m2.ID {
		t.Errorf("branch retried: %d %s, then %d %s", status, b1, status2, b2)
	}
	if got := inputs(m1.ID); !slices.Equal(got, []string{"other"}) {
		t.Errorf("input_items of the middle branch = %q", got)
	}
}

// TestResponsesAgentsSession runs testdata/node/agents-session.mjs: an
// OpenAI Agents SDK agent with a function tool, ten turns on an
// OpenAIConversationsSession kept by chatmem. The session's items are what
// chatmem stores, item by item.
func TestResponsesAgentsSession(t *testing.T) {
	env := newResponsesEnv(t)
	lines := runNodeScript(t, env, "agents-session.mjs", filepath.Join("@openai", "agents"))
	wantAgentsSessionStore(t, env, lines)
}

// TestConversationItemsPages: paging through the items, in either order
// and with any page size, gives each item once, in order; messages that
// hold several items (an assistant message with text and tool calls) and
// conversations longer than a read chunk included.
func TestConversationItemsPages(t *testing.T) {
	env := newResponsesEnv(t)
	_, b := env.do(t, "POST", "/conversations", `{"metadata":{"a":"b"}}`)
	var conv conversationObject
	_ = json.Unmarshal(b, &conv)
	key := chatmem.Key{Tenant: "acme", ID: conv.ID}
	var msgs []chatmem.Message
	for i := range 30 {
		msgs = append(msgs,
			chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("q%d", i)},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("a%d", i), ToolCalls: []chatmem.ToolCall{
				{ID: fmt.Sprintf("c%d-0", i), Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: "{}"}},
				{ID: fmt.Sprintf("c%d-1", i), Type: "function", Function: chatmem.FunctionCall{Name: "g", Arguments: "{}"}}}},
			chatmem.Message{Role: chatmem.RoleTool, Content: "1", ToolCallID: fmt.Sprintf("c%d-0", i)},
			chatmem.Message{Role: chatmem.RoleTool, Content: "2", ToolCallID: fmt.Sprintf("c%d-1", i)})
	}
	if _, err := env.mem.Append(context.Background(), key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, m := range env.stored(t, conv.ID) {
		for _, it := range messageItems(m) {
			all = append(all, it.id)
		}
	}
	if len(all) != 30*6 {
		t.Fatalf("%d items, want %d", len(all), 30*6)
	}
	for _, order := range []string{"asc", "desc"} {
		want := slices.Clone(all)
		if order == "desc" {
			slices.Reverse(want)
		}
		for _, limit := range []int{1, 7, 32, 100} {
			var got []string
			after := ""
			for range 200 {
				status, b := env.do(t, "GET", fmt.Sprintf("/conversations/%s/items?order=%s&limit=%d&after=%s", conv.ID, order, limit, after), "")
				var list itemList
				if err := json.Unmarshal(b, &list); status != http.StatusOK || err != nil {
					t.Fatalf("%s %d: %d %s", order, limit, status, b)
				}
				for _, raw := range list.Data {
					var it struct {
						ID string `json:"id"`
					}
					_ = json.Unmarshal(raw, &it)
					got = append(got, it.ID)
				}
				if !list.HasMore {
					break
				}
				after = *list.LastID
			}
			if !slices.Equal(got, want) {
				t.Errorf("order %s, limit %d: %d items %v..., want %d %v...", order, limit, len(got), got[:min(8, len(got))], len(want), want[:8])
			}
		}
	}
}

// TestResponsesAISDK runs testdata/node/ai-sdk-responses.mjs: the Vercel
// AI SDK's OpenAI Responses model, five turns (one streamed) chained by
// providerOptions.openai.previousResponseId. The responses are one
// conversation, which holds each turn's message and reply, item by item,
// and each upstream request carried the turns before it.
func TestResponsesAISDK(t *testing.T) {
	env := newResponsesEnv(t)
	lines := runNodeScript(t, env, "ai-sdk-responses.mjs", filepath.Join("@ai-sdk", "openai"))
	wantAISDKStore(t, env, lines)
	reqs := env.up.requests()
	if len(reqs) != 5 {
		t.Fatalf("the upstream got %d requests, want 5", len(reqs))
	}
	for i, r := range reqs {
		if n := len(r.messages(t)); n != 2*i+1 {
			t.Errorf("upstream request %d carried %d messages, want %d", i+1, n, 2*i+1)
		}
	}
}

// wantAgentsSessionStore checks the store after
// testdata/node/agents-session.mjs ran: the session's conversation is the
// only one, and its 22 items (ten turns, the tool's call and output) are
// what chatmem stores, item by item.
func wantAgentsSessionStore(t *testing.T, env *proxyEnv, lines []string) {
	t.Helper()
	// With store: false, the session's conversation is the only one.
	page, err := env.mem.Store().List(context.Background(), "acme", chatmem.PageRequest{Limit: 1000})
	if err != nil || len(page.Conversations) != 1 {
		t.Errorf("%d conversations (%v), want the session's alone", len(page.Conversations), err)
	}
	var res struct {
		Conversation string `json:"conversation"`
		Items        []struct {
			ID        string          `json:"id"`
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			CallID    string          `json:"callId"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("agents output: %v\n%q", err, lines)
	}
	var items []item
	for _, m := range env.stored(t, res.Conversation) {
		items = append(items, messageItems(m)...)
	}
	// Ten turns: user and assistant each, and the tool's call and output.
	if len(items) != 22 || len(res.Items) != len(items) {
		t.Fatalf("chatmem stores %d items, the session read %d, want 22", len(items), len(res.Items))
	}
	for i, it := range items {
		var s struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			CallID string `json:"call_id"`
			Name   string `json:"name"`
		}
		_ = json.Unmarshal(it.raw, &s)
		got := res.Items[i]
		if s.Type == "function_call_output" {
			// The SDK's own name for it, named after the call.
			s.Type, s.Name = "function_call_result", s.CallID
		}
		if got.ID != it.id || got.Type != s.Type || got.Role != s.Role || got.Name != s.Name || got.CallID != s.CallID {
			t.Errorf("item %d: the session has %+v, chatmem %s", i, got, it.raw)
		}
		if s.Type == "message" && !strings.Contains(string(got.Content), s.Content[0].Text) {
			t.Errorf("item %d: the session has content %s, chatmem %s", i, got.Content, it.raw)
		}
	}
}

// wantAISDKStore checks the store after testdata/node/ai-sdk-responses.mjs ran: the
// five responses of testdata/node/ai-sdk-responses.mjs are one
// conversation holding each turn's message and reply, item by item.
func wantAISDKStore(t *testing.T, env *proxyEnv, lines []string) {
	t.Helper()
	var res struct {
		IDs   []string `json:"ids"`
		Texts []string `json:"texts"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || len(res.IDs) != 5 {
		t.Fatalf("ai-sdk output: %v\n%q", err, lines)
	}
	key, _, _ := parseResponseID("acme", res.IDs[0])
	for i, id := range res.IDs {
		k, seq, ok := parseResponseID("acme", id)
		if !ok || k != key || seq != int64(2*i+2) {
			t.Errorf("response %d: %s, want seq %d of %s", i+1, id, 2*i+2, key.ID)
		}
		if want := fmt.Sprintf("answer %d", i+1); res.Texts[i] != want {
			t.Errorf("turn %d: the SDK read %q, want %q", i+1, res.Texts[i], want)
		}
	}
	var items []item
	for _, m := range env.stored(t, key.ID) {
		items = append(items, messageItems(m)...)
	}
	if len(items) != 10 {
		t.Fatalf("%d items stored, want 10", len(items))
	}
	for i, it := range items {
		var s struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(it.raw, &s)
		role, text := "user", fmt.Sprintf("turn %d: tell me more", i/2+1)
		if i%2 == 1 {
			role, text = "assistant", res.Texts[i/2]
		}
		if s.Type != "message" || s.Role != role || len(s.Content) != 1 || s.Content[0].Text != text {
			t.Errorf("item %d: %s, want a %s message %q", i, it.raw, role, text)
		}
	}
}
