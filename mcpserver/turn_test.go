package mcpserver_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/chatmem/chatmem/mcpserver"
)

// TestAppendWithContext: append_messages with a context is a chatbot's
// turn in one call: its window ends with the appended message and equals
// what get_context answers right after, turn after turn with a reply in
// between; a window that cannot be assembled is a tool error that says
// the messages were stored, and they were.
func TestAppendWithContext(t *testing.T) {
	cs := connectInMemory(t, newMemory(t), "acme")
	for i := range 5 {
		q := fmt.Sprintf("question %d about order SE-10423", i+1)
		var out mcpserver.AppendOutput
		res := mustOK(t, cs, "append_messages", map[string]any{"conversation": "c1", "user": "kavya",
			"messages": []any{map[string]any{"role": "user", "content": q}}, "context": map[string]any{"budget": 40}}, &out)
		if out.Context == nil {
			t.Fatalf("turn %d: no context in %+v", i+1, out)
		}
		w := out.Context
		if n := len(w.Messages); n == 0 || w.Messages[n-1].Seq != out.LastSeq || w.Messages[n-1].Content != q {
			t.Fatalf("turn %d: window %+v does not end with the appended message (seq %d)", i+1, w.Messages, out.LastSeq)
		}
		if w.Policy != "token_budget" || w.Tokens > 40 {
			t.Errorf("turn %d: window under %s with %d tokens, want token_budget within 40", i+1, w.Policy, w.Tokens)
		}
		if !strings.Contains(text(res), "Context: ") {
			t.Errorf("turn %d: text %q does not show the window", i+1, text(res))
		}
		var now mcpserver.ContextOutput
		mustOK(t, cs, "get_context", map[string]any{"conversation": "c1", "budget": 40}, &now)
		if !reflect.DeepEqual(*w, now) {
			t.Errorf("turn %d: window %+v, want get_context's %+v", i+1, *w, now)
		}
		mustOK(t, cs, "append_messages", map[string]any{"conversation": "c1",
			"messages": []any{map[string]any{"role": "assistant", "content": "It is on its way."}}}, nil)
	}

	// Without context, no window.
	var plain mcpserver.AppendOutput
	mustOK(t, cs, "append_messages", map[string]any{"conversation": "c1", "messages": []any{map[string]any{"role": "user", "content": "thanks"}}}, &plain)
	if plain.Context != nil {
		t.Errorf("append without context answered a window: %+v", plain.Context)
	}

	// A budget the window cannot fit: the append stands, and the error says so.
	mustFail(t, cs, "append_messages", map[string]any{"conversation": "c1", "messages": []any{map[string]any{"role": "user", "content": "one more question, a long one this time"}},
		"context": map[string]any{"budget": 3}}, "Stored 1 message(s) in c1 (user kavya) as seq 12-12")
	var after mcpserver.ContextOutput
	mustOK(t, cs, "get_context", map[string]any{"conversation": "c1", "policy": "all"}, &after)
	if n := len(after.Messages); after.Messages[n-1].Seq != 12 {
		t.Errorf("after the failed window the conversation ends at seq %d, want 12 (the append landed)", after.Messages[n-1].Seq)
	}
}
