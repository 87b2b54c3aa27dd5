package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
)

// TestResponsesOpenAIGo drives the APIs with openai-go's conversations and
// responses packages, as docs/responses.md shows: a conversation, three
// responses in it (one streamed), read back.
func TestResponsesOpenAIGo(t *testing.T) {
	env := newResponsesEnv(t)
	client := openai.NewClient(option.WithBaseURL(env.url+"/openai/v1"), option.WithAPIKey(proxyKey), option.WithMaxRetries(0))
	ctx := context.Background()

	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{Metadata: shared.Metadata{"topic": "go"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"answer 1", "answer 2"} {
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model:        "gpt-4o-mini",
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		})
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if resp.OutputText() != want || resp.Conversation.ID != conv.ID {
			t.Errorf("turn %d: %q in %q, want %q in %q", i+1, resp.OutputText(), resp.Conversation.ID, want, conv.ID)
		}
	}
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model:        "gpt-4o-mini",
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("stream")},
	})
	text, id := "", ""
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			id = ev.Response.ID
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "answer 3" || id == "" {
		t.Fatalf("stream: %q, response %q", text, id)
	}
	got, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "answer 3" {
		t.Fatalf("Get(%s) = %v, %v", id, got, err)
	}
	page, err := client.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 6 {
		t.Fatalf("%d items, want 6", len(page.Data))
	}
	if m := page.Data[5]; m.Type != "message" || m.Role != "assistant" || !strings.Contains(m.RawJSON(), `"answer 3"`) {
		t.Errorf("last item = %+v", m)
	}
	if n := len(env.up.last(t).messages(t)); n != 5 {
		t.Errorf("the streamed turn sent %d messages, want 5", n)
	}
}

// TestResponsesAnthropicUpstream: with the Anthropic Messages API behind
// the chat completions transport (--upstream-kind anthropic), a response,
// streamed or not, carries the model's text and is stored.
func TestResponsesAnthropicUpstream(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			anth := newAnthropicFakeReply(t, "bonjour from claude", 5)
			tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: anth.URL, APIKey: "sk-ant-test", Model: "claude-test"})
			if err != nil {
				t.Fatal(err)
			}
			env := newProxyEnv(t, proxyConfig{baseURL: anth.URL, upClient: &http.Client{Transport: tr}})
			status, b := env.do(t, "POST", "/responses", fmt.Sprintf(`{"model":"claude-test","input":"hi","stream":%v}`, stream))
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, b)
			}
			if stream && !strings.Contains(string(b), "event: response.completed") || !strings.Contains(string(b), `"text":"bonjour from claude"`) {
				t.Fatalf("response: %s", b)
			}
			i := strings.Index(string(b), `"id":"resp_`)
			id, _, _ := strings.Cut(string(b[i+6:]), `"`)
			status, b = env.do(t, "GET", "/responses/"+id, "")
			if status != http.StatusOK || !strings.Contains(string(b), `"text":"bonjour from claude"`) {
				t.Errorf("GET %s: %d %s", id, status, b)
			}
		})
	}
}

// goMatrixUpstream is an upstream kind chatmem can put behind its Responses
// API, as TestResponsesOpenAIGoMatrix drives it. Each fake answers
// "answer N" to its Nth request, 42 input and 7 output tokens, and a call
// of get_weather({"city":"Paris"}) (call_weather) when the newest user
// text is "weather in Paris?".
type goMatrixUpstream struct {
	name string
	// start returns the server in front of the upstream, and what returns
	// the bodies of the requests the upstream got so far.
	start func(t *testing.T) (*proxyEnv, func(t *testing.T) []map[string]any)
	// history renders a request's history in the upstream's own wire
	// format as brief renders messages, failing on what that format does
	// not allow.
	history func(t *testing.T, body map[string]any) []string
	// tool returns the name and JSON schema of a request's only tool, as
	// the upstream's wire format spells a function tool.
	tool func(t *testing.T, body map[string]any) (string, any)
}

var goMatrixUpstreams = []goMatrixUpstream{{
	name: "chat-completions",
	start: func(t *testing.T) (*proxyEnv, func(t *testing.T) []map[string]any) {
		env := newResponsesEnv(t)
		return env, func(t *testing.T) []map[string]any {
			var out []map[string]any
			for _, r := range env.up.requests() {
				var body map[string]any
				if err := json.Unmarshal(r.raw, &body); err != nil {
					t.Fatalf("upstream request: %v: %s", err, r.raw)
				}
				out = append(out, body)
			}
			return out
		}
	},
	history: func(t *testing.T, body map[string]any) []string {
		if _, ok := body["input"]; ok {
			t.Errorf("a Chat Completions request with Responses input: %v", body["input"])
		}
		msgs, _ := body["messages"].([]any)
		return brief(msgs)
	},
	tool: func(t *testing.T, body map[string]any) (string, any) {
		tools, _ := body["tools"].([]any)
		if len(tools) != 1 {
			t.Fatalf("tools went up as %v", body["tools"])
		}
		tl, _ := tools[0].(map[string]any)
		fn, _ := tl["function"].(map[string]any)
		if tl["type"] != "function" || fn == nil {
			t.Errorf("the tool went up as %v, not a Chat Completions function tool", tl)
		}
		return fmt.Sprint(fn["name"]), fn["parameters"]
	},
}, {
	name: "openai-responses",
	start: func(t *testing.T) (*proxyEnv, func(t *testing.T) []map[string]any) {
		env, f := newResponsesUpstreamNodeEnv(t)
		return env, func(*testing.T) []map[string]any { return f.Requests() }
	},
	// inputBrief fails on a request without store false.
	history: inputBrief,
	tool: func(t *testing.T, body map[string]any) (string, any) {
		tools, _ := body["tools"].([]any)
		if len(tools) != 1 {
			t.Fatalf("tools went up as %v", body["tools"])
		}
		tl, _ := tools[0].(map[string]any)
		if tl["type"] != "function" || tl["function"] != nil {
			t.Errorf("the tool went up as %v, not a Responses function tool", tl)
		}
		return fmt.Sprint(tl["name"]), tl["parameters"]
	},
}, {
	name: "anthropic",
	start: func(t *testing.T) (*proxyEnv, func(t *testing.T) []map[string]any) {
		env, f := newMessagesMatrixEnv(t)
		return env, func(*testing.T) []map[string]any { return f.requests() }
	},
	history: func(t *testing.T, body map[string]any) []string {
		// The fake answered 400 to what the Messages API refuses, and the
		// client would have failed; this says why, should it get here.
		if why := messagesInvalid(body); why != "" {
			t.Errorf("not a valid Messages request: %s", why)
		}
		if sys, ok := body["system"]; ok {
			t.Errorf("a system prompt went up (the metadata marker?): %v", sys)
		}
		return messagesBrief(body)
	},
	tool: func(t *testing.T, body map[string]any) (string, any) {
		tools, _ := body["tools"].([]any)
		if len(tools) != 1 {
			t.Fatalf("tools went up as %v", body["tools"])
		}
		tl, _ := tools[0].(map[string]any)
		if _, ok := tl["parameters"]; ok {
			t.Errorf("the tool went up as %v, not a Messages tool", tl)
		}
		return fmt.Sprint(tl["name"]), tl["input_schema"]
	},
}}

// TestResponsesOpenAIGoMatrix drives the Conversations and Responses APIs
// with openai-go in front of each upstream kind: a conversation with an
// initial item, a plain turn, a streamed turn, a function tool round trip
// and a turn after it. What the client read of each response is what the
// model produced; the conversation's items, as the client lists them and
// as chatmem's own REST API lists its messages, are what was sent and
// produced, item by item; and each upstream request went in the
// upstream's own wire format with the whole history before it.
func TestResponsesOpenAIGoMatrix(t *testing.T) {
	for _, up := range goMatrixUpstreams {
		t.Run(up.name, func(t *testing.T) {
			env, upstream := up.start(t)
			client := openai.NewClient(option.WithBaseURL(env.url+openAIPrefix), option.WithAPIKey(proxyKey), option.WithMaxRetries(0))
			ctx := t.Context()

			conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
				Metadata: shared.Metadata{"topic": "go"},
				Items: []responses.ResponseInputItemUnionParam{
					responses.ResponseInputItemParamOfMessage("My ticket is SE-10423.", responses.EasyInputMessageRoleUser),
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			inConv := responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}
			text := func(s string) responses.ResponseNewParamsInputUnion {
				return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
			}
			// produced holds the ID of each output item the client read,
			// to find it among the conversation's items.
			produced := map[string]string{}
			wantAnswer := func(turn int, r *responses.Response, want string) {
				t.Helper()
				if r.Status != responses.ResponseStatusCompleted || r.Conversation.ID != conv.ID || r.OutputText() != want {
					t.Errorf("turn %d: %s %q in %q, want completed %q in %q", turn, r.Status, r.OutputText(), r.Conversation.ID, want, conv.ID)
				}
				if len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Role != "assistant" {
					t.Fatalf("turn %d: output %s", turn, r.RawJSON())
				}
				produced[r.Output[0].ID] = "message/assistant:" + want
			}

			// A plain turn.
			r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Conversation: inConv, Input: text("hello")})
			if err != nil {
				t.Fatalf("turn 1: %v", err)
			}
			wantAnswer(1, r1, "answer 1")
			if r1.Usage.InputTokens != 42 || r1.Usage.OutputTokens != 7 {
				t.Errorf("turn 1: usage %+v, want the upstream's 42 in, 7 out", r1.Usage)
			}

			// A streamed turn: its events numbered from 0, its text in the
			// deltas, the response in response.completed.
			stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Conversation: inConv, Input: text("stream please")})
			var types []string
			deltas := ""
			var r2 responses.Response
			for stream.Next() {
				ev := stream.Current()
				if ev.SequenceNumber != int64(len(types)) {
					t.Errorf("stream: event %d (%s) has sequence_number %d", len(types), ev.Type, ev.SequenceNumber)
				}
				types = append(types, ev.Type)
				switch ev.Type {
				case "response.output_text.delta":
					deltas += ev.Delta
				case "response.completed":
					r2 = ev.Response
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("turn 2: %v", err)
			}
			if len(types) < 2 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
				t.Fatalf("stream: events %q", types)
			}
			if deltas != "answer 2" {
				t.Errorf("stream: deltas %q, want %q", deltas, "answer 2")
			}
			wantAnswer(2, &r2, "answer 2")
			if got, err := client.Responses.Get(ctx, r2.ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != "answer 2" {
				t.Errorf("Get(%s) = %v, %v", r2.ID, got, err)
			}

			// A function tool round trip.
			schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
				"required": []any{"city"}, "additionalProperties": false}
			tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
				Description: openai.String("Weather of a city"), Parameters: schema, Strict: openai.Bool(true)}}}
			r3, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Conversation: inConv, Tools: tools,
				Input: text("weather in Paris?")})
			if err != nil {
				t.Fatalf("turn 3: %v", err)
			}
			if len(r3.Output) != 1 {
				t.Fatalf("turn 3: output %s", r3.RawJSON())
			}
			call := r3.Output[0].AsFunctionCall()
			if call.Type != "function_call" || call.CallID != "call_weather" || call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || r3.OutputText() != "" {
				t.Fatalf("turn 3: output %s, want the call of get_weather", r3.RawJSON())
			}
			produced[call.ID] = "function_call/call_weather:get_weather(" + call.Arguments + ")"
			r4, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Conversation: inConv, Tools: tools,
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
						Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"temp_c":21}`)}}},
				}}})
			if err != nil {
				t.Fatalf("turn 4: %v", err)
			}
			wantAnswer(4, r4, "answer 4")

			// A turn after the round trip, which carries it upstream.
			r5, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Conversation: inConv, Input: text("thanks")})
			if err != nil {
				t.Fatalf("turn 5: %v", err)
			}
			wantAnswer(5, r5, "answer 5")

			// The items, oldest first, as the client lists them: what was
			// sent and produced, the produced ones under the IDs the
			// responses gave them.
			page, err := client.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(100)})
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, it := range page.Data {
				s := it.Type + "/"
				switch it.Type {
				case "message":
					var texts []string
					for _, p := range it.Content.OfMessageContentArray {
						texts = append(texts, p.Text)
					}
					s += it.Role + ":" + strings.Join(texts, "\n")
				case "function_call":
					s += it.CallID + ":" + it.Name + "(" + it.Arguments.OfString + ")"
				case "function_call_output":
					s += it.CallID + ":" + it.Output.OfString
				}
				if want, ok := produced[it.ID]; ok && want != s {
					t.Errorf("item %s: listed %q, the response produced %q", it.ID, s, want)
				}
				delete(produced, it.ID)
				listed = append(listed, s)
			}
			if len(produced) != 0 {
				t.Errorf("output items not among the conversation's items: %v", produced)
			}
			wantBrief(t, "items", listed, []string{"message/user:My ticket is SE-10423.", "message/user:hello", "message/assistant:answer 1",
				"message/user:stream please", "message/assistant:answer 2", "message/user:weather in Paris?",
				`function_call/call_weather:get_weather({"city":"Paris"})`, `function_call_output/call_weather:{"temp_c":21}`,
				"message/assistant:answer 4", "message/user:thanks", "message/assistant:answer 5"})

			// The store holds those items, as the client read them, and a
			// metadata marker; chatmem's own REST API lists the same
			// messages.
			stored := env.stored(t, conv.ID)
			var items []item
			var visible []chatmem.Message
			for _, m := range stored {
				if !hidden(m) {
					visible = append(visible, m)
					items = append(items, messageItems(m)...)
				}
			}
			if n := len(stored) - len(visible); n != 1 {
				t.Errorf("stored %d metadata markers, want 1", n)
			}
			if len(items) != len(page.Data) {
				t.Fatalf("the store holds %d items, the client read %d", len(items), len(page.Data))
			}
			for i, it := range items {
				if !jsonEqual(t, it.raw, []byte(page.Data[i].RawJSON())) {
					t.Errorf("item %d: stored %s, client read %s", i, it.raw, page.Data[i].RawJSON())
				}
			}
			history := []string{"user:My ticket is SE-10423.", "user:hello", "assistant:answer 1", "user:stream please", "assistant:answer 2",
				"user:weather in Paris?", `assistant:->call_weather:get_weather({"city":"Paris"})`, `tool[call_weather]:{"temp_c":21}`,
				"assistant:answer 4", "user:thanks", "assistant:answer 5"}
			wantBrief(t, "stored", brief(visible), history)
			var rest []chatmem.Message
			for _, m := range env.listed(t, conv.ID) {
				if !hidden(m) {
					rest = append(rest, m)
				}
			}
			wantBrief(t, "GET /v1/conversations/{id}/messages", brief(rest), history)
			for i := range min(len(rest), len(visible)) {
				if rest[i].Seq != visible[i].Seq {
					t.Errorf("message %d: listed at seq %d, stored at %d", i, rest[i].Seq, visible[i].Seq)
				}
			}

			// Each request went up in the upstream's wire format with the
			// history before it and its turn, the metadata marker left out;
			// the last one with the whole conversation but its answer.
			reqs := upstream(t)
			if len(reqs) != 5 {
				t.Fatalf("the upstream got %d requests, want 5", len(reqs))
			}
			for i, end := range []int{2, 4, 6, 8, 10} {
				wantBrief(t, fmt.Sprintf("upstream request %d", i+1), up.history(t, reqs[i]), history[:end])
			}
			if s, _ := reqs[1]["stream"].(bool); !s {
				t.Errorf("the streamed turn went up unstreamed")
			}
			for _, i := range []int{2, 3} {
				name, params := up.tool(t, reqs[i])
				want, _ := json.Marshal(schema)
				got, _ := json.Marshal(params)
				if name != "get_weather" || !jsonEqual(t, got, want) {
					t.Errorf("upstream request %d: tool %s with schema %s, want get_weather with %s", i+1, name, got, want)
				}
			}
		})
	}
}
