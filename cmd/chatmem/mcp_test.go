package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/mcpserver"
)

// seedMessages is the seed's five messages as append_messages arguments.
func seedMessages() []map[string]any {
	var msgs []map[string]any
	for _, m := range seed.History() {
		msgs = append(msgs, map[string]any{"role": string(m.Role), "content": m.Content})
	}
	return msgs
}

// callTool calls a tool that must succeed and decodes its structured
// content into out.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): %v", name, args, res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", name, b, err)
	}
}

// doneWhen is the done-when over one client session: append the
// seed, the window at budget 40, facts, a search far back, list, delete.
func doneWhen(t *testing.T, cs *mcp.ClientSession, conv string) {
	var app mcpserver.AppendOutput
	callTool(t, cs, "append_messages", map[string]any{"conversation": conv, "messages": seedMessages()}, &app)
	if len(app.Messages) != 5 || app.LastSeq != 5 {
		t.Fatalf("append_messages = %+v", app)
	}
	var w mcpserver.ContextOutput
	callTool(t, cs, "get_context", map[string]any{"conversation": conv, "budget": 40}, &w)
	if len(w.Messages) != 3 || w.Tokens != 36 {
		t.Fatalf("get_context(budget 40) = %d messages, %d tokens; want 3, 36", len(w.Messages), w.Tokens)
	}
	var set mcpserver.SetFactOutput
	callTool(t, cs, "set_fact", map[string]any{"conversation": conv, "key": "name", "value": "Kavya"}, &set)
	var facts mcpserver.FactsOutput
	callTool(t, cs, "get_facts", map[string]any{"conversation": conv}, &facts)
	// The rules extractor may have found others (order_id, language) in the
	// background; the one set is there, set by the app.
	if i := slices.IndexFunc(facts.Facts, func(f mcpserver.Fact) bool { return f.Key == "name" }); i < 0 || facts.Facts[i].Value != "Kavya" || facts.Facts[i].SetBy != "app" {
		t.Fatalf("get_facts = %+v, want name=Kavya set by app", facts)
	}
	var found mcpserver.SearchOutput
	callTool(t, cs, "search_memory", map[string]any{"conversation": conv, "query": "SE-10423"}, &found)
	if len(found.Hits) == 0 || found.Hits[0].Seq != 1 {
		t.Fatalf("search_memory(SE-10423) = %+v, want message 1", found.Hits)
	}
	bad, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "append_messages", Arguments: map[string]any{
		"conversation": conv, "messages": []any{map[string]any{"role": "user", "content": "ok"}, map[string]any{"role": "robot", "content": "beep"}}}})
	if err != nil || !bad.IsError {
		t.Fatalf("append_messages with an unknown role = %+v, %v; want a tool error", bad, err)
	}
	var list mcpserver.ListOutput
	callTool(t, cs, "list_conversations", map[string]any{}, &list)
	if len(list.Conversations) != 1 || list.Conversations[0].ID != conv || list.Conversations[0].Messages != 5 {
		t.Fatalf("list_conversations = %+v, want %s with 5 messages", list, conv)
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: mcpserver.ResourcePrefix + conv})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "SE-10423") {
		t.Fatalf("resources/read = %+v, %v", rr, err)
	}
	var del mcpserver.DeleteOutput
	callTool(t, cs, "delete_conversation", map[string]any{"conversation": conv}, &del)
	callTool(t, cs, "list_conversations", map[string]any{}, &list)
	if len(list.Conversations) != 0 {
		t.Fatalf("list_conversations after delete = %+v", list)
	}
}

// TestMCPStdio runs `chatmem mcp` in-process on pipes and drives it with
// the Go SDK's client. With CHATMEM_MCP_TRANSCRIPT set, the session's
// JSON-RPC messages are written to that file (docs/mcp.md shows one).
func TestMCPStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp", "--store", "sqlite:" + filepath.Join(t.TempDir(), "m.db"), "--tenant", "acme", "--tokenizer", "estimate", "--log-level", "warn"}, inR, outW, io.Discard)
		outW.Close()
	}()
	var transcript bytes.Buffer
	tr := &mcp.LoggingTransport{Transport: &mcp.IOTransport{Reader: outR, Writer: inW}, Writer: &transcript}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "chatmem-test", Version: "v0"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	doneWhen(t, cs, "kavya-1")
	cs.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("chatmem mcp returned %v when the client closed stdin", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("chatmem mcp did not exit when the client closed stdin")
	}
	if path := os.Getenv("CHATMEM_MCP_TRANSCRIPT"); path != "" {
		if err := os.WriteFile(path, transcript.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMCPRefusesBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--tenant", "a/b"}, "tenant"},
		{[]string{"--tokenizer", "gpt2"}, "unknown tokenizer"},
		{[]string{"--store", "mysql://x"}, "unknown store URL"},
		{[]string{"--addr", "127.0.0.1:0"}, "mcp: unknown flag --addr; run chatmem mcp --help"},
		{[]string{"extra"}, "no arguments"},
	} {
		_, errOut, code := runCLI(t, "", append([]string{"mcp", "--data-dir", t.TempDir()}, tt.args...)...)
		if code != 2 || !strings.Contains(errOut, tt.msg) {
			t.Errorf("mcp %v: exit %d, %q; want exit 2 mentioning %q", tt.args, code, errOut, tt.msg)
		}
	}
}

// startServe runs `chatmem serve` on a loopback port with two tenants'
// keys, until the test ends, and returns its base URL.
func startServe(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Setenv("CHATMEM_API_KEYS", "acme:k1,globex:k2")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tokenizer", "estimate", "--log-level", "warn"}, nil, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading the listen line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return strings.TrimSpace(strings.TrimPrefix(line, "chatmem listening on "))
}

type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPServeHTTP: `chatmem serve` serves MCP at /mcp with the API keys:
// the done-when over HTTP, and the other tenant sees nothing.
func TestMCPServeHTTP(t *testing.T) {
	base := startServe(t)
	connect := func(key string) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "chatmem-test", Version: "v0"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	acme, globex := connect("k1"), connect("k2")
	var app mcpserver.AppendOutput
	callTool(t, acme, "append_messages", map[string]any{"conversation": "theirs", "messages": seedMessages()}, &app)
	var list mcpserver.ListOutput
	callTool(t, globex, "list_conversations", map[string]any{}, &list)
	if len(list.Conversations) != 0 {
		t.Errorf("globex lists %+v", list.Conversations)
	}
	res, err := globex.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_context", Arguments: map[string]any{"conversation": "theirs", "budget": 40}})
	if err != nil || !res.IsError {
		t.Errorf("globex get_context of acme's conversation = %+v, %v; want a tool error", res, err)
	}
	callTool(t, acme, "delete_conversation", map[string]any{"conversation": "theirs"}, &mcpserver.DeleteOutput{})
	doneWhen(t, acme, "kavya-http")

	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/mcp without a key: status %d, want 401", resp.StatusCode)
	}
}

// TestMCPNodeClient runs testdata/mcp-node/mcp-client.mjs, the official MCP
// TypeScript SDK client, against `chatmem mcp` (the built binary, spawned
// over stdio, two tenants on one SQLite file) and against /mcp of
// `chatmem serve`. .ci/run installs the package with
// `npm ci --prefix testdata/mcp-node`; without Node.js or the package the
// test skips, or fails under CI=true.
func TestMCPNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipOrFail(t, "Node.js is not installed: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "mcp-node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.SkipOrFail(t, "the @modelcontextprotocol/sdk npm package is not installed (run npm ci --prefix testdata/mcp-node): %v", err)
	}
	bin := filepath.Join(t.TempDir(), "chatmem")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	base := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "mcp-client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"CHATMEM_BIN="+bin,
		"CHATMEM_STORE=sqlite:"+filepath.Join(t.TempDir(), "stdio.db"),
		"CHATMEM_MCP_URL="+base+"/mcp",
		"CHATMEM_API_KEY=k1",
		"CHATMEM_OTHER_KEY=k2",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node mcp-client.mjs: %v\n%s", err, out)
	}
	t.Logf("node client:\n%s", out)
	if !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Errorf("node client did not finish: %s", out)
	}
}

// TestMCPStdioMalformedLines pipes raw lines to `chatmem mcp`: initialize,
// a line that is not JSON, tools/list, then tool calls with invalid UTF-8
// and a lone surrogate. Each gets its answer (-32700 with ID null for the
// garbage, a tool error naming the bad text for the calls, which store
// nothing), and the process serves on until stdin closes.
func TestMCPStdioMalformedLines(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(context.Background(), []string{"mcp", "--store", "sqlite:" + filepath.Join(t.TempDir(), "m.db"), "--tenant", "acme", "--tokenizer", "estimate", "--log-level", "error"}, inR, outW, io.Discard)
		outW.Close()
		inR.CloseWithError(fmt.Errorf("chatmem mcp returned %v", err)) // a write to stdin fails from now on
		done <- err
	}()
	answers := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			answers <- sc.Text()
		}
		close(answers)
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("writing %.60q: %v (chatmem mcp stopped reading)", line, err)
		}
	}
	type answer struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			ServerInfo map[string]any   `json:"serverInfo"`
			Tools      []map[string]any `json:"tools"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	// collect reads n answers, by ID ("null" for none).
	collect := func(n int) map[string]answer {
		t.Helper()
		got := map[string]answer{}
		for range n {
			select {
			case line, ok := <-answers:
				if !ok {
					t.Fatalf("chatmem mcp closed stdout after %d answers of %d", len(got), n)
				}
				var a answer
				if err := json.Unmarshal([]byte(line), &a); err != nil {
					t.Fatalf("answer %q: %v", line, err)
				}
				id := string(a.ID)
				if id == "" {
					id = "null"
				}
				got[id] = a
			case <-time.After(30 * time.Second):
				t.Fatalf("%d answers of %d in 30s", len(got), n)
			}
		}
		return got
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	send(`{"jsonrpc":"2.0","id":1,"method":"initiali`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	got := collect(3)
	if a := got["1"]; a.Error != nil || a.Result.ServerInfo["name"] != "chatmem" {
		t.Errorf("initialize answered %+v, want its result", a)
	}
	if a := got["null"]; a.Error == nil || a.Error.Code != -32700 {
		t.Errorf("the broken line answered %+v, want -32700 with ID null", a)
	}
	if a := got["2"]; a.Error != nil || len(a.Result.Tools) == 0 {
		t.Errorf("tools/list after it answered %+v, want the tools", a)
	}

	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"append_messages","arguments":{"conversation":"c1","messages":[{"role":"user","content":"caf` + "\xe9" + `"}]}}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"set_fact","arguments":{"user":"u1","key":"name","value":"K\ud800"}}}`)
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_conversations","arguments":{}}}`)
	got = collect(3)
	for id, want := range map[string]string{"3": "invalid UTF-8", "4": "surrogate"} {
		if a := got[id]; !a.Result.IsError || len(a.Result.Content) == 0 || !strings.Contains(a.Result.Content[0].Text, want) {
			t.Errorf("call %s answered %+v, want a tool error naming %s", id, a, want)
		}
	}
	if a := got["5"]; a.Result.IsError || len(a.Result.Content) == 0 || !strings.HasPrefix(a.Result.Content[0].Text, "0 conversation(s)") {
		t.Errorf("list_conversations after the refused calls answered %+v, want none stored", a)
	}

	select {
	case err := <-done:
		t.Fatalf("chatmem mcp ended (%v) with stdin open", err)
	default:
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("chatmem mcp returned %v when stdin closed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("chatmem mcp did not exit when stdin closed")
	}
}

// TestMCPServeHTTPBadText: /mcp of `chatmem serve` refuses a tool call
// with invalid UTF-8 with a tool error and stores nothing, as the REST API
// refuses it with 400.
func TestMCPServeHTTPBadText(t *testing.T) {
	base := startServe(t)
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"set_fact",`+
		`"arguments":{"user":"u1","key":"name","value":"K`+"\xff"+`"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"isError":true`) || !strings.Contains(string(body), "invalid UTF-8") {
		t.Errorf("set_fact with invalid UTF-8: status %d, %s; want 200 and a tool error naming it", resp.StatusCode, body)
	}
	facts, err := http.NewRequest(http.MethodGet, base+"/v1/users/u1/facts", nil)
	if err != nil {
		t.Fatal(err)
	}
	facts.Header.Set("Authorization", "Bearer k1")
	fr, err := http.DefaultClient.Do(facts)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Body.Close()
	fb, _ := io.ReadAll(fr.Body)
	if strings.Contains(string(fb), `"name"`) {
		t.Errorf("the refused set_fact stored: %s", fb)
	}
}
