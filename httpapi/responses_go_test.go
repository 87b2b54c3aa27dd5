package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

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
