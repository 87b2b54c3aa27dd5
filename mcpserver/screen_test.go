package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/mcpserver"
)

// rawSession is a server on the package's IOTransport driven line by line,
// as a client that starts `chatmem mcp` drives its stdin and stdout.
type rawSession struct {
	in      *io.PipeWriter
	answers chan []byte
	done    chan error
}

func newRawSession(t testing.TB, mem *chatmem.Memory, maxLine int) *rawSession {
	t.Helper()
	srv, err := mcpserver.New(mem, "acme", mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &rawSession{in: inW, answers: make(chan []byte, 100), done: make(chan error, 1)}
	go func() {
		s.done <- srv.Run(context.Background(), &mcpserver.IOTransport{Reader: inR, Writer: outW, MaxLineBytes: maxLine})
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.answers <- slices.Clone(sc.Bytes())
		}
		close(s.answers)
	}()
	t.Cleanup(func() { s.close(t) })
	return s
}

// send writes line and its newline.
func (s *rawSession) send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatalf("writing %q: %v (the server stopped reading)", line, err)
	}
}

// next is the next answer.
func (s *rawSession) next(t testing.TB) answer {
	t.Helper()
	select {
	case b, ok := <-s.answers:
		if !ok {
			t.Fatal("the server closed its output")
		}
		var a answer
		if b[0] == '[' {
			return answer{raw: b} // a batch's answers
		}
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
		a.raw = b
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10s")
	}
	return answer{}
}

// close closes stdin and waits for the server to end.
func (s *rawSession) close(t testing.TB) {
	t.Helper()
	s.in.Close()
	select {
	case err := <-s.done:
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Errorf("the server ended with %v when stdin closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the server did not end when stdin closed")
	}
}

// running fails the test if the server has ended.
func (s *rawSession) running(t testing.TB) {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		t.Fatalf("the server ended (%v) with stdin open", err)
	default:
	}
}

// answer is one JSON-RPC answer, as the wire has it.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw []byte
}

// id is the answer's ID as JSON text ("null" when it has none).
func (a answer) id() string {
	if len(a.ID) == 0 {
		return "null"
	}
	return string(a.ID)
}

// toolError is the text of a tool result with isError set, or "" when the
// answer is something else.
func (a answer) toolError() string {
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if a.Error != nil || json.Unmarshal(a.Result, &res) != nil || !res.IsError || len(res.Content) == 0 {
		return ""
	}
	return res.Content[0].Text
}

func ping(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id) }

// stdioInitialize is an initialize of a version with batches, then the
// initialized notification.
const stdioInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// TestStdioMalformedLines: a line that is not JSON is answered -32700
// (ID null), one that is not a JSON-RPC message -32600, and the server
// goes on serving: the requests before and after are answered, and it
// ends only when stdin closes.
func TestStdioMalformedLines(t *testing.T) {
	s := newRawSession(t, newMemory(t), 4096)
	s.send(t, stdioInitialize)
	s.send(t, "this is not JSON")
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	got := map[string]answer{}
	for range 3 {
		a := s.next(t)
		got[a.id()] = a
	}
	if a := got["1"]; a.Error != nil || !bytes.Contains(a.Result, []byte(`"serverInfo"`)) {
		t.Errorf("initialize answered %s, want its result", a.raw)
	}
	if a := got["null"]; a.Error == nil || a.Error.Code != -32700 || !strings.Contains(a.Error.Message, "parse error") {
		t.Errorf("the line that is not JSON answered %s, want -32700 with ID null", a.raw)
	}
	if a := got["2"]; a.Error != nil || !bytes.Contains(a.Result, []byte(`"append_messages"`)) {
		t.Errorf("tools/list after it answered %s, want the tools", a.raw)
	}
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	cases := []struct {
		line string
		id   string
		code int
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"ping"`, "null", -32700},
		{`{"jsonrpc":"2.0","id":3,"method":"ping"} {"jsonrpc":"2.0","id":4,"method":"ping"}`, "null", -32700},
		{"\xff\xfe{}", "null", -32700},
		{`{"foo":1}`, "null", -32600},
		{`{"jsonrpc":"2.0","id":4,"method":5}`, "4", -32600},
		{`{"jsonrpc":"1.0","id":"five","method":"ping"}`, `"five"`, -32600},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, "null", -32600},
		{`[]`, "null", -32600},
		{`[1,2]`, "null", -32600},
		{`"hello"`, "null", -32600},
		{`42`, "null", -32600},
		{`null`, "null", -32600},
		{`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":"` + strings.Repeat("x", 5000) + `"}}`, "null", -32600},
	}
	for i, c := range cases {
		s.send(t, c.line)
		s.send(t, "")     // blank lines are skipped,
		s.send(t, "  \r") // unanswered
		s.send(t, ping(100+i))
		// The screen answers a line before it reads the next, so the
		// refusal comes before the ping's answer.
		a := s.next(t)
		if a.Error == nil || a.Error.Code != c.code || a.id() != c.id {
			t.Errorf("%.80q answered %s, want %d with ID %s", c.line, a.raw, c.code, c.id)
		}
		if p := s.next(t); p.id() != fmt.Sprint(100+i) || p.Error != nil {
			t.Errorf("ping after %.80q answered %s, want its result", c.line, p.raw)
		}
		s.running(t)
	}
	s.send(t, `{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\r")
	if a := s.next(t); a.id() != "7" || a.Error != nil {
		t.Errorf("a ping ending in CRLF answered %s", a.raw)
	}
}

// TestStdioBatches: a batch is served while the protocol version has
// batches, and refused -32600, not the session's end, after an initialize
// of 2025-06-18 or later.
func TestStdioBatches(t *testing.T) {
	s := newRawSession(t, newMemory(t), 0)
	s.send(t, stdioInitialize)
	s.next(t)
	s.send(t, `[`+ping(2)+`,`+ping(3)+`]`)
	a := s.next(t)
	var batch []answer
	if err := json.Unmarshal(a.raw, &batch); err != nil || len(batch) != 2 {
		t.Fatalf("a batch of two pings at 2025-03-26 answered %s, want two answers", a.raw)
	}

	s = newRawSession(t, newMemory(t), 0)
	s.send(t, strings.Replace(stdioInitialize, "2025-03-26", "2025-06-18", 1))
	s.next(t)
	s.send(t, `[`+ping(2)+`,`+ping(3)+`]`)
	s.send(t, ping(4))
	if a := s.next(t); a.Error == nil || a.Error.Code != -32600 || a.id() != "null" || !strings.Contains(a.Error.Message, "batches") {
		t.Errorf("a batch at 2025-06-18 answered %s, want -32600 with ID null", a.raw)
	}
	if a := s.next(t); a.id() != "4" || a.Error != nil {
		t.Errorf("ping after the batch answered %s", a.raw)
	}
	s.running(t)
}

// TestStdioBadText: invalid UTF-8 and lone surrogate escapes are refused
// on the raw line, before the SDK's decoder would turn them into U+FFFD: a
// tools/call with a tool error, another request with -32602, each naming
// the problem; a notification is not answered; nothing is stored.
func TestStdioBadText(t *testing.T) {
	mem := newMemory(t)
	s := newRawSession(t, mem, 0)
	s.send(t, stdioInitialize)
	s.next(t)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := func(id int, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
	}

	s.send(t, call(10, "append_messages", `{"conversation":"c1","messages":[{"role":"user","content":"caf`+"\xe9"+`"}]}`))
	if a := s.next(t); a.id() != "10" || !strings.Contains(a.toolError(), "invalid UTF-8 at byte") {
		t.Errorf("append_messages with Latin-1 text answered %s, want a tool error naming invalid UTF-8", a.raw)
	}
	s.send(t, call(11, "set_fact", `{"user":"u1","key":"name","value":"K\ud800"}`))
	if a := s.next(t); a.id() != "11" || !strings.Contains(a.toolError(), "surrogate") {
		t.Errorf("set_fact with a lone surrogate answered %s, want a tool error naming it", a.raw)
	}
	s.send(t, `{"jsonrpc":"2.0","id":12,"method":"resources/read","params":{"uri":"chatmem://conversations/c`+"\xff"+`"}}`)
	if a := s.next(t); a.id() != "12" || a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "invalid UTF-8") {
		t.Errorf("resources/read with invalid UTF-8 answered %s, want -32602 naming it", a.raw)
	}
	s.send(t, `{"jsonrpc":"2.0","id":"`+"\xff"+`","method":"ping"}`)
	if a := s.next(t); a.id() != "null" || a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("a ping whose ID is invalid UTF-8 answered %s, want -32602 with ID null", a.raw)
	}
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"\udc00"}}`)
	s.send(t, ping(13))
	if a := s.next(t); a.id() != "13" {
		t.Errorf("after a notification with a lone surrogate, the next answer is %s, want the ping's", a.raw)
	}
	s.send(t, `[`+call(14, "set_fact", `{"user":"u1","key":"k","value":"`+"\xc3"+`"}`)+`,`+ping(15)+`,{"jsonrpc":"2.0","method":"notifications/progress"}]`)
	a := s.next(t)
	var batch []answer
	if err := json.Unmarshal(a.raw, &batch); err != nil || len(batch) != 2 || batch[0].id() != "14" || !strings.Contains(batch[0].toolError(), "invalid UTF-8") ||
		batch[1].id() != "15" || batch[1].Error == nil || batch[1].Error.Code != -32602 {
		t.Errorf("a batch with invalid UTF-8 answered %s, want a tool error for 14 and -32602 for 15", a.raw)
	}
	if got := state(t, mem, "acme", "u1"); got != "user u1\n" {
		t.Errorf("the refused calls stored:\n%s", got)
	}
	s.running(t)
}

// validArgs are arguments that each tool takes, the text fields between
// them given. TestBadTextEveryTool puts bad text in each string in turn. A
// tool the server lists must be here, so a new tool is covered.
var validArgs = map[string][]string{
	"append_messages": {`{"conversation":"c1","user":"u1","messages":[{"role":"user","content":"Where is SE-10423?","name":"kavya"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"track","arguments":"{\"order\":\"SE-10423\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"out for delivery"}]}`},
	"get_context":         {`{"conversation":"c1","policy":"recall","scope":"user"}`, `{"conversation":"c1","policy":"token_budget","cache":"stable"}`},
	"search_memory":       {`{"conversation":"c1","query":"SE-10423"}`, `{"user":"u1","query":"SE-10423"}`},
	"get_facts":           {`{"conversation":"c1"}`, `{"user":"u1"}`},
	"set_fact":            {`{"conversation":"c1","key":"order_id","value":"SE-10423"}`, `{"user":"u1","key":"name","value":"Kavya"}`},
	"delete_fact":         {`{"conversation":"c1","key":"order_id"}`, `{"user":"u1","key":"name"}`},
	"list_conversations":  {`{"user":"u1","cursor":"a"}`},
	"delete_conversation": {`{"conversation":"c1"}`},
}

// badTexts are the JSON string contents CheckJSONText refuses, and what the
// refusal names.
var badTexts = []struct{ text, names string }{
	{"Caf\xe9", "invalid UTF-8"},
	{"\xed\xa0\x80", "invalid UTF-8"}, // a surrogate encoded in UTF-8
	{`K\ud800`, "surrogate"},
	{`\udc00K`, "surrogate"},
	{`\ud800\u0041`, "surrogate"},
}

// withBadText returns args once for each string in it (keys and values),
// that string replaced by each of badTexts.
func withBadText(t *testing.T, args string) []string {
	t.Helper()
	var out []string
	dec := json.NewDecoder(strings.NewReader(args))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if _, ok := tok.(string); !ok {
			continue
		}
		// The token's text starts at the first quote after start.
		from := start + int64(strings.IndexByte(args[start:], '"'))
		to := dec.InputOffset()
		for _, b := range badTexts {
			out = append(out, args[:from]+`"`+b.text+`"`+args[to:])
		}
	}
}

// badTextEveryTool calls every tool the server lists with bad text in
// each of its strings: each call is a tool error naming the problem, and
// the store is as before.
func badTextEveryTool(t *testing.T, cs *mcp.ClientSession, mem *chatmem.Memory, tenant string) {
	mustOK(t, cs, "append_messages", hello("c1", "u1"), nil)
	mustOK(t, cs, "set_fact", map[string]any{"conversation": "c1", "key": "order_id", "value": "SE-10423"}, nil)
	mustOK(t, cs, "set_fact", map[string]any{"user": "u1", "key": "name", "value": "Kavya"}, nil)
	before := state(t, mem, tenant, "u1")
	calls := 0
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		argsList, ok := validArgs[tool.Name]
		if !ok {
			t.Errorf("tool %s has no validArgs: add its arguments, with each of its string fields", tool.Name)
			continue
		}
		// Every string field of the tool's input is among the arguments.
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			t.Fatal(err)
		}
		for name, p := range s.Properties {
			if p.Type != "string" {
				continue
			}
			if !slices.ContainsFunc(argsList, func(a string) bool { return strings.Contains(a, `"`+name+`":`) }) {
				t.Errorf("validArgs[%s] leaves out its string field %s", tool.Name, name)
			}
		}
		for _, args := range argsList {
			for _, bad := range withBadText(t, args) {
				calls++
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool.Name, Arguments: json.RawMessage(bad)})
				if err != nil {
					t.Fatalf("%s(%q): protocol error %v, want a tool error", tool.Name, bad, err)
				}
				if got := text(res); !res.IsError || !strings.Contains(got, "request refused") ||
					!strings.Contains(got, "UTF-8") && !strings.Contains(got, "surrogate") {
					t.Errorf("%s(%q) = isError %v, %q; want a tool error naming the bad text", tool.Name, bad, res.IsError, got)
				}
				if after := state(t, mem, tenant, "u1"); after != before {
					t.Fatalf("%s(%q) changed the store:\n%s\nwant\n%s", tool.Name, bad, after, before)
				}
			}
		}
	}
	if calls < 100 {
		t.Errorf("%d calls with bad text, want every string of every tool", calls)
	}
}

// TestBadTextEveryTool: over stdio's transport (in process) and over HTTP,
// every string of every tool's arguments is screened.
func TestBadTextEveryTool(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		mem := newMemory(t)
		badTextEveryTool(t, connectInMemory(t, mem, "acme"), mem, "acme")
	})
	t.Run("http", func(t *testing.T) {
		env := newHTTPEnv(t, httpapi.Options{})
		badTextEveryTool(t, env.connect(t, acmeKey), env.mem, "acme")
	})
}

// TestHTTPBadText: over HTTP, a refused call is answered 200 with its
// JSON-RPC answer (a tool error for tools/call, -32602 otherwise), a body
// without a call 400 with a JSON-RPC error of ID null; a body too large
// is still 413.
func TestHTTPBadText(t *testing.T) {
	env := newHTTPEnv(t, httpapi.Options{Limits: httpapi.Limits{MaxBodyBytes: 4096}})
	decode := func(resp *http.Response) answer {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		var a answer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("status %d, body %q: %v", resp.StatusCode, b, err)
		}
		a.raw = b
		return a
	}
	resp := post(t, env.url, acmeKey, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"append_messages","arguments":`+
		`{"conversation":"c1","messages":[{"role":"user","content":"caf`+"\xe9"+`"}]}}}`)
	if a := decode(resp); resp.StatusCode != http.StatusOK || a.id() != "5" || !strings.Contains(a.toolError(), "invalid UTF-8 at byte") {
		t.Errorf("append_messages with Latin-1: status %d, %s; want 200 and a tool error", resp.StatusCode, a.raw)
	}
	resp = post(t, env.url, acmeKey, strings.Replace(initialize, `"curl"`, `"c\udfff"`, 1))
	if a := decode(resp); resp.StatusCode != http.StatusOK || a.id() != "1" || a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "surrogate") {
		t.Errorf("initialize with a lone surrogate: status %d, %s; want 200 and -32602", resp.StatusCode, a.raw)
	}
	resp = post(t, env.url, acmeKey, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"`+"\xff"+`"}}`)
	if a := decode(resp); resp.StatusCode != http.StatusBadRequest || a.id() != "null" || a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("a notification with invalid UTF-8: status %d, %s; want 400 and -32602 with ID null", resp.StatusCode, a.raw)
	}
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"append_messages","arguments":{"conversation":"c1","messages":[{"role":"user","content":"` +
		strings.Repeat("\xff", 8192) + `"}]}}}`
	if resp := post(t, env.url, acmeKey, big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an 8 KiB body over a 4 KiB limit: status %d, want 413", resp.StatusCode)
	}
	if got := state(t, env.mem, "acme"); got != "" {
		t.Errorf("the refused requests stored %q", got)
	}
	// The rest is served as before.
	if resp := post(t, env.url, acmeKey, initialize); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize: status %d", resp.StatusCode)
	}
}
