package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/chatmem/chatmem"
)

// finishReasons are the finish_reason values of the OpenAI API.
var finishReasons = map[string]bool{"stop": true, "length": true, "tool_calls": true, "content_filter": true}

// FuzzTranslateResponse checks the response direction of the chat
// completions transport over any Messages API answer: the chat.completion
// it makes is one the openai-go SDK decodes, with one choice whose content
// is the text blocks joined (null only when there are tool calls and no
// text), one function tool call per tool_use block in order with its ID,
// name and input as compact JSON arguments, a known finish_reason, and
// usage that adds up. FromMessage (convert.go), reading the same answer
// with the Anthropic SDK, agrees with it on the content and tool calls.
func FuzzTranslateResponse(f *testing.F) {
	for _, s := range []string{
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":3}}`,
		`{"id":"msg_2","model":"claude","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"lookup","input":{"order":"SE-10423","n":[1,2]}},{"type":"tool_use","id":"toolu_2","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":7,"cache_creation_input_tokens":2,"cache_read_input_tokens":3}}`,
		`{"content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"stop_reason":"max_tokens"}`,
		`{"content":[],"stop_reason":"refusal"}`,
		`{"content":[{"type":"tool_use","id":"t","name":"n","input":null}],"stop_reason":"pause_turn"}`,
		`{"content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{"q":"x"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var msg anResponse
		if err := json.Unmarshal(body, &msg); err != nil {
			return
		}
		out := translateResponse(&msg, 1767225600)
		wire, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("marshal %+v: %v", out, err)
		}
		var cc openai.ChatCompletion
		if err := json.Unmarshal(wire, &cc); err != nil {
			t.Fatalf("the openai SDK cannot decode %s: %v", wire, err)
		}
		if cc.Object != "chat.completion" || len(cc.Choices) != 1 || cc.Choices[0].Index != 0 || !finishReasons[string(cc.Choices[0].FinishReason)] {
			t.Fatalf("completion %s: object, choices or finish_reason wrong", wire)
		}
		var text strings.Builder
		var uses []anContentBlock
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				uses = append(uses, b)
			}
		}
		got := out.Choices[0].Message
		if got.Role != "assistant" || (got.Content == nil) != (text.Len() == 0 && len(uses) > 0) ||
			got.Content != nil && *got.Content != text.String() || got.Refusal != nil {
			t.Fatalf("message of %s = %s, want content %q", body, wire, text.String())
		}
		if len(got.ToolCalls) != len(uses) {
			t.Fatalf("%d tool calls for %d tool_use blocks: %s", len(got.ToolCalls), len(uses), wire)
		}
		for i, u := range uses {
			tc := got.ToolCalls[i]
			if tc.ID != u.ID || tc.Type != "function" || tc.Function.Name != u.Name || tc.Index != nil {
				t.Fatalf("tool call %d = %+v for block %+v", i, tc, u)
			}
			if json.Valid(u.Input) && !json.Valid([]byte(tc.Function.Arguments)) {
				t.Fatalf("tool call %d arguments %q are not JSON; input was %s", i, tc.Function.Arguments, u.Input)
			}
			if json.Valid(u.Input) && strings.ContainsAny(tc.Function.Arguments, "\n\t") {
				t.Fatalf("tool call %d arguments %q are not compact", i, tc.Function.Arguments)
			}
		}
		u := out.Usage
		if u == nil || u.TotalTokens != u.PromptTokens+u.CompletionTokens ||
			u.PromptTokens != msg.Usage.InputTokens+msg.Usage.CacheCreationInputTokens+msg.Usage.CacheReadInputTokens ||
			u.PromptTokensDetails.CachedTokens != msg.Usage.CacheReadInputTokens {
			t.Fatalf("usage %+v for %+v", u, msg.Usage)
		}

		// Sent back as history, the reply is a request the transport takes,
		// with each tool_use input as it came. (Only for object inputs, as
		// the API sends: a null or array input comes out as arguments
		// "null" or "[...]", which the request direction refuses.)
		objects := true
		for _, u := range uses {
			objects = objects && isObject(u.Input) && u.ID != "" && u.Name != ""
		}
		if objects {
			hist := []any{map[string]any{"role": "user", "content": "q"}, got}
			for _, u := range uses {
				hist = append(hist, map[string]any{"role": "tool", "tool_call_id": u.ID, "content": "ok"})
			}
			hist = append(hist, map[string]any{"role": "user", "content": "next"})
			req := mustJSON(t, map[string]any{"model": "m", "messages": hist})
			an, _, err := translateRequest([]byte(req), "m", 100)
			if err != nil {
				t.Fatalf("the reply %s, sent back, is refused: %v", wire, err)
			}
			var inputs []string
			for _, m := range an.Messages {
				for _, b := range m.Content {
					if b.Type == "tool_use" {
						inputs = append(inputs, string(b.Input))
					}
				}
			}
			for i, u := range uses {
				if i >= len(inputs) || inputs[i] != compactJSON(u.Input) {
					t.Fatalf("tool_use inputs sent back = %q, want %s at %d", inputs, compactJSON(u.Input), i)
				}
			}
		}

		// FromMessage reads the same answer through the Anthropic SDK. Only
		// for tool_use blocks with an id and a name, as the API sends: the
		// SDK's decoder and encoding/json disagree on malformed ones (keys
		// in another case, "tYpe", match for one and not the other).
		for _, u := range uses {
			if u.ID == "" || u.Name == "" {
				return
			}
		}
		// Keys spelled otherwise, or repeated, are read differently by the
		// SDK's decoder and encoding/json; the API sends neither.
		var raw any
		if json.Unmarshal(body, &raw) != nil || !canonicalKeys(raw) || repeatedKeys(body) {
			return
		}
		var sm sdk.Message
		if err := json.Unmarshal(body, &sm); err != nil {
			return
		}
		cm, err := FromMessage(&sm)
		if err != nil {
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Fatalf("FromMessage(%s) = %v, want nil or ErrInvalid", body, err)
			}
			return
		}
		if cm.Role != chatmem.RoleAssistant || cm.Content != text.String() || len(cm.ToolCalls) != len(got.ToolCalls) {
			t.Fatalf("FromMessage(%s) = %+v; the transport made %s", body, cm, wire)
		}
		for i, tc := range cm.ToolCalls {
			o := got.ToolCalls[i]
			sameArgs := tc.Function.Arguments == o.Function.Arguments || !isObject(uses[i].Input)
			if tc.ID != o.ID || tc.Function.Name != o.Function.Name || !sameArgs {
				t.Fatalf("FromMessage tool call %d = %+v; the transport made %+v", i, tc, o)
			}
		}
	})
}

// streamEvent renders one Messages API server-sent event.
func streamEvent(typ string, v map[string]any) string {
	v["type"] = typ
	b, _ := json.Marshal(v)
	return "event: " + typ + "\ndata: " + string(b) + "\n\n"
}

// fuzzStream builds a well-formed Messages stream from ops, one event per
// byte (text blocks and deltas, tool_use blocks and input deltas, pings,
// message_delta), and returns it with the text and tool calls (name and
// joined input) it carries.
func fuzzStream(ops []byte, texts []string) (stream string, text string, calls []string) {
	var b strings.Builder
	b.WriteString(streamEvent("message_start", map[string]any{"message": map[string]any{
		"id": "msg_f", "type": "message", "role": "assistant", "model": "claude", "content": []any{}, "usage": map[string]any{"input_tokens": 3, "output_tokens": 1}}}))
	index := 0
	open := "" // the type of the open block
	var tb strings.Builder
	for i, op := range ops {
		s := texts[i%len(texts)]
		switch op % 6 {
		case 0: // a text block
			if open != "" {
				b.WriteString(streamEvent("content_block_stop", map[string]any{"index": index}))
				index++
			}
			open = "text"
			b.WriteString(streamEvent("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "text", "text": s}}))
			tb.WriteString(s)
		case 1: // a tool_use block
			if open != "" {
				b.WriteString(streamEvent("content_block_stop", map[string]any{"index": index}))
				index++
			}
			open = "tool_use"
			name := fmt.Sprint("tool", i)
			b.WriteString(streamEvent("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "tool_use", "id": fmt.Sprint("toolu_", i), "name": name, "input": map[string]any{}}}))
			calls = append(calls, name+":")
		case 2, 3: // a delta for the open block
			switch open {
			case "text":
				b.WriteString(streamEvent("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "text_delta", "text": s}}))
				tb.WriteString(s)
			case "tool_use":
				b.WriteString(streamEvent("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": s}}))
				calls[len(calls)-1] += s
			}
		case 4:
			b.WriteString(streamEvent("ping", map[string]any{}))
		case 5:
			b.WriteString(streamEvent("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": int(op)}}))
		}
	}
	if open != "" {
		b.WriteString(streamEvent("content_block_stop", map[string]any{"index": index}))
	}
	b.WriteString(streamEvent("message_stop", map[string]any{}))
	return b.String(), tb.String(), calls
}

// FuzzTranslateStream checks the streaming response direction. Over any
// bytes, the output is a sequence of "data: " events, each a JSON chunk the
// openai-go SDK decodes (object chat.completion.chunk, one choice, or the
// usage chunk with none) or an error object, and "data: [DONE]" comes last
// exactly when the stream ended well. Over well-formed streams built from
// the input, the chunks carry exactly the stream's text, and its tool calls
// in order with their names and inputs.
func FuzzTranslateStream(f *testing.F) {
	f.Add([]byte{0, 2, 2, 1, 2, 3, 5}, "Hel|lo|{\"a\":|1}", false, true)
	f.Add([]byte{1, 2, 0, 3, 4, 1}, `{"q":|"x"}|text`, false, false)
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"), "", true, false)
	f.Add([]byte("data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"), "", true, true)
	f.Add([]byte("data: {\"type\":\"message_stop\"}"), "", true, false)
	f.Add([]byte("data: not json\n\n"), "", true, false)
	f.Fuzz(func(t *testing.T, ops []byte, texts string, raw, includeUsage bool) {
		in := string(ops)
		var wantText string
		var wantCalls []string
		if !raw {
			if len(ops) > 64 || !utf8.ValidString(texts) {
				return // JSON would replace the invalid bytes
			}
			in, wantText, wantCalls = fuzzStream(ops, strings.Split(texts, "|"))
		}
		s := &streamState{created: 1767225600, toolIndex: map[int]int{}, includeUsage: includeUsage}
		var out bytes.Buffer
		err := s.run(strings.NewReader(in), &out)
		if !raw && err != nil {
			t.Fatalf("a well-formed stream failed: %v\n%s", err, in)
		}

		events := strings.Split(out.String(), "\n\n")
		if events[len(events)-1] != "" {
			t.Fatalf("output does not end with a blank line: %q", out.String())
		}
		events = events[:len(events)-1]
		var text strings.Builder
		var calls []string
		for i, ev := range events {
			data, ok := strings.CutPrefix(ev, "data: ")
			if !ok || strings.Contains(data, "\n") {
				t.Fatalf("event %d is not one data line: %q", i, ev)
			}
			if data == "[DONE]" {
				if i != len(events)-1 || err != nil {
					t.Fatalf("[DONE] at %d of %d events, error %v", i, len(events), err)
				}
				continue
			}
			var probe struct {
				Error json.RawMessage `json:"error"`
			}
			if json.Unmarshal([]byte(data), &probe) != nil {
				t.Fatalf("event %d is not JSON: %q", i, data)
			}
			if probe.Error != nil {
				if i != len(events)-1 || err == nil {
					t.Fatalf("error event %d of %d, run error %v", i, len(events), err)
				}
				continue
			}
			var c openai.ChatCompletionChunk
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("the openai SDK cannot decode chunk %s: %v", data, err)
			}
			if c.Object != "chat.completion.chunk" {
				t.Fatalf("chunk %s: object %q", data, c.Object)
			}
			if len(c.Choices) == 0 {
				if !includeUsage || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
					t.Fatalf("chunk without a choice: %s", data)
				}
				continue
			}
			if len(c.Choices) != 1 {
				t.Fatalf("chunk %s has %d choices", data, len(c.Choices))
			}
			d := c.Choices[0].Delta
			text.WriteString(d.Content)
			for _, tc := range d.ToolCalls {
				switch {
				case int(tc.Index) == len(calls) && tc.ID != "":
					calls = append(calls, tc.Function.Name+":"+tc.Function.Arguments)
				case int(tc.Index) < len(calls) && tc.ID == "":
					calls[tc.Index] += tc.Function.Arguments
				default:
					t.Fatalf("tool call delta %+v out of order (%d calls so far)", tc, len(calls))
				}
			}
		}
		doneSeen := len(events) > 0 && events[len(events)-1] == "data: [DONE]"
		if doneSeen != (err == nil) {
			t.Fatalf("[DONE] sent = %v, run error = %v", doneSeen, err)
		}
		if raw {
			return
		}
		if text.String() != wantText || strings.Join(calls, "\x00") != strings.Join(wantCalls, "\x00") {
			t.Fatalf("stream carried text %q and calls %q, want %q and %q\n%s", text.String(), calls, wantText, wantCalls, in)
		}
	})
}

// FuzzMessageParamsRoundTrip checks convert.go both ways over a tool turn
// built from the input: MessageParams puts the system message apart,
// alternates user and assistant, carries the tool results in the user turn
// that follows with their tool_use_id, and refuses (ErrInvalid) only
// arguments that are not a JSON object; and the assistant turn, read back
// as an answer with FromMessage, is the message it came from (arguments
// compacted, "" as {}).
func FuzzMessageParamsRoundTrip(f *testing.F) {
	f.Add("You are ShopBot.", "Where is my order?", "Let me check.", `{"order": "SE-10423"}`, uint8(1))
	f.Add("s", "u", "", "", uint8(2))
	f.Add("s", "u", "a", `[1,2]`, uint8(1))
	f.Add("s", "u", "a", `{"a":1} trailing`, uint8(3))
	f.Add("s", "u", "a", "null", uint8(0))
	f.Fuzz(func(t *testing.T, system, user, reply, args string, ncalls uint8) {
		n := int(ncalls % 4)
		assistant := chatmem.Message{Role: chatmem.RoleAssistant, Content: reply}
		for i := range n {
			id := fmt.Sprint("call_", i)
			assistant.ToolCalls = append(assistant.ToolCalls, chatmem.ToolCall{ID: id, Type: "function", Function: chatmem.FunctionCall{Name: "lookup", Arguments: args}})
		}
		msgs := []chatmem.Message{{Role: chatmem.RoleSystem, Content: system}, {Role: chatmem.RoleUser, Content: user}, assistant}
		for _, c := range assistant.ToolCalls {
			msgs = append(msgs, chatmem.Message{Role: chatmem.RoleTool, ToolCallID: c.ID, Content: "ok"})
		}
		msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: "thanks"})
		if chatmem.ValidateHistory(nil, msgs, chatmem.Limits{}) != nil {
			return // Memory never returns such a history
		}
		sys, params, err := MessageParams(msgs)
		argsObject := strings.TrimSpace(args) == "" || isObject(json.RawMessage(args)) && json.Valid([]byte(args))
		if n > 0 && !argsObject {
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Fatalf("MessageParams with arguments %q = %v, want ErrInvalid", args, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("MessageParams: %v", err)
		}
		if len(sys) != 1 || sys[0].Text != system {
			t.Fatalf("system = %+v, want %q", sys, system)
		}
		wire, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		var ms []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(wire, &ms); err != nil {
			t.Fatalf("messages %s: %v", wire, err)
		}
		wantRoles := []string{"user", "assistant", "user"}
		if len(ms) != len(wantRoles) {
			t.Fatalf("messages %s: %d, want user, assistant, user", wire, len(ms))
		}
		for i, m := range ms {
			if m.Role != wantRoles[i] || len(m.Content) == 0 {
				t.Fatalf("message %d of %s: role %s with %d blocks", i, wire, m.Role, len(m.Content))
			}
		}
		// The results lead the last user turn, in order, then its text.
		last := ms[2].Content
		if len(last) != n+1 {
			t.Fatalf("last user turn %s: %d blocks, want %d results and the text", wire, len(last), n)
		}
		for i, b := range last[:n] {
			var r struct {
				Type      string `json:"type"`
				ToolUseID string `json:"tool_use_id"`
			}
			if json.Unmarshal(b, &r) != nil || r.Type != "tool_result" || r.ToolUseID != assistant.ToolCalls[i].ID {
				t.Fatalf("block %d of the last user turn = %s, want the result of %s", i, b, assistant.ToolCalls[i].ID)
			}
		}

		// The assistant turn, as an answer, comes back as the message.
		answer := fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":%s,"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`, mustJSON(t, ms[1].Content))
		var sm sdk.Message
		if err := json.Unmarshal([]byte(answer), &sm); err != nil {
			t.Fatalf("the SDK cannot decode %s: %v", answer, err)
		}
		back, err := FromMessage(&sm)
		if err != nil {
			t.Fatalf("FromMessage(%s): %v", answer, err)
		}
		want := assistant.Clone()
		for i := range want.ToolCalls {
			want.ToolCalls[i].Function.Arguments = compactJSON(json.RawMessage(args))
		}
		if back.Content != want.Content || !sameToolCalls(back.ToolCalls, want.ToolCalls) {
			t.Fatalf("assistant turn came back as %+v, want %+v", back, want)
		}
	})
}

// sameToolCalls reports whether a and b are the same tool calls, their
// arguments compared as JSON values: the SDK's encoder writes "&", "<" and
// ">" in a tool's input as \u0026 and the like, the same JSON in other bytes.
func sameToolCalls(a, b []chatmem.ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		var xv, yv any
		if json.Unmarshal([]byte(x.Function.Arguments), &xv) != nil || json.Unmarshal([]byte(y.Function.Arguments), &yv) != nil ||
			!reflect.DeepEqual(xv, yv) {
			return false
		}
		x.Function.Arguments, y.Function.Arguments = "", ""
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canonicalKeys reports whether every object key in v, outside tool_use
// inputs (which are the tool's own data), is in the API's lower-case form:
// encoding/json matches keys case-insensitively and the SDK's decoder does
// not, so the two read other spellings differently.
func canonicalKeys(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k != strings.ToLower(k) {
				return false
			}
			if k != "input" && !canonicalKeys(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !canonicalKeys(e) {
				return false
			}
		}
	}
	return true
}

// repeatedKeys reports whether an object in the JSON document b has a key
// twice.
func repeatedKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, object: true, key: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.object && top.key {
				if top.keys[t] {
					return true
				}
				top.keys[t] = true
				top.key = false
				continue
			}
		}
		if top = nil; len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object {
			top.key = true // a value ended: a key comes next
		}
	}
}
