package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
)

// rawUpstream answers every chat completions request with body, as a
// stream (text/event-stream) or a JSON completion.
func rawUpstream(t testing.TB, stream bool, body []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// chunkEvent is an OpenAI chat.completion.chunk event with delta and
// finish_reason (JSON), as the API writes it.
func chunkEvent(delta, finish string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764460800,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n"
}

// contentEvent is a chunk event whose delta is content, encoded as the
// OpenAI API does (encoding/json).
func contentEvent(content string) string {
	b, _ := json.Marshal(content)
	return chunkEvent(`{"content":`+string(b)+`}`, "null")
}

// chatStream is an OpenAI stream whose reply is content in one event,
// between the first (role) and the last (finish_reason) chunk.
func chatStream(content string) string {
	return chunkEvent(`{"role":"assistant","content":""}`, "null") + contentEvent(content) +
		chunkEvent(`{}`, `"stop"`) + "data: [DONE]\n\n"
}

// text is n bytes of text with multi-byte characters and characters JSON
// escapes, cut at a character boundary.
func text(n int) string {
	const unit = `Dein Paket "SE-10423" ist unterwegs — Zustellung <Donnerstag> & ✓ 配達中。` + "\n"
	s := strings.Repeat(unit, n/len(unit)+1)[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// postStream sends a streamed request to the proxy (naming conversation
// conv, none if empty) and returns the response's bytes.
func postStream(t testing.TB, env *proxyEnv, conv string) []byte {
	t.Helper()
	header := map[string]string{}
	if conv != "" {
		header["X-Chatmem-Conversation"] = conv
	}
	status, _, b := env.post(t, header, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Where is my parcel?"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %.300s", status, b)
	}
	return b
}

// streamContent decodes a stream's chunks and returns the content they carry, whether the stream ended with [DONE],
// and the data of its last event.
func streamContent(t testing.TB, b []byte) (content string, done bool, last string) {
	t.Helper()
	var acc strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			if sc.Text() != "" {
				t.Fatalf("the client got a line that is not an event's: %.200q", sc.Text())
			}
			continue
		}
		last, done = data, data == "[DONE]"
		if done || strings.HasPrefix(data, `{"error"`) {
			continue
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("the client got an event that is not a chunk (%v): %.200q", err, data)
		}
		if len(c.Choices) > 0 {
			acc.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.String(), done, last
}

// storedReply returns the content of the conversation's stored reply, and
// whether there is one.
func storedReply(t testing.TB, env *proxyEnv, conv string) (string, bool) {
	t.Helper()
	for _, m := range env.stored(t, conv) {
		if m.Role == chatmem.RoleAssistant {
			return m.Content, true
		}
	}
	return "", false
}

// bigReplies lets a reply be as large as the stream's limit allows.
func bigReplies(o *chatmem.Options) { o.Limits.MaxContentBytes = 16 << 20 }

// bigDelta is the size of the one delta TestProxyStreamLargeDelta
// streams: far over bufio's and the old relay's 32 KiB buffer.
const bigDelta = 300_000

// TestProxyStreamLargeDelta: a delta of 300,000 characters reaches the
// client intact and is stored byte for byte, through the memory path and
// the plain pass-through of an OpenAI stream (the client gets the
// upstream's bytes exactly) and through the Anthropic translation.
func TestProxyStreamLargeDelta(t *testing.T) {
	content := text(bigDelta)
	t.Run("openai-memory", func(t *testing.T) {
		body := chatStream(content)
		env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: rawUpstream(t, true, []byte(body)).URL + "/v1"})
		got := postStream(t, env, "big")
		if !bytes.Equal(got, []byte(body)) {
			c, done, _ := streamContent(t, got)
			t.Fatalf("the client got %d bytes (content %d, [DONE] %v), want the upstream's %d", len(got), len(c), done, len(body))
		}
		if s, ok := storedReply(t, env, "big"); s != content {
			t.Errorf("stored reply: %d bytes (stored %v), want the %d streamed", len(s), ok, len(content))
		}
	})
	t.Run("openai-pass-through", func(t *testing.T) {
		body := chatStream(content)
		env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: rawUpstream(t, true, []byte(body)).URL + "/v1"})
		if got := postStream(t, env, ""); !bytes.Equal(got, []byte(body)) {
			t.Fatalf("the client got %d bytes, want the upstream's %d", len(got), len(body))
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		anth := newAnthropicFakeReply(t, content, len(content))
		tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: anth.URL, APIKey: "sk-ant-test", Model: "claude-test"})
		if err != nil {
			t.Fatal(err)
		}
		env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: anth.URL, upClient: &http.Client{Transport: tr}})
		got, done, _ := streamContent(t, postStream(t, env, "big"))
		if got != content || !done {
			t.Errorf("the client got content of %d bytes, [DONE] %v; want the %d sent", len(got), done, len(content))
		}
		if s, ok := storedReply(t, env, "big"); s != content {
			t.Errorf("stored reply: %d bytes (stored %v), want the %d streamed", len(s), ok, len(content))
		}
	})
}

// TestProxyStreamEventSizes: for events of every size from 0 to 3 MiB,
// small ones, those around the reader's 32 KiB buffer and its multiples
// and large ones, the client of the memory path and of the pass-through
// gets exactly the bytes the upstream sent, and the stored reply is the
// content the client got.
func TestProxyStreamEventSizes(t *testing.T) {
	overhead := len(contentEvent(""))
	for _, size := range []int{0, 1, 32767, 32768, 32769, 65535, 65536, 65537, 300_000, 1 << 20, 3 << 20} {
		// Under the overhead of a chunk, size is the content's; over it,
		// the content event's, ASCII that JSON does not escape, or text
		// that it does, with multi-byte characters.
		n := size
		if size > overhead {
			n = size - overhead
		}
		for _, content := range []string{strings.Repeat("x", n), text(n)} {
			body := chatStream(content)
			up := rawUpstream(t, true, []byte(body))
			env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: up.URL + "/v1"})
			for _, conv := range []string{"", "sizes"} {
				got := postStream(t, env, conv)
				if !bytes.Equal(got, []byte(body)) {
					c, done, _ := streamContent(t, got)
					t.Fatalf("event of %d bytes, conversation %q: the client got %d bytes (content %d, [DONE] %v), want the upstream's %d",
						len(contentEvent(content)), conv, len(got), len(c), done, len(body))
				}
				if conv == "" {
					continue
				}
				client, _, _ := streamContent(t, got)
				s, ok := storedReply(t, env, conv)
				if s != client || ok != (client != "") || client != content {
					t.Errorf("event of %d bytes: stored reply of %d bytes (stored %v), want the client's %d", len(contentEvent(content)), len(s), ok, len(client))
				}
			}
		}
	}
}

// wantStreamFailed checks that the client's stream b ended with an error
// event in the OpenAI shape and without [DONE], that no reply is stored
// in conv (if named) and that the log says why.
func wantStreamFailed(t *testing.T, env *proxyEnv, conv string, b []byte) {
	t.Helper()
	_, done, last := streamContent(t, b)
	var e openAIErrorBody
	if done || json.Unmarshal([]byte(last), &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("the stream ended with %.300q ([DONE] %v), want an error event in the OpenAI shape", last, done)
	}
	if conv == "" {
		return
	}
	if s, ok := storedReply(t, env, conv); ok {
		t.Errorf("a reply of %d bytes was stored: %.100q", len(s), s)
	}
	if msgs := env.stored(t, conv); len(msgs) != 1 || msgs[0].Role != chatmem.RoleUser {
		t.Errorf("stored %q, want the user's message alone", brief(msgs))
	}
	if !strings.Contains(env.log.String(), "stream incomplete, reply not stored") {
		t.Errorf("the log does not say the stream was incomplete:\n%s", env.log.String())
	}
}

// TestProxyStreamEventTooLarge: an event over the limit ends the stream
// with an error event, not [DONE], and nothing of the reply is stored.
func TestProxyStreamEventTooLarge(t *testing.T) {
	body := chatStream(strings.Repeat("x", 8<<20))
	env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: rawUpstream(t, true, []byte(body)).URL + "/v1"})
	for _, conv := range []string{"", "huge"} {
		b := postStream(t, env, conv)
		wantStreamFailed(t, env, conv, b)
		if len(b) > 1<<20 {
			t.Errorf("conversation %q: the client got %d bytes of a stream whose event is over the limit", conv, len(b))
		}
	}
}

// TestProxyStreamBadEvent: an event that is not a chunk, an upstream
// error event, and a chunk whose text decoding would rewrite (invalid
// UTF-8, a lone surrogate escape) each end the stream with an error
// event, not [DONE]; the reply is not stored and the log says why.
func TestProxyStreamBadEvent(t *testing.T) {
	for _, tc := range []struct{ name, event string }{
		{"not json", "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"\n\n"},
		{"error event", `data: {"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}` + "\n\n"},
		{"invalid utf-8", chunkEvent("{\"content\":\"caf\xe9\"}", "null")},
		{"lone surrogate", chunkEvent(`{"content":"broken \ud83d here"}`, "null")},
		{"lone surrogate in arguments", chunkEvent(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"q\":\"\udc00\"}"}}]}`, "null")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := chunkEvent(`{"role":"assistant","content":""}`, "null") + contentEvent("Your parcel ") + tc.event +
				contentEvent("arrives on Thursday.") + chunkEvent(`{}`, `"stop"`) + "data: [DONE]\n\n"
			env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: rawUpstream(t, true, []byte(body)).URL + "/v1"})
			wantStreamFailed(t, env, "bad", postStream(t, env, "bad"))
		})
	}
}

// TestProxyReplyInvalidText: a completion whose text decoding would
// rewrite is a 502, and not stored; the Anthropic translation refuses it
// too, streamed or not.
func TestProxyReplyInvalidText(t *testing.T) {
	for _, content := range []string{"caf\xe9", `broken \ud83d here`} {
		body := `{"id":"chatcmpl-1","object":"chat.completion","created":1764460800,"model":"gpt-4o-mini",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"` + content + `"},"finish_reason":"stop"}]}`
		env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: rawUpstream(t, false, []byte(body)).URL + "/v1"})
		status, _, b := env.post(t, map[string]string{"X-Chatmem-Conversation": "bad"}, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if status != http.StatusBadGateway {
			t.Errorf("content %q: %d %s, want 502", content, status, b)
		}
		if s, ok := storedReply(t, env, "bad"); ok {
			t.Errorf("content %q: stored %q", content, s)
		}
		if msgs := env.stored(t, "bad"); len(msgs) != 1 {
			t.Errorf("content %q: stored %q, want the user's message alone", content, brief(msgs))
		}
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("anthropic stream=%v", stream), func(t *testing.T) {
			anth := newAnthropicFakeReply(t, "caf\xe9 au lait", 8)
			tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: anth.URL, APIKey: "sk-ant-test", Model: "claude-test"})
			if err != nil {
				t.Fatal(err)
			}
			env := newProxyEnv(t, proxyConfig{memory: bigReplies, baseURL: anth.URL, upClient: &http.Client{Transport: tr}})
			status, _, b := env.post(t, map[string]string{"X-Chatmem-Conversation": "bad"},
				fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream))
			if stream {
				wantStreamFailed(t, env, "bad", b)
				return
			}
			if status != http.StatusBadGateway {
				t.Errorf("%d %s, want 502", status, b)
			}
			if s, ok := storedReply(t, env, "bad"); ok {
				t.Errorf("stored %q", s)
			}
		})
	}
}
