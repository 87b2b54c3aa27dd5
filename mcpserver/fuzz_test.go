package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fuzzTools are the tools FuzzTools calls, by index.
var fuzzTools = []string{
	"append_messages", "get_context", "search_memory", "get_facts",
	"set_fact", "delete_fact", "list_conversations", "delete_conversation",
}

// FuzzTools calls the tools with arbitrary arguments over the in-memory
// transport. Whatever the arguments, the answer is a tool result, never a
// protocol error; a failed call (isError) has a message and writes
// nothing; a successful one has structured content.
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
