package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestProxyIdempotentReplay: a retry with the same Idempotency-Key and the
// same body gets the stored reply (Idempotent-Replayed: true) without a
// second upstream call, streamed or not, on every store; the key with
// another body is 422 idempotency_key_reused and changes nothing; an empty
// key is 400.
func TestProxyIdempotentReplay(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{store: b.open(t)})
			calls := func() int { return len(env.up.requests()) }
			for _, stream := range []bool{false, true} {
				conv := fmt.Sprintf("idem-%v", stream)
				h := map[string]string{"X-Chatmem-Conversation": conv, "Idempotency-Key": "turn-1"}
				body := fmt.Sprintf(`{"model":"gpt-4o-mini","stream":%v,"messages":[{"role":"user","content":"Where is SE-10423?"}]}`, stream)
				status, _, first := env.post(t, h, body)
				if status != 200 {
					t.Fatalf("first request: %d %s", status, first)
				}
				if stream && !strings.HasSuffix(string(first), "\n\ndata: [DONE]\n\n") {
					t.Errorf("the stream does not end with a whole data: [DONE] event: %q", first[max(0, len(first)-60):])
				}
				before := calls()
				for retry := range 2 {
					status, rh, again := env.post(t, h, body)
					if status != 200 || rh.Get("Idempotent-Replayed") != "true" {
						t.Fatalf("retry %d: %d, Idempotent-Replayed %q: %s", retry, status, rh.Get("Idempotent-Replayed"), again)
					}
					if stream && !strings.HasSuffix(string(again), "\n\ndata: [DONE]\n\n") {
						t.Errorf("retry %d: the replayed stream does not end with a whole data: [DONE] event", retry)
					}
					if got, want := replyText(t, again, stream), replyText(t, first, stream); got != want || want == "" {
						t.Errorf("retry %d answered %q, want the stored reply %q", retry, got, want)
					}
				}
				if n := calls() - before; n != 0 {
					t.Errorf("the retries called the upstream %d times, want 0", n)
				}
				stored := brief(env.stored(t, conv))
				if len(stored) != 2 {
					t.Errorf("stored after the retries: %q, want the turn once", stored)
				}

				// The key with another body: refused, nothing written, no
				// upstream call.
				other := strings.Replace(body, "SE-10423", "SE-99999", 1)
				status, _, resp := env.post(t, h, other)
				if status != 422 || !strings.Contains(string(resp), `"code":"idempotency_key_reused"`) {
					t.Errorf("key reused with another body: %d %s, want 422 idempotency_key_reused", status, resp)
				}
				// Another field changed (the messages the same) is another
				// request too.
				status, _, resp = env.post(t, h, strings.Replace(body, `"model":"gpt-4o-mini"`, `"model":"gpt-4o"`, 1))
				if status != 422 || !strings.Contains(string(resp), `"code":"idempotency_key_reused"`) {
					t.Errorf("key reused with another model: %d %s, want 422 idempotency_key_reused", status, resp)
				}
				if n := calls() - before; n != 0 {
					t.Errorf("refused requests called the upstream %d times", n)
				}
				wantBrief(t, "stored after the refusals", brief(env.stored(t, conv)), stored)
			}

			// An empty key is 400, before anything else.
			status, _, resp := env.post(t, map[string]string{"X-Chatmem-Conversation": "idem-empty", "Idempotency-Key": ""},
				`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if status != 400 || !strings.Contains(string(resp), `"code":"invalid_request"`) {
				t.Errorf("empty Idempotency-Key: %d %s, want 400", status, resp)
			}
			if msgs := env.stored(t, "idem-empty"); len(msgs) != 0 {
				t.Errorf("an empty key stored %q", brief(msgs))
			}
		})
	}
}

// replyText is the reply's content in a chat.completion, or in the chunks
// of a stream.
func replyText(t *testing.T, body []byte, stream bool) string {
	t.Helper()
	if !stream {
		var cc openai.ChatCompletion
		if err := json.Unmarshal(body, &cc); err != nil || len(cc.Choices) == 0 {
			t.Fatalf("not a chat completion: %s", body)
		}
		return cc.Choices[0].Message.Content
	}
	var out strings.Builder
	done := false
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ch openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("not a chunk: %s", data)
		}
		for _, c := range ch.Choices {
			out.WriteString(c.Delta.Content)
		}
	}
	if !done {
		t.Fatalf("the stream did not end with [DONE]: %s", body)
	}
	return out.String()
}

// TestProxyIdempotentRetryAfterFailure: a request with a key that failed
// upstream leaves its message stored; the retry calls the upstream again
// with that history, does not store the message twice, and its reply is
// the one a further retry gets. The SDK's own replay works too.
func TestProxyIdempotentRetryAfterFailure(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	ctx := t.Context()
	client := env.client("i1", option.WithHeader("Idempotency-Key", "turn-1"))
	env.up.push(fakeReply{status: 503, body: `{"error":{"message":"overloaded","type":"server_error","code":null}}`})
	_, err := client.Chat.Completions.New(ctx, userTurn("hello"))
	wantOpenAIError(t, "first try", err, 503, "", "server_error")
	cc, err := client.Chat.Completions.New(ctx, userTurn("hello"))
	pmust(t, "retry", err)
	if cc.Choices[0].Message.Content != "answer 2" {
		t.Errorf("retry answered %q", cc.Choices[0].Message.Content)
	}
	wantBrief(t, "stored after the retry", brief(env.stored(t, "i1")), []string{"user:hello", "assistant:answer 2"})
	wantBrief(t, "retry's upstream request", brief(env.up.last(t).messages(t)), []string{"user:hello"})

	cc, err = client.Chat.Completions.New(ctx, userTurn("hello"))
	pmust(t, "retry after success", err)
	if cc.Choices[0].Message.Content != "answer 2" || len(env.up.requests()) != 2 {
		t.Errorf("retry after success answered %q after %d upstream calls, want the stored answer 2 after 2", cc.Choices[0].Message.Content, len(env.up.requests()))
	}
	wantBrief(t, "stored after the retry after success", brief(env.stored(t, "i1")), []string{"user:hello", "assistant:answer 2"})

	// A retry after a failure with another message is refused too.
	env.up.push(fakeReply{status: 500, body: `{"error":{"message":"oops","type":"server_error","code":null}}`})
	c2 := env.client("i1", option.WithHeader("Idempotency-Key", "turn-2"))
	_, err = c2.Chat.Completions.New(ctx, userTurn("first"))
	wantOpenAIError(t, "turn 2 fails", err, 500, "", "server_error")
	_, err = c2.Chat.Completions.New(ctx, userTurn("something else"))
	wantOpenAIError(t, "turn 2 retried with another message", err, 422, "idempotency_key_reused", "invalid_request_error")
	wantBrief(t, "stored at the end", brief(env.stored(t, "i1")), []string{"user:hello", "assistant:answer 2", "user:first"})
}

// TestProxyPassThroughRedacted: without a conversation the proxy relays
// the upstream's answer, but never its own upstream key, streamed (masked
// in each event) or not, as it masks the key in error bodies; with a
// conversation the reply is stored as the client got it.
func TestProxyPassThroughRedacted(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	echo := "Sure: your key is " + upstreamKey + "."
	for _, tc := range []struct {
		name, conv string
		stream     bool
	}{{"pass-through", "", false}, {"pass-through stream", "", true}, {"conversation", "red", false}, {"conversation stream", "red-s", true}} {
		if tc.stream {
			// A gateway that echoes the key does so within one event.
			ev := func(delta, finish string) string {
				return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
			}
			env.up.push(fakeReply{status: 200, contentType: "text/event-stream",
				body: ev(`{"role":"assistant","content":"`+echo+`"}`, "null") + ev(`{}`, `"stop"`) + "data: [DONE]\n\n"})
		} else {
			env.up.push(fakeReply{content: echo})
		}
		h := map[string]string{}
		if tc.conv != "" {
			h["X-Chatmem-Conversation"] = tc.conv
		}
		status, _, body := env.post(t, h, fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"what is your key?"}]}`, tc.stream))
		if status != 200 {
			t.Fatalf("%s: %d %s", tc.name, status, body)
		}
		if strings.Contains(string(body), upstreamKey) || !strings.Contains(string(body), "[upstream key]") {
			t.Errorf("%s: the client got %s, want the key masked", tc.name, body)
		}
		if tc.conv != "" {
			for _, m := range env.stored(t, tc.conv) {
				if strings.Contains(m.Content, upstreamKey) {
					t.Errorf("%s: the key was stored: %q", tc.name, m.Content)
				}
			}
		}
	}
}

// TestProxyInvalidUTF8: a request with invalid UTF-8 anywhere, or with a
// string escaping half a surrogate pair, is refused with 400 before the
// upstream and stores nothing; it is not rewritten to U+FFFD.
func TestProxyInvalidUTF8(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	for _, tc := range []struct{ name, body string }{
		{"content", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}"},
		{"name", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"name\":\"\xff\",\"content\":\"hi\"}]}"},
		{"system prompt", "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"\xc3\x28\"},{\"role\":\"user\",\"content\":\"hi\"}]}"},
		{"tool arguments", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\xed\xa0\x80\"}}]}]}"},
		{"other field", "{\"model\":\"m\xfe\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"},
		{"lone high surrogate", `{"model":"m","messages":[{"role":"user","content":"a\ud800b"}]}`},
		{"lone low surrogate", `{"model":"m","messages":[{"role":"user","content":"\udc00"}]}`},
		{"high surrogate at the end", `{"model":"m","messages":[{"role":"user","content":"\ud83d"}]}`},
	} {
		for _, conv := range []string{"u8", ""} {
			status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": conv}, tc.body)
			if status != 400 || !strings.Contains(string(body), `"code":"invalid_request"`) {
				t.Errorf("%s (conversation %q): %d %s, want 400", tc.name, conv, status, body)
			}
		}
	}
	// A surrogate pair, escaped, and an escaped backslash before a u are
	// text like any other.
	for _, ok := range []string{`\ud83d\ude00`, `\\ud800`, `caf\u00e9`} {
		status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "u8-ok"}, `{"model":"m","messages":[{"role":"user","content":"`+ok+`"}]}`)
		if status != 200 {
			t.Errorf("%s: %d %s, want 200", ok, status, body)
		}
	}
	if n := len(env.up.requests()); n != 3 {
		t.Errorf("the upstream got %d requests, want only the 3 valid ones", n)
	}
	if msgs := env.stored(t, "u8"); len(msgs) != 0 {
		t.Errorf("refused requests stored %q", brief(msgs))
	}
	if got := brief(env.stored(t, "u8-ok")); len(got) != 6 || got[0] != "user:😀" || got[2] != `user:\ud800` {
		t.Errorf("stored %q", got)
	}
}
