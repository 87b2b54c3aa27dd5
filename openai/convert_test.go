package openai

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/chatmem/chatmem"
)

// history is a conversation with every role, a name, parallel tool calls
// answered in order, and the chatmem-only fields set.
func history() []chatmem.Message {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []chatmem.Message{
		{Seq: 1, Role: chatmem.RoleSystem, Content: "You are a support agent.", Tokens: 9, CreatedAt: at},
		{Seq: 2, Role: chatmem.RoleUser, Name: "kavya", Content: "Where are my orders SE-10423 and SE-10424?", Tokens: 14, Metadata: map[string]string{"channel": "web"}},
		{Seq: 3, Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{
			{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{"order":"SE-10423"}`}},
			{ID: "call_2", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{"order":"SE-10424"}`}},
		}},
		{Seq: 4, Role: chatmem.RoleTool, ToolCallID: "call_1", Content: `{"status":"out for delivery"}`},
		{Seq: 5, Role: chatmem.RoleTool, ToolCallID: "call_2", Content: `{"status":"packed"}`},
		{Seq: 6, Role: chatmem.RoleAssistant, Content: "SE-10423 arrives today; SE-10424 ships tomorrow.", ToolCalls: []chatmem.ToolCall{
			{ID: "call_3", Type: "custom", Function: chatmem.FunctionCall{Name: "notify", Arguments: "text me when it ships"}},
		}},
		{Seq: 7, Role: chatmem.RoleTool, ToolCallID: "call_3", Content: "ok"},
		{Seq: 8, Role: chatmem.RoleUser, Content: "Thanks!\nBye."},
	}
}

// wireOnly drops the fields that only chatmem has.
func wireOnly(msgs []chatmem.Message) []chatmem.Message {
	out := make([]chatmem.Message, len(msgs))
	for i, m := range msgs {
		out[i] = chatmem.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	}
	return out
}

func TestMessageParamsRoundTrip(t *testing.T) {
	msgs := history()
	params := MessageParams(msgs)
	if len(params) != len(msgs) {
		t.Fatalf("%d params for %d messages", len(params), len(msgs))
	}
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}

	// Back through the SDK's own types.
	var decoded []sdk.ChatCompletionMessageParamUnion
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	var back []chatmem.Message
	for i, p := range decoded {
		m, err := FromMessageParam(p)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		back = append(back, m)
	}
	if want := wireOnly(msgs); !reflect.DeepEqual(back, want) {
		t.Errorf("round trip through the SDK:\n got %+v\nwant %+v", back, want)
	}

	// And through chatmem's own JSON decoding: the SDK sends what chatmem
	// (and the proxy) read. chatmem's JSON knows function calls only, so
	// the custom call (messages 6 and 7) is left out here.
	msgs = append(msgs[:5:5], msgs[7:]...)
	if b, err = json.Marshal(MessageParams(msgs)); err != nil {
		t.Fatal(err)
	}
	var viaChatmem []chatmem.Message
	if err := json.Unmarshal(b, &viaChatmem); err != nil {
		t.Fatal(err)
	}
	if want := wireOnly(msgs); !reflect.DeepEqual(viaChatmem, want) {
		t.Errorf("round trip through chatmem.Message JSON:\n got %+v\nwant %+v", viaChatmem, want)
	}
}

func TestMessageParamsWire(t *testing.T) {
	b, err := json.Marshal(MessageParams(history()))
	if err != nil {
		t.Fatal(err)
	}
	var wire []map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	for i, m := range wire {
		for _, k := range []string{"seq", "tokens", "created_at", "metadata"} {
			if _, ok := m[k]; ok {
				t.Errorf("message %d sends the chatmem-only field %q: %v", i, k, m)
			}
		}
	}
	if _, ok := wire[2]["content"]; ok {
		t.Errorf("an assistant message with only tool calls sends content: %v", wire[2])
	}
	if wire[1]["name"] != "kavya" || wire[3]["tool_call_id"] != "call_1" {
		t.Errorf("name or tool_call_id lost: %v %v", wire[1], wire[3])
	}
	calls, _ := wire[2]["tool_calls"].([]any)
	if len(calls) != 2 {
		t.Fatalf("tool_calls = %v, want the two parallel calls", wire[2]["tool_calls"])
	}
	first := calls[0].(map[string]any)
	if first["id"] != "call_1" || first["type"] != "function" || first["function"].(map[string]any)["arguments"] != `{"order":"SE-10423"}` {
		t.Errorf("first tool call = %v", first)
	}
	custom := wire[5]["tool_calls"].([]any)[0].(map[string]any)
	if custom["type"] != "custom" || custom["custom"].(map[string]any)["input"] != "text me when it ships" {
		t.Errorf("custom tool call = %v", custom)
	}
}

func TestMessageParamsSkipsUnknownRole(t *testing.T) {
	got := MessageParams([]chatmem.Message{{Role: "narrator", Content: "x"}, {Role: chatmem.RoleUser, Content: "hi"}})
	if len(got) != 1 || got[0].OfUser == nil {
		t.Errorf("got %+v, want the user message alone", got)
	}
}

func TestFromMessageParamContentParts(t *testing.T) {
	// Content parts as clients send them.
	raw := `[
	 {"role":"developer","content":[{"type":"text","text":"Be brief."}]},
	 {"role":"system","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
	 {"role":"user","name":"kavya","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
	 {"role":"assistant","content":[{"type":"text","text":"Sure."}]},
	 {"role":"assistant","content":null,"refusal":"I can't help with that."},
	 {"role":"tool","tool_call_id":"call_9","content":[{"type":"text","text":"42"}]}
	]`
	var params []sdk.ChatCompletionMessageParamUnion
	if err := json.Unmarshal([]byte(raw), &params); err != nil {
		t.Fatal(err)
	}
	want := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "Be brief."},
		{Role: chatmem.RoleSystem, Content: "a\nb"},
		{Role: chatmem.RoleUser, Name: "kavya", Content: "one\ntwo"},
		{Role: chatmem.RoleAssistant, Content: "Sure."},
		{Role: chatmem.RoleAssistant, Content: "I can't help with that."},
		{Role: chatmem.RoleTool, ToolCallID: "call_9", Content: "42"},
	}
	for i, p := range params {
		got, err := FromMessageParam(p)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("message %d = %+v, want %+v", i, got, want[i])
		}
	}

	// Built with the SDK's helpers.
	got, err := FromMessageParam(sdk.UserMessage([]sdk.ChatCompletionContentPartUnionParam{sdk.TextContentPart("x"), sdk.TextContentPart("y")}))
	if err != nil || got.Content != "x\ny" || got.Role != chatmem.RoleUser {
		t.Errorf("UserMessage(parts) = %+v, %v", got, err)
	}
	got, err = FromMessageParam(sdk.ToolMessage("done", "call_5"))
	if err != nil || !reflect.DeepEqual(got, chatmem.Message{Role: chatmem.RoleTool, Content: "done", ToolCallID: "call_5"}) {
		t.Errorf("ToolMessage = %+v, %v", got, err)
	}
}

func TestFromMessageParamRefuses(t *testing.T) {
	image := sdk.UserMessage([]sdk.ChatCompletionContentPartUnionParam{
		sdk.TextContentPart("what is this?"),
		sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png"}),
	})
	for name, p := range map[string]sdk.ChatCompletionMessageParamUnion{
		"image part": image,
		"function":   sdk.ChatCompletionMessageParamOfFunction("{}", "f"),
		"empty":      {},
	} {
		if _, err := FromMessageParam(p); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	_, err := FromMessageParam(image)
	if err == nil || !strings.Contains(err.Error(), `part 1 has type "image_url"`) {
		t.Errorf("image part: err = %v, want it to name the part", err)
	}
}

func TestFromCompletion(t *testing.T) {
	// A response with parallel tool calls, as the API sends it.
	raw := `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini",
	 "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"refusal":null,
	  "tool_calls":[
	   {"id":"call_a","type":"function","function":{"name":"order_status","arguments":"{\"order\":\"SE-10423\"}"}},
	   {"id":"call_b","type":"function","function":{"name":"order_status","arguments":"{\"order\":\"SE-10424\"}"}},
	   {"id":"call_c","type":"custom","custom":{"name":"notify","input":"ping"}}]}}],
	 "usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70}}`
	var c sdk.ChatCompletion
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	got, err := FromCompletion(&c)
	if err != nil {
		t.Fatal(err)
	}
	want := chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{
		{ID: "call_a", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{"order":"SE-10423"}`}},
		{ID: "call_b", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{"order":"SE-10424"}`}},
		{ID: "call_c", Type: "custom", Function: chatmem.FunctionCall{Name: "notify", Arguments: "ping"}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if err := got.Validate(chatmem.Limits{}); err != nil {
		t.Errorf("the reply does not validate: %v", err)
	}

	// The reply, sent back with MessageParams, is what the SDK makes of it.
	mine, _ := json.Marshal(MessageParams([]chatmem.Message{got})[0])
	sdks, _ := json.Marshal(c.Choices[0].Message.ToParam())
	var a, b any
	json.Unmarshal(mine, &a)
	json.Unmarshal(sdks, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("MessageParams(reply) = %s\nthe SDK's ToParam = %s", mine, sdks)
	}
}

func TestFromCompletionText(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello!","refusal":null}}]}`, "Hello!"},
		{`{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,"refusal":"No."}}]}`, "No."},
	} {
		var c sdk.ChatCompletion
		if err := json.Unmarshal([]byte(tc.raw), &c); err != nil {
			t.Fatal(err)
		}
		got, err := FromCompletion(&c)
		if err != nil || got.Content != tc.want || got.Role != chatmem.RoleAssistant || got.ToolCalls != nil {
			t.Errorf("FromCompletion(%s) = %+v, %v; want content %q", tc.raw, got, err, tc.want)
		}
	}
}

func TestFromCompletionErrors(t *testing.T) {
	if _, err := FromCompletion(nil); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("nil: err = %v", err)
	}
	if _, err := FromCompletion(&sdk.ChatCompletion{ID: "chatcmpl-2"}); !errors.Is(err, chatmem.ErrInvalid) || !strings.Contains(err.Error(), "no choices") {
		t.Errorf("no choices: err = %v", err)
	}
}
