package openai

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/openai/openai-go/v3"

	"github.com/chatmem/chatmem"
)

var fuzzRoles = []chatmem.Role{chatmem.RoleSystem, chatmem.RoleUser, chatmem.RoleAssistant, chatmem.RoleTool}

// FuzzMessageParamsRoundTrip checks that a valid chatmem message goes to
// the SDK's request message and back unchanged: MessageParams, the SDK's
// own JSON encoding (what goes on the wire, without chatmem's seq, tokens,
// created_at or metadata), the SDK's decoding, then FromMessageParam give
// back the message's role, content, name, tool calls (type function, or
// custom) and tool_call_id.
func FuzzMessageParamsRoundTrip(f *testing.F) {
	f.Add(uint8(1), "Hi, I'm Kavya.", "kavya", "", "", "", false)
	f.Add(uint8(0), "You are ShopBot.", "", "", "", "", false)
	f.Add(uint8(2), "", "", "call_1", "lookup", `{"order":"SE-10423"}`, false)
	f.Add(uint8(2), "Let me check.", "bot", "call_2", "grep", "raw input, not JSON", true)
	f.Add(uint8(3), `{"status":"shipped"}`, "", "call_1", "", "", false)
	f.Add(uint8(1), "line\u2028para \"quoted\" <b>&amp;</b> \\", "", "", "", "", false)
	f.Fuzz(func(t *testing.T, role uint8, content, name, callID, fn, args string, custom bool) {
		m := chatmem.Message{Seq: 7, Tokens: 3, Role: fuzzRoles[int(role)%len(fuzzRoles)], Content: content, Name: name,
			Metadata: map[string]string{"k": "v"}}
		switch m.Role {
		case chatmem.RoleTool:
			m.ToolCallID, m.Name = callID, ""
		case chatmem.RoleAssistant:
			if callID != "" {
				typ := "function"
				if custom {
					typ = "custom"
				}
				m.ToolCalls = []chatmem.ToolCall{{ID: callID, Type: typ, Function: chatmem.FunctionCall{Name: fn, Arguments: args}}}
			}
		}
		if m.Validate(chatmem.Limits{}) != nil {
			return // Memory never returns such a message
		}
		if !utf8.ValidString(m.ToolCallID) || strings.ContainsRune(m.ToolCallID, 0) {
			// Validate leaves tool_call_id to ValidateHistory, which holds
			// it to the ID of a call, itself valid UTF-8 without NUL.
			return
		}
		params := MessageParams([]chatmem.Message{m})
		if len(params) != 1 {
			t.Fatalf("MessageParams(%+v) = %d messages, want 1", m, len(params))
		}
		wire, err := json.Marshal(params[0])
		if err != nil {
			t.Fatalf("marshal %+v: %v", params[0], err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(wire, &fields); err != nil {
			t.Fatalf("wire message %s is not an object: %v", wire, err)
		}
		var gotRole string
		if err := json.Unmarshal(fields["role"], &gotRole); err != nil || gotRole != string(m.Role) {
			t.Fatalf("wire message %s has role %q, want %s", wire, gotRole, m.Role)
		}
		for _, own := range []string{"seq", "tokens", "created_at", "metadata"} {
			if _, ok := fields[own]; ok {
				t.Fatalf("wire message %s carries chatmem's %s", wire, own)
			}
		}
		var p sdk.ChatCompletionMessageParamUnion
		if err := json.Unmarshal(wire, &p); err != nil {
			t.Fatalf("the SDK cannot decode %s: %v", wire, err)
		}
		back, err := FromMessageParam(p)
		if err != nil {
			t.Fatalf("FromMessageParam(%s): %v", wire, err)
		}
		want := chatmem.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("round trip through %s:\n got %+v\nwant %+v", wire, back, want)
		}
	})
}

// FuzzFromCompletion feeds arbitrary chat.completion bodies, decoded by
// the SDK, to FromCompletion: it never panics; no choice is ErrInvalid;
// otherwise the message is the first choice's, role assistant, content
// (or the refusal when there is none) and every tool call in order, with
// its ID and type; and a reply that is a valid message goes back through
// MessageParams and FromMessageParam unchanged.
func FuzzFromCompletion(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","refusal":null},"finish_reason":"stop"}]}`,
		`{"id":"c2","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"a\":1}"}},{"id":"call_2","type":"custom","custom":{"name":"grep","input":"x"}}]},"finish_reason":"tool_calls"}]}`,
		`{"id":"c3","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":"I can't help with that."}}]}`,
		`{"id":"c4","choices":[]}`,
		`{"id":"c5","choices":[{"message":{"content":"first"}},{"message":{"content":"second"}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"x","type":"mystery","function":{"name":"f","arguments":""}}]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c sdk.ChatCompletion
		if err := json.Unmarshal(body, &c); err != nil {
			return
		}
		m, err := FromCompletion(&c)
		if len(c.Choices) == 0 {
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Fatalf("FromCompletion with no choices = %v, want ErrInvalid", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("FromCompletion(%s): %v", body, err)
		}
		msg := c.Choices[0].Message
		wantContent := msg.Content
		if wantContent == "" {
			wantContent = msg.Refusal
		}
		if m.Role != chatmem.RoleAssistant || m.Content != wantContent || len(m.ToolCalls) != len(msg.ToolCalls) {
			t.Fatalf("FromCompletion(%s) = %+v", body, m)
		}
		for i, tc := range msg.ToolCalls {
			got := m.ToolCalls[i]
			want := chatmem.ToolCall{ID: tc.ID, Type: "function", Function: chatmem.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}}
			if tc.Type == "custom" {
				want = chatmem.ToolCall{ID: tc.ID, Type: "custom", Function: chatmem.FunctionCall{Name: tc.Custom.Name, Arguments: tc.Custom.Input}}
			}
			if got != want {
				t.Fatalf("tool call %d = %+v, want %+v", i, got, want)
			}
		}
		if m.Validate(chatmem.Limits{}) != nil {
			return
		}
		wire, err := json.Marshal(MessageParams([]chatmem.Message{m})[0])
		if err != nil {
			t.Fatal(err)
		}
		var p sdk.ChatCompletionMessageParamUnion
		if err := json.Unmarshal(wire, &p); err != nil {
			t.Fatalf("the SDK cannot decode %s: %v", wire, err)
		}
		back, err := FromMessageParam(p)
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("reply %+v came back through %s as %+v, %v", m, wire, back, err)
		}
	})
}
