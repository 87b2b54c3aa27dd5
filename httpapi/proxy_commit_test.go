package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
	"github.com/chatmem/chatmem/memstore"
)

// gatedReplies is a store whose appends of a reply (a batch ending with an
// assistant message) wait at a gate: each says it entered on entered and
// goes on when release is closed, or fails with fail if set.
type gatedReplies struct {
	chatmem.Store
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	fail    error
}

func newGatedReplies() *gatedReplies {
	return &gatedReplies{Store: memstore.New(), entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (s *gatedReplies) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	if msgs[len(msgs)-1].Role == chatmem.RoleAssistant {
		s.entered <- struct{}{}
		<-s.release
		s.mu.Lock()
		err := s.fail
		s.mu.Unlock()
		if err != nil {
			return chatmem.AppendResult{}, err
		}
	}
	return s.Store.Append(ctx, key, msgs, opts)
}

// events is what a client has read so far, safe for concurrent use.
type events struct {
	mu    sync.Mutex
	lines []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, s)
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

// readStream reads a proxied stream's data lines into ev until it ends,
// and returns the body's last data line.
func readStream(t *testing.T, env *proxyEnv, conv, body string, ev *events) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, env.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+proxyKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Chatmem-Conversation", conv)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ev.add("error " + err.Error())
		return
	}
	defer resp.Body.Close()
	ev.add(fmt.Sprintf("status %d", resp.StatusCode))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			ev.add(data)
		}
	}
	ev.add("eof")
}

// finished reports whether lines hold a stream's ending: a chunk with a
// finish_reason, or data: [DONE].
func finished(lines []string) bool {
	for _, l := range lines {
		if l == "[DONE]" || strings.Contains(l, `"finish_reason":"`) {
			return true
		}
	}
	return false
}

// TestProxyCommitsBeforeReply: while the turn's append waits at the gate,
// the client has no reply (non-streaming) or no ending of its stream (the
// deltas it has; the OpenAI kind and the Anthropic kind, whose message_stop
// the transport turns into the ending); once the append is through, the
// client gets the rest and the turn is stored.
func TestProxyCommitsBeforeReply(t *testing.T) {
	anth := newAnthropicFake(t)
	tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: anth.URL, APIKey: "sk-ant-test", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		stream bool
		cfg    proxyConfig
		want   string
	}{
		{"openai", false, proxyConfig{}, "answer 1"},
		{"openai-stream", true, proxyConfig{}, "answer 1"},
		{"anthropic-stream", true, proxyConfig{baseURL: anth.URL, upClient: &http.Client{Transport: tr}}, anthropicReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newGatedReplies()
			tc.cfg.store = store
			env := newProxyEnv(t, tc.cfg)
			body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, tc.stream)
			var ev events
			done := make(chan struct{})
			go func() {
				defer close(done)
				if tc.stream {
					readStream(t, env, "g", body, &ev)
					return
				}
				status, _, b := env.post(t, map[string]string{"X-Chatmem-Conversation": "g"}, body)
				ev.add(fmt.Sprintf("status %d", status))
				ev.add(string(b))
			}()
			<-store.entered
			// The proxy is inside the append: nothing that ends the reply
			// can have reached the client.
			if got := ev.all(); finished(got) || (!tc.stream && len(got) > 0) {
				t.Errorf("the client got %q before the turn was stored", got)
			}
			close(store.release)
			<-done
			got := ev.all()
			if !finished(got) || !strings.Contains(strings.Join(got, "\n"), tc.want[:4]) {
				t.Errorf("after the commit the client got %q", got)
			}
			wantBrief(t, "stored", brief(env.stored(t, "g")), []string{"user:hi", "assistant:" + tc.want})
		})
	}
}

// TestProxyCommitFails: a turn that cannot be stored is not acknowledged:
// a non-streaming request gets a 5xx error instead of the reply, a stream
// its deltas and then an error event, with no finish_reason and no [DONE]
// (the SDK reports an error); nothing of the reply is stored, and the
// user's message is written alone.
func TestProxyCommitFails(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			store := newGatedReplies()
			store.fail = fmt.Errorf("%w: the disk is gone", chatmem.ErrUnavailable)
			close(store.release)
			env := newProxyEnv(t, proxyConfig{store: store})
			if !stream {
				status, _, b := env.post(t, map[string]string{"X-Chatmem-Conversation": "f"}, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
				if status != 503 || strings.Contains(string(b), "answer 1") || !strings.Contains(string(b), `"code":"unavailable"`) {
					t.Errorf("commit failed: %d %s, want 503 without the reply", status, b)
				}
			} else {
				var ev events
				readStream(t, env, "f", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, &ev)
				got := ev.all()
				if finished(got) || len(got) < 3 || !strings.Contains(got[len(got)-2], `"error"`) {
					t.Errorf("commit failed: the stream was %q, want deltas and an error event, no ending", got)
				}
				s := env.client("f").Chat.Completions.NewStreaming(t.Context(), userTurn("again"))
				for s.Next() {
				}
				var oe *openai.Error
				if err := s.Err(); err == nil {
					t.Error("the SDK saw the stream of an unstored reply end without an error")
				} else if errors.As(err, &oe) {
					t.Logf("SDK error: %v", err)
				}
			}
			for _, m := range env.stored(t, "f") {
				if m.Role == chatmem.RoleAssistant {
					t.Errorf("a reply was stored: %q", brief(env.stored(t, "f")))
				}
			}
			if msgs := env.stored(t, "f"); len(msgs) == 0 || msgs[0].Content != "hi" {
				t.Errorf("the user's message was not written alone: %q", brief(msgs))
			}
		})
	}
}

// anthropicReply is what the Anthropic fake answers.
const anthropicReply = "Your parcel arrives on Thursday."

// anthropicFake speaks Anthropic's Messages API wire format: streamed,
// message_start, content_block_start, content_block_delta (text_delta),
// content_block_stop, message_delta (stop_reason, usage), message_stop;
// not, a message.
type anthropicFake struct{ *httptest.Server }

// newAnthropicFake answers anthropicReply, streamed in deltas of 8 bytes.
func newAnthropicFake(t *testing.T) *anthropicFake {
	return newAnthropicFakeReply(t, anthropicReply, 8)
}

// newAnthropicFakeReply answers text, streamed in deltas of piece bytes.
// The text is written as it is, invalid UTF-8 included, where JSON would
// not escape it.
func newAnthropicFakeReply(t *testing.T, text string, piece int) *anthropicFake {
	f := &anthropicFake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if r.URL.Path != "/v1/messages" || r.Header.Get("x-api-key") == "" {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no"}}`, http.StatusNotFound)
			return
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":%s}],`+
				`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":9}}`, jsonText(text))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		ev := func(typ string, v map[string]any) {
			v["type"] = typ
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
			fl.Flush()
		}
		ev("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
			"content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 12, "output_tokens": 1}}})
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for i := 0; i < len(text); i += piece {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%s}}\n\n",
				jsonText(text[i:min(i+piece, len(text))]))
			fl.Flush()
		}
		ev("content_block_stop", map[string]any{"index": 0})
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 9}})
		ev("message_stop", map[string]any{})
	}))
	t.Cleanup(f.Close)
	return f
}

// jsonText is s as a JSON string; invalid UTF-8 is kept as it is (for a
// text that has nothing else JSON would escape).
func jsonText(s string) string {
	if !utf8.ValidString(s) {
		return `"` + s + `"`
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// readAfterReplyTurns is how many turns TestProxyReadAfterReply sends per
// store and mode.
const readAfterReplyTurns = 100

// TestProxyReadAfterReply: on every store, a read made through the REST API
// right after the client has the whole reply (the response returned, or
// the stream read to its end) sees the turn: GET messages returns the
// turn's user message and reply, GET context ends with them. 100 turns per
// store, streamed and not.
func TestProxyReadAfterReply(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{store: b.open(t)})
			rest := NewClient(env.url, proxyKey, nil)
			ctx := t.Context()
			for _, stream := range []bool{false, true} {
				conv := fmt.Sprintf("read-after-%v", stream)
				client := env.client(conv)
				misses := 0
				for i := range readAfterReplyTurns {
					user := fmt.Sprintf("question %d", i)
					var reply string
					if stream {
						s := client.Chat.Completions.NewStreaming(ctx, userTurn(user))
						var acc openai.ChatCompletionAccumulator
						for s.Next() {
							acc.AddChunk(s.Current())
						}
						pmust(t, "stream", s.Err())
						reply = acc.Choices[0].Message.Content
					} else {
						cc, err := client.Chat.Completions.New(ctx, userTurn(user))
						pmust(t, "turn", err)
						reply = cc.Choices[0].Message.Content
					}
					page, err := rest.Messages(ctx, conv, int64(2*i), 0)
					pmust(t, "GET messages", err)
					w, err := rest.Context(ctx, conv, ContextParams{Policy: chatmem.PolicyLastTurns, Turns: 1})
					pmust(t, "GET context", err)
					want := []string{"user:" + user, "assistant:" + reply}
					if got := brief(page.Messages); !slices.Equal(got, want) {
						misses++
						t.Errorf("turn %d (stream=%v): GET messages right after the reply = %q, want %q", i, stream, got, want)
					} else if got := brief(w.Messages); !slices.Equal(got, want) {
						misses++
						t.Errorf("turn %d (stream=%v): GET context right after the reply = %q, want %q", i, stream, got, want)
					}
					if misses > 3 {
						t.FailNow()
					}
				}
			}
		})
	}
}
