package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// TestTurnRoute drives POST /v1/conversations/{id}/turn on every store as
// a chatbot does, a reply appended between turns: each answer holds the
// appended messages and the window GET .../context gives right after,
// the same append options work (Idempotency-Key replays, If-Match
// conflicts), bad input of either part changes nothing, and a budget too
// small for the window answers 422 with the append landed.
func TestTurnRoute(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			mem := newMemory(t, b.open(t), nil)
			ts := newTestServer(t, mem, Options{Limits: testLimits})
			testTurnRoute(t, ts)
		})
	}
}

func testTurnRoute(t *testing.T, ts *testServer) {
	const path = "/v1/conversations/chat/turn?policy=token_budget&budget=60"
	user := func(text string) string {
		return fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, text)
	}
	decode := func(what string, r rawResponse, status int) TurnResponse {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.body)
		}
		var tr TurnResponse
		if err := json.Unmarshal(r.body, &tr); err != nil {
			t.Fatalf("%s: decode: %v: %s", what, err, r.body)
		}
		if got, want := r.header.Get("ETag"), etag(tr.Appended.Conversation.LastSeq); got != want {
			t.Errorf("%s: ETag %s, want %s", what, got, want)
		}
		return tr
	}
	contextNow := func(what string) chatmem.Window {
		t.Helper()
		r := ts.raw(t, "GET", "/v1/conversations/chat/context?policy=token_budget&budget=60", acmeKey, nil, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: context status %d: %s", what, r.status, r.body)
		}
		var w chatmem.Window
		if err := json.Unmarshal(r.body, &w); err != nil {
			t.Fatalf("%s: decode context: %v", what, err)
		}
		return w
	}
	texts := func(w chatmem.Window) []string {
		var out []string
		for _, m := range w.Messages {
			out = append(out, string(m.Role)+":"+m.Content)
		}
		return out
	}

	var last int64
	for i := range 6 {
		what := fmt.Sprintf("turn %d", i+1)
		tr := decode(what, ts.raw(t, "POST", path, acmeKey, nil, user(fmt.Sprintf("question number %d about my order", i+1))), http.StatusCreated)
		if len(tr.Appended.Messages) != 1 || tr.Appended.Messages[0].Seq != last+1 {
			t.Fatalf("%s: appended %+v, want one message at seq %d", what, tr.Appended.Messages, last+1)
		}
		n := len(tr.Window.Messages)
		if n == 0 || tr.Window.Messages[n-1].Seq != last+1 || tr.Window.Messages[n-1].Content != tr.Appended.Messages[0].Content {
			t.Fatalf("%s: window %v does not end with the appended message", what, texts(tr.Window))
		}
		if got, want := texts(tr.Window), texts(contextNow(what)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: window %v, want GET context's %v", what, got, want)
		}
		if tr.Window.Tokens > 60 {
			t.Errorf("%s: window of %d tokens, over the budget of 60", what, tr.Window.Tokens)
		}
		// The reply, as the chatbot stores it before the next turn.
		r := ts.raw(t, "POST", "/v1/conversations/chat/messages", acmeKey, nil, `{"messages":[{"role":"assistant","content":"an answer about the order"}]}`)
		if r.status != http.StatusCreated {
			t.Fatalf("%s: reply: status %d: %s", what, r.status, r.body)
		}
		last += 2
	}

	// Idempotency-Key: the retry replays, writing nothing.
	key := map[string]string{"Idempotency-Key": "turn-7"}
	first := decode("keyed turn", ts.raw(t, "POST", path, acmeKey, key, user("a keyed question")), http.StatusCreated)
	retry := ts.raw(t, "POST", path, acmeKey, key, user("a keyed question"))
	again := decode("keyed retry", retry, http.StatusOK)
	if retry.header.Get("Idempotent-Replayed") != "true" || again.Appended.Messages[0].Seq != first.Appended.Messages[0].Seq || again.Appended.Conversation.LastSeq != last+1 {
		t.Errorf("keyed retry: replayed %q, appended %+v, want a replay of seq %d", retry.header.Get("Idempotent-Replayed"), again.Appended.Messages, last+1)
	}
	last++

	// If-Match on a stale seq: 409, nothing appended.
	stale := ts.raw(t, "POST", path, acmeKey, map[string]string{"If-Match": fmt.Sprint(last - 1)}, user("stale"))
	if stale.status != http.StatusConflict {
		t.Errorf("stale If-Match: status %d, want 409: %s", stale.status, stale.body)
	}
	// Bad input of either part: 400, nothing appended.
	for _, bad := range []struct{ path, body string }{
		{"/v1/conversations/chat/turn?policy=nope", user("bad policy")},
		{"/v1/conversations/chat/turn?budget=-1", user("bad budget")},
		{"/v1/conversations/chat/turn?preview=true", user("a preview turn")},
		{"/v1/conversations/chat/turn?cache=sticky", user("unknown cache mode")},
		{"/v1/conversations/chat/turn?policy=last_turns&turns=3&cache=stable", user("stable last_turns")},
		{"/v1/conversations/chat/turn?cache=stable&low_water=99", user("low water too high")},
		{path, `{"messages":[{"role":"wizard","content":"bad role"}]}`},
		{path, `{"messages":[]}`},
	} {
		if r := ts.raw(t, "POST", bad.path, acmeKey, nil, bad.body); r.status != http.StatusBadRequest {
			t.Errorf("POST %s %s: status %d, want 400: %s", bad.path, bad.body, r.status, r.body)
		}
	}
	if w := contextNow("after refusals"); w.Messages[len(w.Messages)-1].Seq != last {
		t.Errorf("after refusals the conversation ends at seq %d, want %d", w.Messages[len(w.Messages)-1].Seq, last)
	}

	// A budget too small for the window: 422, and the append landed.
	tiny := ts.raw(t, "POST", "/v1/conversations/chat/turn?policy=token_budget&budget=1", acmeKey, nil, user("a question far too long for a budget of one token"))
	if tiny.status != http.StatusUnprocessableEntity || tiny.header.Get("ETag") != etag(last+1) {
		t.Errorf("budget 1: status %d, ETag %s, want 422 with ETag %s: %s", tiny.status, tiny.header.Get("ETag"), etag(last+1), tiny.body)
	}
	if w := contextNow("after budget 1"); w.Messages[len(w.Messages)-1].Seq != last+1 {
		t.Errorf("after the 422 the conversation ends at seq %d, want %d (the append landed)", w.Messages[len(w.Messages)-1].Seq, last+1)
	}

	// The Go client's Turn: the same call, typed; a retry replays.
	c := ts.client(acmeKey)
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "typed question about my order"}}
	opts := client.AppendOptions{IdempotencyKey: "typed-1"}
	params := client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 60}
	got, err := c.Turn(t.Context(), "chat", msgs, opts, params)
	must(t, "Client.Turn", err)
	n := len(got.Window.Messages)
	if got.Appended.Replayed || len(got.Appended.Messages) != 1 || got.Appended.Messages[0].Seq != last+2 || n == 0 || got.Window.Messages[n-1].Seq != last+2 {
		t.Errorf("Client.Turn = appended %+v (replayed %v), window ending %+v; want seq %d in both", got.Appended.Messages, got.Appended.Replayed, got.Window.Messages[n-1], last+2)
	}
	again, err = c.Turn(t.Context(), "chat", msgs, opts, params)
	must(t, "Client.Turn retry", err)
	if !again.Appended.Replayed || again.Appended.Conversation.LastSeq != last+2 {
		t.Errorf("Client.Turn retry: replayed %v, last seq %d; want a replay ending at %d", again.Appended.Replayed, again.Appended.Conversation.LastSeq, last+2)
	}
	_, err = c.Turn(t.Context(), "chat", msgs, client.AppendOptions{}, client.ContextParams{Policy: "nope"})
	wantAPIError(t, "Client.Turn bad policy", err, http.StatusBadRequest, "invalid_request")
}
