package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
)

// fuzzTools are the tools FuzzTools calls, by index.
var fuzzTools = []string{
	"append_messages", "get_context", "search_memory", "get_facts",
	"set_fact", "delete_fact", "list_conversations", "delete_conversation",
}

// FuzzTools calls the tools with arbitrary arguments over the in-memory
// connection (through IOTransport's screen). Whatever the arguments, the
// answer is a tool result, never a protocol error; a failed call (isError)
// has a message and writes nothing; a successful one has structured
// content; arguments with text CheckJSONText refuses are refused.
func FuzzTools(f *testing.F) {
	seeds := []struct {
		tool uint8
		args string
	}{
		{0, `{"conversation":"c1","messages":[{"role":"user","content":"Hi, I'm Kavya. My order SE-10423 hasn't arrived."}]}`},
		{0, `{"conversation":"c1","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"name":"track","arguments":"{\"order\":\"SE-10423\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"out for delivery"}]}`},
		{0, `{"conversation":"c1","messages":[{"role":"tool","tool_call_id":"nope","content":"x"}]}`},
		{0, `{"conversation":"c1","messages":[{"role":"user","content":"ok"},{"role":"robot","content":"x"}]}`},
		{0, `{"conversation":"-bad","messages":[]}`},
		{1, `{"conversation":"c1","budget":40}`},
		{1, `{"conversation":"c1","policy":"last_turns","turns":2,"facts":true}`},
		{1, `{"conversation":"c1","policy":"recall","budget":1}`},
		{1, `{"conversation":"c1","policy":"summary_buffer","budget":9223372036854775807}`},
		{2, `{"conversation":"c1","query":"SE-10423","limit":3}`},
		{3, `{"conversation":"c1"}`},
		{4, `{"conversation":"c1","key":"name","value":"Kavya"}`},
		{4, `{"conversation":"c1","key":"Name","value":"\u0000"}`},
		{5, `{"conversation":"c1","key":"name"}`},
		{6, `{"limit":1,"cursor":"c0"}`},
		{7, `{"conversation":"c1"}`},
		{0, `{"conversation":"c2","user":"u1","messages":[{"role":"user","content":"I'm Kavya"}]}`},
		{0, `{"conversation":"c1","user":"u2","messages":[{"role":"user","content":"hi"}]}`},
		{3, `{"user":"u1"}`},
		{3, `{"conversation":"c1","user":"u1"}`},
		{4, `{"user":"u1","key":"language","value":"Tamil"}`},
		{5, `{"user":"u1","key":"language"}`},
		{6, `{"user":"u1","limit":1}`},
		{0, `[]`},
		{1, `null`},
		{2, `{"conversation":1}`},
		{0, `{"conversation":"c1","messages":[{"role":"user","content":"caf` + "\xe9" + `"}]}`},
		{4, `{"user":"u1","key":"name","value":"K\ud800"}`},
		{6, `{"user":"\udc00"}`},
	}
	for _, s := range seeds {
		f.Add(s.tool, []byte(s.args))
	}
	mem := newMemory(f)
	cs := connectInMemory(f, mem, "fuzz")
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		if !json.Valid(args) {
			return // the client cannot send it: it is not JSON
		}
		name := fuzzTools[int(tool)%len(fuzzTools)]
		before := state(t, mem, "fuzz", "u1", "u2")
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s(%s): protocol error %v", name, args, err)
		}
		if chatmem.CheckJSONText(args) != nil && (!res.IsError || !strings.Contains(text(res), "request refused")) {
			t.Fatalf("%s(%q) = isError %v, %q; want the bad text refused", name, args, res.IsError, text(res))
		}
		if res.IsError {
			if text(res) == "" {
				t.Fatalf("%s(%s): an error without a message", name, args)
			}
			if after := state(t, mem, "fuzz", "u1", "u2"); after != before {
				t.Fatalf("%s(%s) failed (%s) but changed the store:\n%s\nwant\n%s", name, args, text(res), after, before)
			}
			return
		}
		if res.StructuredContent == nil || text(res) == "" {
			t.Fatalf("%s(%s): success without structured content or text", name, args)
		}
	})
}

// FuzzIOTransport writes arbitrary lines to a server on IOTransport, then
// a ping. Whatever the lines, every answer is a JSON-RPC message, the ping
// is answered (the session goes on), and the server ends when stdin
// closes.
func FuzzIOTransport(f *testing.F) {
	for _, seed := range []string{
		stdioInitialize,
		stdioInitialize + "\nnot JSON\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		strings.Replace(stdioInitialize, "2025-03-26", "2025-06-18", 1) + "\n[" + ping(2) + "]",
		"[" + stdioInitialize + "," + ping(2) + "]\n[" + ping(3) + "]",
		`{"jsonrpc":"2.0","id":3,"method":"ping"`,
		"\xff\xfe{}\r\n\n  \n" + ping(4) + "\r",
		`{"jsonrpc":"2.0","id":4,"method":5}`,
		`{"jsonrpc":"1.0","id":"five","method":"ping"}`,
		`[]`, `[1,2]`, `"hello"`, `null`, `{"foo":1}`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"append_messages","arguments":{"conversation":"c1","messages":[{"role":"user","content":"caf` + "\xe9" + `"}]}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"set_fact","arguments":{"user":"u1","key":"name","value":"K\ud800"}}}`,
		`{"jsonrpc":"2.0","id":"` + "\xff" + `","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"\udc00"}}`,
		`{"jsonrpc":"2.0","id":12,"result":{}}`,
		`{"jsonrpc":"2.0","id":13,"method":"ping","params":{"x":"` + strings.Repeat("x", 2000) + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	mem := newMemory(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		s := newRawSession(t, mem, 1024)
		const last = `"fuzz-end"`
		go func() {
			// Unchecked: a failed write shows as the ping unanswered.
			io.WriteString(s.in, string(in)+"\n"+`{"jsonrpc":"2.0","id":`+last+`,"method":"ping"}`+"\n")
		}()
		for {
			a := s.next(t)
			var msgs []json.RawMessage // not a.raw's array: Unmarshal writes into its elements
			if a.raw[0] != '[' {
				msgs = []json.RawMessage{a.raw}
			} else if json.Unmarshal(a.raw, &msgs) != nil {
				t.Fatalf("answer %q is not JSON", a.raw)
			}
			for _, m := range msgs {
				var w struct {
					Version string `json:"jsonrpc"`
				}
				if json.Unmarshal(m, &w) != nil || w.Version != "2.0" {
					t.Fatalf("answer %q is not a JSON-RPC message", m)
				}
			}
			if bytes.Equal(a.ID, []byte(last)) {
				break
			}
		}
		s.running(t)
	})
}
