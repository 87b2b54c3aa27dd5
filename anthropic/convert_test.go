package anthropic

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/chatmem/chatmem"
)

// convertHistory has two system messages (pinned and facts), parallel tool
// calls answered in two tool messages, a user message right after them and
// the chatmem-only fields set.
func convertHistory() []chatmem.Message {
	return []chatmem.Message{
		{Seq: 1, Role: chatmem.RoleSystem, Content: "You are a support agent.", Tokens: 9},
		{Role: chatmem.RoleSystem, Content: "Known facts:\n- order: SE-10423", Metadata: map[string]string{chatmem.MetaKey: chatmem.MetaFacts}},
		{Seq: 2, Role: chatmem.RoleUser, Name: "kavya", Content: "Where are my orders?"},
		{Seq: 3, Role: chatmem.RoleAssistant, Content: "Let me check both.", ToolCalls: []chatmem.ToolCall{
			{ID: "toolu_1", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{ "order": "SE-10423", "n": 1.50 }`}},
			{ID: "toolu_2", Type: "function", Function: chatmem.FunctionCall{Name: "list_orders", Arguments: ""}},
		}},
		{Seq: 4, Role: chatmem.RoleTool, ToolCallID: "toolu_1", Content: "out for delivery"},
		{Seq: 5, Role: chatmem.RoleTool, ToolCallID: "toolu_2", Content: `["SE-10423"]`},
		{Seq: 6, Role: chatmem.RoleUser, Content: "And when?"},
		{Seq: 7, Role: chatmem.RoleAssistant, Content: "Today by 8 pm."},
		{Seq: 8, Role: chatmem.RoleUser, Content: "Thanks."},
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

func TestMessageParamsWire(t *testing.T) {
	system, messages, err := MessageParams(convertHistory())
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(sdk.MessageNewParams{Model: "claude-haiku-4-5", MaxTokens: 100, System: system, Messages: messages})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude-haiku-4-5","max_tokens":100,
	 "system":[{"type":"text","text":"You are a support agent."},{"type":"text","text":"Known facts:\n- order: SE-10423"}],
	 "messages":[
	  {"role":"user","content":[{"type":"text","text":"Where are my orders?"}]},
	  {"role":"assistant","content":[
	   {"type":"text","text":"Let me check both."},
	   {"type":"tool_use","id":"toolu_1","name":"order_status","input":{"order":"SE-10423","n":1.50}},
	   {"type":"tool_use","id":"toolu_2","name":"list_orders","input":{}}]},
	  {"role":"user","content":[
	   {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"out for delivery"}]},
	   {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"[\"SE-10423\"]"}]},
	   {"type":"text","text":"And when?"}]},
	  {"role":"assistant","content":[{"type":"text","text":"Today by 8 pm."}]},
	  {"role":"user","content":[{"type":"text","text":"Thanks."}]}]}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("request body:\n got %s\nwant %s", got, want)
	}
	// The arguments are sent as the model wrote them (compacted): key order
	// and number digits kept.
	if !strings.Contains(string(got), `"input":{"order":"SE-10423","n":1.50}`) {
		t.Errorf("tool input not sent as written: %s", got)
	}
}

func TestMessageParamsAlternate(t *testing.T) {
	for name, msgs := range map[string][]chatmem.Message{
		"history": convertHistory(),
		"consecutive users": {
			{Role: chatmem.RoleUser, Content: "a"}, {Role: chatmem.RoleUser, Content: "b"},
			{Role: chatmem.RoleAssistant, Content: "c"}, {Role: chatmem.RoleAssistant, Content: "d"},
			{Role: chatmem.RoleSystem, Content: "late system"}, {Role: chatmem.RoleUser, Content: "e"},
		},
	} {
		_, messages, err := MessageParams(msgs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, m := range messages {
			user := m.OfUser != nil
			if user == (m.OfAssistant != nil) || m.OfSystem != nil {
				t.Fatalf("%s: message %d is not exactly one of user and assistant: %+v", name, i, m)
			}
			if user != (i%2 == 0) {
				t.Errorf("%s: message %d has role %s; roles must alternate from user", name, i, *m.GetRole())
			}
		}
	}

	system, messages, err := MessageParams([]chatmem.Message{
		{Role: chatmem.RoleUser, Content: "a"}, {Role: chatmem.RoleUser, Content: "b"},
		{Role: chatmem.RoleSystem, Content: "late system"},
		{Role: chatmem.RoleAssistant, Content: "c"}, {Role: chatmem.RoleAssistant, Content: "d"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(system) != 1 || system[0].Text != "late system" {
		t.Errorf("system = %+v", system)
	}
	if len(messages) != 2 || len(messages[0].OfUser.Content) != 2 || len(messages[1].OfAssistant.Content) != 2 ||
		messages[0].OfUser.Content[1].OfText.Text != "b" || messages[1].OfAssistant.Content[1].OfText.Text != "d" {
		b, _ := json.Marshal(messages)
		t.Errorf("consecutive messages not merged in order: %s", b)
	}
}

func TestMessageParamsInvalid(t *testing.T) {
	call := func(args string) []chatmem.Message {
		return []chatmem.Message{
			{Role: chatmem.RoleUser, Content: "hi"},
			{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "toolu_1", Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: args}}}},
		}
	}
	for name, msgs := range map[string][]chatmem.Message{
		"arguments not JSON":      call(`{"order": `),
		"arguments an array":      call(`[1, 2]`),
		"arguments a string":      call(`"x"`),
		"arguments null":          call(`null`),
		"unknown role":            {{Role: "narrator", Content: "x"}},
		"empty assistant":         {{Role: chatmem.RoleUser, Content: "hi"}, {Role: chatmem.RoleAssistant}},
		"empty user":              {{Role: chatmem.RoleUser}},
		"empty system":            {{Role: chatmem.RoleSystem}},
		"trailing garbage in arg": call(`{"a":1} x`),
	} {
		if _, _, err := MessageParams(msgs); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	_, _, err := MessageParams(call(`{"order": `))
	if err == nil || !strings.Contains(err.Error(), "message 1: tool call 0 (toolu_1, f)") {
		t.Errorf("err = %v, want it to name the message and the call", err)
	}
}

func TestFromMessage(t *testing.T) {
	raw := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",
	 "content":[
	  {"type":"thinking","thinking":"They want both orders.","signature":"sig"},
	  {"type":"text","text":"Checking "},
	  {"type":"text","text":"both orders.","citations":null},
	  {"type":"tool_use","id":"toolu_a","name":"order_status","input":{"order": "SE-10423"}},
	  {"type":"tool_use","id":"toolu_b","name":"list_orders","input":{}}],
	 "stop_reason":"tool_use","stop_sequence":null,
	 "usage":{"input_tokens":50,"output_tokens":20}}`
	var m sdk.Message
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	got, err := FromMessage(&m)
	if err != nil {
		t.Fatal(err)
	}
	want := chatmem.Message{Role: chatmem.RoleAssistant, Content: "Checking both orders.", ToolCalls: []chatmem.ToolCall{
		{ID: "toolu_a", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{"order":"SE-10423"}`}},
		{ID: "toolu_b", Type: "function", Function: chatmem.FunctionCall{Name: "list_orders", Arguments: `{}`}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if err := got.Validate(chatmem.Limits{}); err != nil {
		t.Errorf("the reply does not validate: %v", err)
	}

	text := `{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn"}`
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	if got, err := FromMessage(&m); err != nil || !reflect.DeepEqual(got, chatmem.Message{Role: chatmem.RoleAssistant, Content: "Hello!"}) {
		t.Errorf("text reply = %+v, %v", got, err)
	}

	if _, err := FromMessage(nil); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("nil: err = %v", err)
	}
}

// TestToolRoundTrip sends an assistant message with tool calls as the API
// would return it, reads it back with FromMessage, and sends it again: the
// calls keep their order, IDs, names and arguments, and the blocks sent are
// the ones the SDK itself would send back for that response.
func TestToolRoundTrip(t *testing.T) {
	reply := chatmem.Message{Role: chatmem.RoleAssistant, Content: "Let me check.", ToolCalls: []chatmem.ToolCall{
		{ID: "toolu_1", Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: `{"order":"SE-10423","items":[1,2],"rush":true}`}},
		{ID: "toolu_2", Type: "function", Function: chatmem.FunctionCall{Name: "weather", Arguments: `{"city":"Pune"}`}},
	}}
	_, messages, err := MessageParams([]chatmem.Message{{Role: chatmem.RoleUser, Content: "Where is it?"}, reply})
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := json.Marshal(messages[1].OfAssistant.Content)
	if err != nil {
		t.Fatal(err)
	}
	// The same blocks as a Messages API response.
	raw := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":` + string(blocks) +
		`,"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":10}}`
	var res sdk.Message
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatal(err)
	}
	back, err := FromMessage(&res)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, reply) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, reply)
	}

	// What we send for the stored reply is what the SDK sends for the
	// response it came from.
	mine, _ := json.Marshal(messages[1])
	sdks, _ := json.Marshal(res.ToParam())
	if !jsonEqual(t, mine, sdks) {
		t.Errorf("MessageParams(reply) = %s\nthe SDK's ToParam = %s", mine, sdks)
	}

	// And the tool results answer those IDs.
	_, messages, err = MessageParams([]chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Where is it?"}, back,
		{Role: chatmem.RoleTool, ToolCallID: "toolu_1", Content: "out for delivery"},
		{Role: chatmem.RoleTool, ToolCallID: "toolu_2", Content: "sunny"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(messages) != 3 || messages[2].OfUser == nil || len(messages[2].OfUser.Content) != 2 {
		t.Fatalf("tool results not in one user message: %+v", messages)
	}
	for i, id := range []string{"toolu_1", "toolu_2"} {
		if r := messages[2].OfUser.Content[i].OfToolResult; r == nil || r.ToolUseID != id {
			t.Errorf("block %d = %+v, want the result for %s", i, messages[2].OfUser.Content[i], id)
		}
	}
}
