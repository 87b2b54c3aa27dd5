package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
)

// chatMsg is a message in brief's notation: "u:text", "a:text", "s:text"
// (system), "t[id]:result" (a tool result) and "a:->id:name(args)" (an
// assistant tool call).
func chatMsg(s string) chatmem.Message {
	role, rest, _ := strings.Cut(s, ":")
	var m chatmem.Message
	switch {
	case role == "u" || role == "user":
		m.Role = chatmem.RoleUser
	case role == "s" || role == "system":
		m.Role = chatmem.RoleSystem
	case strings.HasPrefix(role, "t[") || strings.HasPrefix(role, "tool["):
		_, id, _ := strings.Cut(strings.TrimSuffix(role, "]"), "[")
		m.Role, m.ToolCallID = chatmem.RoleTool, id
	default:
		m.Role = chatmem.RoleAssistant
	}
	if call, ok := strings.CutPrefix(rest, "->"); ok {
		id, fn, _ := strings.Cut(call, ":")
		name, args, _ := strings.Cut(strings.TrimSuffix(fn, ")"), "(")
		m.ToolCalls = []chatmem.ToolCall{{ID: id, Type: "function", Function: chatmem.FunctionCall{Name: name, Arguments: args}}}
		return m
	}
	m.Content = rest
	return m
}

func chatMsgs(ss ...string) []chatmem.Message {
	out := make([]chatmem.Message, len(ss))
	for i, s := range ss {
		out[i] = chatMsg(s)
	}
	return out
}

// reconcileBody is a chat completion request of msgs (in chatMsg's notation).
func reconcileBody(t testing.TB, msgs ...string) string {
	t.Helper()
	list := make([]json.RawMessage, len(msgs))
	for i, m := range chatMsgs(msgs...) {
		b, err := MarshalOpenAIMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		list[i] = b
	}
	b, err := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": list})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seedConversation stores msgs (chatMsg's notation) as conversation id.
func (e *proxyEnv) seed(t testing.TB, id string, msgs ...string) {
	t.Helper()
	if _, err := e.mem.Append(context.Background(), chatmem.Key{Tenant: "acme", ID: id}, chatMsgs(msgs...), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestProxyReconcile sends requests of every shape against a stored
// conversation and checks what is stored, what the upstream got and the
// answer: each message is stored once, whatever part of the history the
// client sends.
func TestProxyReconcile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stored  []string
		request []string
		// after is the stored conversation afterwards, the reply the
		// upstream gives ("answer 1") included where it is stored.
		after []string
		// sent is what the upstream got.
		sent  []string
		retry bool
	}{{
		name:    "full history",
		stored:  []string{"u:hi", "a:hello", "u:my order?", "a:SE-1"},
		request: []string{"s:be brief", "u:hi", "a:hello", "u:my order?", "a:SE-1", "u:thanks"},
		after:   []string{"u:hi", "a:hello", "u:my order?", "a:SE-1", "u:thanks", "assistant:answer 1"},
		sent:    []string{"system:be brief", "user:hi", "assistant:hello", "user:my order?", "assistant:SE-1", "user:thanks"},
	}, {
		name:    "trimmed history",
		stored:  []string{"u:hi", "a:hello", "u:my order?", "a:SE-1"},
		request: []string{"u:my order?", "a:SE-1", "u:thanks"},
		after:   []string{"u:hi", "a:hello", "u:my order?", "a:SE-1", "u:thanks", "assistant:answer 1"},
		sent:    []string{"user:hi", "assistant:hello", "user:my order?", "assistant:SE-1", "user:thanks"},
	}, {
		name:    "only the new message",
		stored:  []string{"u:hi", "a:hello"},
		request: []string{"u:thanks"},
		after:   []string{"u:hi", "a:hello", "u:thanks", "assistant:answer 1"},
		sent:    []string{"user:hi", "assistant:hello", "user:thanks"},
	}, {
		name:    "new conversation with history",
		request: []string{"u:hi", "a:hello from another app", "u:thanks"},
		after:   []string{"u:hi", "a:hello from another app", "u:thanks", "assistant:answer 1"},
		sent:    []string{"user:hi", "assistant:hello from another app", "user:thanks"},
	}, {
		// A single message said again after its reply is a new one.
		name:    "yes twice",
		stored:  []string{"u:yes", "a:Sure?"},
		request: []string{"u:yes"},
		after:   []string{"u:yes", "a:Sure?", "u:yes", "assistant:answer 1"},
		sent:    []string{"user:yes", "assistant:Sure?", "user:yes"},
	}, {
		// The full history of a chat where "ok" answers "ok": the
		// longest overlap is the whole stored conversation.
		name:    "ok answered with ok, full history",
		stored:  []string{"u:ok", "a:ok", "u:ok", "a:ok"},
		request: []string{"u:ok", "a:ok", "u:ok", "a:ok", "u:ok"},
		after:   []string{"u:ok", "a:ok", "u:ok", "a:ok", "u:ok", "assistant:answer 1"},
		sent:    []string{"user:ok", "assistant:ok", "user:ok", "assistant:ok", "user:ok"},
	}, {
		name:    "ok answered with ok, trimmed",
		stored:  []string{"u:go", "a:ok", "u:ok", "a:ok", "u:ok", "a:ok"},
		request: []string{"a:ok", "u:ok", "a:ok", "u:next"},
		after:   []string{"u:go", "a:ok", "u:ok", "a:ok", "u:ok", "a:ok", "u:next", "assistant:answer 1"},
		sent:    []string{"user:go", "assistant:ok", "user:ok", "assistant:ok", "user:ok", "assistant:ok", "user:next"},
	}, {
		name:    "tool call round trip, full history",
		stored:  []string{"u:where is SE-1?", "a:->c1:track({\"id\":\"SE-1\"})"},
		request: []string{"u:where is SE-1?", "a:->c1:track({\"id\":\"SE-1\"})", "t[c1]:in transit"},
		after:   []string{"u:where is SE-1?", "a:->c1:track({\"id\":\"SE-1\"})", "t[c1]:in transit", "assistant:answer 1"},
		sent:    []string{"user:where is SE-1?", "assistant:->c1:track({\"id\":\"SE-1\"})", "tool[c1]:in transit"},
	}, {
		// A client that writes the arguments anew, without the spaces.
		name:    "tool call arguments written anew",
		stored:  []string{"u:where is SE-1?", "a:->c1:track({\"id\": \"SE-1\"})", "t[c1]:in transit", "a:it is on its way"},
		request: []string{"u:where is SE-1?", "a:->c1:track({\"id\":\"SE-1\"})", "t[c1]:in transit", "a:it is on its way", "u:thanks"},
		after:   []string{"u:where is SE-1?", "a:->c1:track({\"id\": \"SE-1\"})", "t[c1]:in transit", "a:it is on its way", "u:thanks", "assistant:answer 1"},
		sent:    []string{"user:where is SE-1?", "assistant:->c1:track({\"id\": \"SE-1\"})", "tool[c1]:in transit", "assistant:it is on its way", "user:thanks"},
	}, {
		// The first attempt stored the user message but got no reply.
		name:    "retry of a turn without its reply",
		stored:  []string{"u:hi", "a:hello", "u:thanks"},
		request: []string{"u:hi", "a:hello", "u:thanks"},
		after:   []string{"u:hi", "a:hello", "u:thanks", "assistant:answer 1"},
		sent:    []string{"user:hi", "assistant:hello", "user:thanks"},
	}, {
		name:    "retry of a turn with its reply",
		stored:  []string{"u:hi", "a:hello", "u:thanks", "a:you're welcome"},
		request: []string{"u:hi", "a:hello", "u:thanks"},
		after:   []string{"u:hi", "a:hello", "u:thanks", "a:you're welcome"},
		sent:    []string{"user:hi", "assistant:hello", "user:thanks"},
		retry:   true,
	}, {
		name:    "stored system message in between",
		stored:  []string{"u:hi", "a:hello", "s:the customer is a VIP", "u:my order?", "a:SE-1"},
		request: []string{"u:hi", "a:hello", "u:my order?", "a:SE-1", "u:thanks"},
		after:   []string{"u:hi", "a:hello", "system:the customer is a VIP", "u:my order?", "a:SE-1", "u:thanks", "assistant:answer 1"},
		sent:    []string{"system:the customer is a VIP", "user:hi", "assistant:hello", "user:my order?", "assistant:SE-1", "user:thanks"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{policy: chatmem.Policy{Kind: chatmem.PolicyAll}})
			if len(tc.stored) > 0 {
				env.seed(t, "c", tc.stored...)
			}
			status, h, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, tc.request...))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := h.Get(headerRetry) == "true"; got != tc.retry {
				t.Errorf("%s: %q, want retry %v", headerRetry, h.Get(headerRetry), tc.retry)
			}
			wantBrief(t, "stored", brief(env.stored(t, "c")), normBrief(tc.after))
			wantBrief(t, "sent upstream", brief(env.up.last(t).messages(t)), tc.sent)
		})
	}
}

// normBrief spells chatMsg's notation as brief does.
func normBrief(ss []string) []string {
	return brief(chatMsgs(ss...))
}

// TestProxyDiverge edits an earlier message and drops a reply to
// regenerate it, in full-history requests: refused by default (409
// history_diverged, naming the first differing message, nothing stored,
// no upstream call); with DivergeFork, the client's branch goes to a
// conversation of its own, which later turns that name the original
// conversation reach again.
func TestProxyDiverge(t *testing.T) {
	stored := []string{"u:hi", "a:hello", "u:my order is SE-1", "a:SE-1 ships today", "u:thanks", "a:welcome"}
	for _, tc := range []struct {
		name    string
		request []string
		message string // in the 409's message
	}{
		{"edit", []string{"s:be brief", "u:hi", "a:hello", "u:my order is SE-2"}, "at messages[3], which differs from its stored message 3"},
		{"regenerate an earlier reply", []string{"u:hi", "a:hello", "u:my order is SE-1"}, "end before the stored conversation's message 4: they diverge from it at messages[3]"},
		{"regenerate the last reply, then go on", []string{"u:hi", "a:hello", "u:my order is SE-1", "a:SE-1 ships today", "u:thanks", "a:my pleasure", "u:bye"}, "at messages[5], which differs from its stored message 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{})
			env.seed(t, "c", stored...)
			status, _, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, tc.request...))
			if status != http.StatusConflict {
				t.Fatalf("status %d, want 409: %s", status, body)
			}
			var e openAIErrorBody
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != codeDiverged || e.Error.Param == nil || *e.Error.Param != "messages" {
				t.Errorf("error body %s, want code %s and param messages", body, codeDiverged)
			}
			if !strings.Contains(e.Error.Message, tc.message) {
				t.Errorf("message %q, want it to say %q", e.Error.Message, tc.message)
			}
			wantBrief(t, "stored", brief(env.stored(t, "c")), normBrief(stored))
			if n := len(env.up.requests()); n != 0 {
				t.Errorf("the upstream got %d requests, want none", n)
			}
		})
	}

	t.Run("fork", func(t *testing.T) {
		env := newProxyEnv(t, proxyConfig{policy: chatmem.Policy{Kind: chatmem.PolicyAll}, onDiverge: DivergeFork})
		env.seed(t, "c", stored...)
		edited := []string{"u:hi", "a:hello", "u:my order is SE-2"}
		status, h, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, edited...))
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		fork := h.Get(headerConversation)
		if fork == "" || fork == "c" || !strings.HasPrefix(fork, "c.fork-") {
			t.Fatalf("%s = %q, want the fork's ID", headerConversation, fork)
		}
		wantBrief(t, "original", brief(env.stored(t, "c")), normBrief(stored))
		wantBrief(t, "fork", brief(env.stored(t, fork)), normBrief(append(edited, "a:answer 1")))
		// The client goes on with its branch, naming the original.
		next := append(edited, "a:answer 1", "u:and SE-3?")
		status, h, body = env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, next...))
		if status != http.StatusOK || h.Get(headerConversation) != fork {
			t.Fatalf("status %d, %s %q, want 200 and the fork %q: %s", status, headerConversation, h.Get(headerConversation), fork, body)
		}
		wantBrief(t, "fork after a turn", brief(env.stored(t, fork)), normBrief(append(next, "a:answer 2")))
		wantBrief(t, "original after a turn", brief(env.stored(t, "c")), normBrief(stored))
		wantBrief(t, "sent upstream", brief(env.up.last(t).messages(t)), normBrief(next))
	})
}

// TestProxyRewind: under the default, rewind, an edit of an earlier
// message takes the stored conversation back to the last message the
// request shares with it and stores the client's branch; a regeneration
// (the stored turn asked again) replaces the stored reply; search finds
// nothing of what was rewound; the default of a server is rewind.
func TestProxyRewind(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{policy: chatmem.Policy{Kind: chatmem.PolicyAll}, onDiverge: DivergeRewind})
	stored := []string{"u:hi", "a:hello", "u:my order is the bluebird kettle", "a:the bluebird kettle ships today", "u:thanks"}
	env.seed(t, "c", stored...)
	post := func(what string, msgs ...string) http.Header {
		t.Helper()
		status, h, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, msgs...))
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", what, status, body)
		}
		return h
	}
	// An edit of the third message: the stored conversation becomes the
	// client's branch, with the reply.
	edited := []string{"u:hi", "a:hello", "u:my order is the sparrow lamp"}
	if h := post("edit", edited...); h.Get(headerConversation) != "c" || h.Get(headerRetry) != "" {
		t.Errorf("edit: answered %s %q, %s %q; want c and no retry", headerConversation, h.Get(headerConversation), headerRetry, h.Get(headerRetry))
	}
	wantBrief(t, "after the edit", brief(env.stored(t, "c")), normBrief(append(edited, "a:answer 1")))
	wantBrief(t, "sent upstream", brief(env.up.last(t).messages(t)), normBrief(edited))
	hits, err := env.mem.Search(t.Context(), chatmem.Key{Tenant: "acme", ID: "c"}, "bluebird", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 0 {
		t.Errorf("search for the rewound bluebird found %d messages: %+v", len(hits), hits)
	}
	// A regeneration: the same history again; the new reply replaces
	// the stored one.
	if h := post("regenerate", edited...); h.Get(headerRetry) != "" {
		t.Errorf("regenerate: %s %q, want none under rewind", headerRetry, h.Get(headerRetry))
	}
	wantBrief(t, "after the regeneration", brief(env.stored(t, "c")), normBrief(append(edited, "a:answer 2")))
	// And the conversation goes on from the client's branch.
	next := append(edited, "a:answer 2", "u:and SE-3?")
	post("next", next...)
	wantBrief(t, "after the next turn", brief(env.stored(t, "c")), normBrief(append(next, "a:answer 3")))

	up, err := newUpstream(Upstream{BaseURL: "http://127.0.0.1:9/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if up.onDiverge != DivergeRewind {
		t.Errorf("a server's default OnDiverge is %q, want %q", up.onDiverge, DivergeRewind)
	}
}

// TestOverlap checks the longest suffix-prefix match on its own.
func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		stored, sent string
		want         int
	}{
		{"", "u:a", 0},
		{"u:a a:b", "", 0},
		{"u:a a:b", "u:a a:b u:c", 2},
		{"u:a a:b", "a:b u:c", 1},
		{"u:a a:b", "u:c", 0},
		{"u:x a:x u:x a:x", "u:x a:x u:x a:x u:x", 4},
		{"u:x a:x u:x a:x", "a:x u:x a:x u:y", 3},
		{"u:x a:x u:x a:x", "u:x a:x u:y", 2},
		{"u:a u:a u:a", "u:a u:a", 2},
		{"u:a u:b u:a u:b u:a", "u:a u:b u:a u:c", 3},
		{"u:a", "a:a", 0}, // the role counts
	} {
		got := overlap(chatMsgs(strings.Fields(tc.stored)...), chatMsgs(strings.Fields(tc.sent)...))
		if got != tc.want {
			t.Errorf("overlap(%q, %q) = %d, want %d", tc.stored, tc.sent, got, tc.want)
		}
	}
}

// countingStore counts the messages its reads return.
type countingStore struct {
	chatmem.Store
	read atomic.Int64
}

func (s *countingStore) Range(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.Message, error) {
	msgs, err := s.Store.Range(ctx, key, after, limit)
	s.read.Add(int64(len(msgs)))
	return msgs, err
}

func (s *countingStore) Tail(ctx context.Context, key chatmem.Key, q chatmem.TailQuery) ([]chatmem.Message, error) {
	msgs, err := s.Store.Tail(ctx, key, q)
	s.read.Add(int64(len(msgs)))
	return msgs, err
}

// TestProxyReconcileReadsRequest: a turn whose request carries 60
// messages of history reads as many stored messages on a conversation of
// 20,000 as on one of 2,000: the request's worth and the window's, never
// the history.
func TestProxyReconcileReadsRequest(t *testing.T) {
	reads := map[int]int64{}
	for _, stored := range []int{2_000, 20_000} {
		st := &countingStore{Store: memstore.New()}
		env := newProxyEnv(t, proxyConfig{store: st})
		var history []string
		for i := 0; i < stored; i += 2 {
			history = append(history, fmt.Sprintf("u:question %06d", i), fmt.Sprintf("a:answer %06d", i))
		}
		for i := 0; i < len(history); i += 1000 {
			env.seed(t, "c", history[i:min(i+1000, len(history))]...)
		}
		for _, request := range [][]string{
			append(slices.Clone(history[len(history)-59:]), "u:new"), // trimmed
			append(slices.Clone(history[len(history)-59:]), "u:new"), // a retry
			{"u:only the new one"},
		} {
			st.read.Store(0)
			status, _, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, request...))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			reads[stored] += st.read.Load()
		}
		if n := len(env.stored(t, "c")); n != stored+4 {
			t.Errorf("%d stored: %d after the turns, want %d", stored, n, stored+4)
		}
	}
	if reads[2_000] != reads[20_000] || reads[2_000] == 0 {
		t.Errorf("stored messages read: %v, want the same for both", reads)
	}
	t.Logf("stored messages read in three turns: %v", reads)
}
