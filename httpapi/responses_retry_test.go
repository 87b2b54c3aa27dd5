package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// respondWith posts a response with extra headers as acme.
func (e *proxyEnv) respondWith(t testing.TB, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	return e.send(t, http.MethodPost, openAIPrefix+"/responses", proxyKey, header, body)
}

// completedOf is the response of a stream's response.completed event.
func completedOf(t testing.TB, stream []byte) responseObject {
	t.Helper()
	const ev = "event: response.completed\ndata: "
	i := strings.LastIndex(string(stream), ev)
	if i < 0 {
		t.Fatalf("no response.completed in %s", stream)
	}
	line, _, _ := strings.Cut(string(stream[i+len(ev):]), "\n")
	var e struct {
		Response responseObject `json:"response"`
	}
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	return e.Response
}

// TestResponsesIdempotencyKey: a retry with the same Idempotency-Key
// after the response was stored gets the stored response (streamed, if
// it streams), calls no upstream and stores nothing; with no conversation
// named, the retry finds the one the first attempt started; the key with
// another body is refused.
func TestResponsesIdempotencyKey(t *testing.T) {
	env := newResponsesEnv(t)
	_, b := env.do(t, "POST", "/conversations", `{"items":[{"role":"user","content":"hello"}]}`)
	var conv conversationObject
	_ = json.Unmarshal(b, &conv)
	for _, tc := range []struct{ name, key, body string }{
		{"conversation", "key-1", `{"model":"m","conversation":"` + conv.ID + `","input":"one"}`},
		{"stream", "key-2", `{"model":"m","conversation":"` + conv.ID + `","input":"two","stream":true}`},
		{"no conversation", "key-3", `{"model":"m","input":"three"}`},
		{"no conversation, stream", "key-4", `{"model":"m","input":"four","stream":true}`},
	} {
		h := map[string]string{"Idempotency-Key": tc.key}
		status, _, first := env.respondWith(t, h, tc.body)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, status, first)
		}
		before, calls := env.tenantSnapshot(t), len(env.up.requests())
		status, hdr, again := env.respondWith(t, h, tc.body)
		if status != http.StatusOK || hdr.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: retry: %d %v %s", tc.name, status, hdr, again)
		}
		var r1, r2 responseObject
		if strings.Contains(tc.body, `"stream":true`) {
			r1, r2 = completedOf(t, first), completedOf(t, again)
			for _, ev := range []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_item.done"} {
				if !strings.Contains(string(again), "event: "+ev+"\n") {
					t.Errorf("%s: the replayed stream has no %s: %s", tc.name, ev, again)
				}
			}
		} else {
			_ = json.Unmarshal(first, &r1)
			_ = json.Unmarshal(again, &r2)
		}
		a, _ := json.Marshal(r1)
		bb, _ := json.Marshal(r2)
		if r1.ID == "" || string(a) != string(bb) {
			t.Errorf("%s: the retry answered\n%s\nthe first\n%s", tc.name, bb, a)
		}
		if n := len(env.up.requests()) - calls; n != 0 {
			t.Errorf("%s: the retry called the upstream %d times", tc.name, n)
		}
		if after := env.tenantSnapshot(t); after != before {
			t.Errorf("%s: the retry changed the store", tc.name)
		}
		// The key with another body.
		other := strings.Replace(tc.body, `"input":"`, `"input":"other `, 1)
		status, _, b := env.respondWith(t, h, other)
		if e := openAIErrorOf(t, b); status != http.StatusUnprocessableEntity || !strings.Contains(e.Message, "Idempotency-Key") {
			t.Errorf("%s: the key with another body: %d %s", tc.name, status, b)
		}
		if after := env.tenantSnapshot(t); after != before {
			t.Errorf("%s: the refused reuse changed the store", tc.name)
		}
	}
	// Two conversations were started, one per key without a conversation.
	page, err := env.mem.Store().List(context.Background(), "acme", chatmem.PageRequest{Limit: 100})
	if err != nil || len(page.Conversations) != 3 {
		t.Errorf("%d conversations (%v), want 3", len(page.Conversations), err)
	}
}

// TestResponsesFailedFirstTurn: the input a new conversation's first
// turn stores before the upstream call does not outlive a failed call
// (the upstream's error, a broken stream): the conversation is gone, and
// a retry with the same Idempotency-Key stores the input once. Input left
// over by a server that could not take it back (a crash) lines up with
// the retry too; a chatmem conversation's own message does not.
func TestResponsesFailedFirstTurn(t *testing.T) {
	env := newResponsesEnv(t)
	contents := func(id string) []string {
		var out []string
		for _, m := range env.stored(t, id) {
			out = append(out, string(m.Role)+":"+m.Content)
		}
		return out
	}
	fail := fakeReply{status: http.StatusInternalServerError, body: `{"error":{"message":"boom","type":"server_error"}}`}
	for i, stream := range []string{"", `,"stream":true`} {
		key := "first-" + strings.Repeat("x", i)
		h := map[string]string{"Idempotency-Key": key}
		before := env.tenantSnapshot(t)
		if stream == "" {
			env.up.push(fail)
		} else {
			env.up.push(fakeReply{content: "a reply that breaks", breakAfter: 1})
		}
		body := `{"model":"m","input":"hi"` + stream + `}`
		status, _, b := env.respondWith(t, h, body)
		if stream == "" && status < 500 || stream != "" && !strings.Contains(string(b), "response.failed") {
			t.Fatalf("stream %q: failed turn: %d %s", stream, status, b)
		}
		if after := env.tenantSnapshot(t); after != before {
			t.Errorf("stream %q: a failed first turn left a conversation:\n%s\nwas\n%s", stream, after, before)
		}
		if status, _, b := env.respondWith(t, h, body); status != http.StatusOK {
			t.Fatalf("stream %q: retry: %d %s", stream, status, b)
		}
		if got := contents(idemConversationID(key)); len(got) != 2 || got[0] != "user:hi" || got[1] == "user:hi" {
			t.Errorf("stream %q: after the retry the conversation holds %q, want hi and the reply", stream, got)
		}
	}
	// Input a crash left: the retry answers it, storing it once.
	id := idemConversationID("crashed")
	if _, err := env.mem.Append(context.Background(), chatmem.Key{Tenant: "acme", ID: id},
		[]chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Metadata: map[string]string{metaResponseInput: "1"}}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	status, _, b := env.respondWith(t, map[string]string{"Idempotency-Key": "crashed"}, `{"model":"m","input":"hi"}`)
	var r responseObject
	if err := json.Unmarshal(b, &r); status != http.StatusOK || err != nil {
		t.Fatalf("retry after a crash: %d %s", status, b)
	}
	if got := contents(id); len(got) != 2 || got[0] != "user:hi" || got[1] == "user:hi" {
		t.Errorf("after the retry the conversation holds %q, want hi and the reply", got)
	}
	status, b = env.do(t, "GET", "/responses/"+r.ID+"/input_items", "")
	var list itemList
	if err := json.Unmarshal(b, &list); status != http.StatusOK || err != nil || len(list.Data) != 1 {
		t.Errorf("input_items: %d %s", status, b)
	}
	// A conversation's own message is not taken for a left-over input.
	id = "own-1"
	if _, err := env.mem.Append(context.Background(), chatmem.Key{Tenant: "acme", ID: id},
		[]chatmem.Message{{Role: chatmem.RoleUser, Content: "hi"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if status, b := env.do(t, "POST", "/responses", `{"model":"m","conversation":"`+id+`","input":"hi"}`); status != http.StatusOK {
		t.Fatalf("response: %d %s", status, b)
	}
	if got := contents(id); len(got) != 3 {
		t.Errorf("the conversation holds %q, want its message, the input and the reply", got)
	}
}
