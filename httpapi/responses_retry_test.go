package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
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

// newGatedResponsesEnv is newResponsesEnv whose upstream holds the Nth
// request (from 1) until gate(N) returns; arrived gets N as it comes in.
func newGatedResponsesEnv(t *testing.T, gate func(n int)) (*proxyEnv, chan int) {
	t.Helper()
	var envp atomic.Pointer[proxyEnv]
	var n atomic.Int64
	arrived := make(chan int, 16)
	wrap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1))
		arrived <- i
		gate(i)
		envp.Load().up.serve(w, r)
	}))
	t.Cleanup(wrap.Close)
	env := newProxyEnv(t, proxyConfig{baseURL: wrap.URL + "/v1"})
	envp.Store(env)
	return env, arrived
}

// TestResponsesRetryPreviousResponse: a turn after previous_response_id
// with an Idempotency-Key, retried once the first attempt stored it (the
// response it follows is no longer the newest), is replayed: no upstream
// call, no branch.
func TestResponsesRetryPreviousResponse(t *testing.T) {
	env := newResponsesEnv(t)
	status, b := env.do(t, "POST", "/responses", `{"model":"m","input":"one"}`)
	var r1 responseObject
	if err := json.Unmarshal(b, &r1); status != http.StatusOK || err != nil {
		t.Fatalf("first: %d %s", status, b)
	}
	h := map[string]string{"Idempotency-Key": "k-prev"}
	for _, stream := range []string{"", `,"stream":true`} {
		if stream != "" {
			h["Idempotency-Key"] = "k-prev-stream"
		}
		body := `{"model":"m","previous_response_id":"` + r1.ID + `","input":"two"` + stream + `}`
		status, _, first := env.respondWith(t, h, body)
		if status != http.StatusOK {
			t.Fatalf("%q: %d %s", stream, status, first)
		}
		before, calls := env.tenantSnapshot(t), len(env.up.requests())
		status, hdr, again := env.respondWith(t, h, body)
		if status != http.StatusOK || hdr.Get("Idempotent-Replayed") != "true" {
			t.Errorf("%q: retry: %d %v %s", stream, status, hdr, again)
		}
		var a, c responseObject
		if stream != "" {
			a, c = completedOf(t, first), completedOf(t, again)
		} else {
			_ = json.Unmarshal(first, &a)
			_ = json.Unmarshal(again, &c)
		}
		if a.ID == "" || a.ID != c.ID {
			t.Errorf("%q: the retry answered %q, the first %q", stream, c.ID, a.ID)
		}
		if n := len(env.up.requests()) - calls; n != 0 {
			t.Errorf("%q: the retry called the upstream %d times", stream, n)
		}
		if after := env.tenantSnapshot(t); after != before {
			t.Errorf("%q: the retry changed the store:\n%s\nwas\n%s", stream, after, before)
		}
		r1 = a
	}
}

// TestResponsesFailedTurnKeepsOthersReply: an attempt whose input (or
// branch) a retry with the same Idempotency-Key lined up with, answered
// and stored, does not take the retry's answer with it when it fails
// (its client goes): for a new conversation's first turn and a branch.
func TestResponsesFailedTurnKeepsOthersReply(t *testing.T) {
	env := newResponsesEnv(t)
	var ids []string
	for i := range 2 {
		body := `{"model":"m","input":"step"}`
		if i > 0 {
			body = `{"model":"m","input":"step","previous_response_id":"` + ids[0] + `"}`
		}
		status, b := env.do(t, "POST", "/responses", body)
		var r responseObject
		if err := json.Unmarshal(b, &r); status != http.StatusOK || err != nil {
			t.Fatalf("%d %s", status, b)
		}
		ids = append(ids, r.ID)
	}
	for _, tc := range []struct {
		key, body string
		want      int // messages in the conversation after
	}{
		{"race", `{"model":"m","input":"hi","stream":true}`, 2},
		{"race-branch", `{"model":"m","input":"hi","stream":true,"previous_response_id":"` + ids[0] + `"}`, 4},
	} {
		env.up.push(fakeReply{hang: true})
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.url+openAIPrefix+"/responses", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+proxyKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", tc.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), `"delta":"partial"`) {
		}
		// A's input (or branch) is stored, its upstream hangs: B lines
		// up with it.
		status, _, b := env.respondWith(t, map[string]string{"Idempotency-Key": tc.key}, tc.body)
		if status != http.StatusOK || !strings.Contains(string(b), "response.completed") {
			t.Fatalf("%s: B: %d %s", tc.key, status, b)
		}
		cancel()
		resp.Body.Close()
		waitHandled(t, env)
		got := env.stored(t, idemConversationID(tc.key))
		if len(got) != tc.want || got[tc.want-2].Content != "hi" || got[tc.want-1].Role != chatmem.RoleAssistant {
			t.Errorf("%s: after A failed the conversation holds %v, want %d messages ending in B's input and reply", tc.key, got, tc.want)
		}
	}
}

// TestResponsesBranchResume: a branch whose copy of the history an
// earlier attempt left half done is completed by the retry, and the
// upstream gets the whole history.
func TestResponsesBranchResume(t *testing.T) {
	env := newResponsesEnv(t)
	var ids []string
	for i, in := range []string{"step 0", "step 1", "step 2"} {
		body := `{"model":"m","input":"` + in + `"}`
		if i > 0 {
			body = `{"model":"m","input":"` + in + `","previous_response_id":"` + ids[i-1] + `"}`
		}
		status, b := env.do(t, "POST", "/responses", body)
		var r responseObject
		if err := json.Unmarshal(b, &r); status != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", body, status, b)
		}
		ids = append(ids, r.ID)
	}
	origKey, _, _ := parseResponseID("acme", ids[0])
	orig := env.stored(t, origKey.ID)
	half := make([]chatmem.Message, 2)
	for i := range half {
		half[i] = chatmem.Message{Role: orig[i].Role, Content: orig[i].Content}
	}
	if _, err := env.mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: idemConversationID("br")}, half, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	status, _, b := env.respondWith(t, map[string]string{"Idempotency-Key": "br"}, `{"model":"m","input":"branch","previous_response_id":"`+ids[1]+`"}`)
	if status != http.StatusOK {
		t.Fatalf("branch: %d %s", status, b)
	}
	got, _ := json.Marshal(env.up.last(t).messages(t))
	want := `[{"role":"user","content":"step 0"},{"role":"assistant","content":"answer 1"},{"role":"user","content":"step 1"},{"role":"assistant","content":"answer 2"},{"role":"user","content":"branch"}]`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("the branch sent %s, want %s", got, want)
	}
	// A branch past the response branched from, with no response under
	// the key: refused, nothing changed.
	if _, err := env.mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: idemConversationID("br2")}, orig[:3], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	before := env.tenantSnapshot(t)
	status, _, b = env.respondWith(t, map[string]string{"Idempotency-Key": "br2"}, `{"model":"m","input":"branch","previous_response_id":"`+ids[0]+`"}`)
	if status != http.StatusConflict {
		t.Errorf("a branch past its response: %d %s", status, b)
	}
	if after := env.tenantSnapshot(t); after != before {
		t.Errorf("the refused branch changed the store")
	}
}

// TestResponsesConcurrentDuplicateStream: of two streamed attempts with
// the same Idempotency-Key that both call the upstream, the one that
// stores second ends its stream with an error event telling the client
// to retry, not a response.completed of the other's response; the retry
// replays the stored one.
func TestResponsesConcurrentDuplicateStream(t *testing.T) {
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	env, arrived := newGatedResponsesEnv(t, func(n int) {
		if n <= 2 {
			<-release[n-1]
		}
	})
	h := map[string]string{"Idempotency-Key": "dup"}
	body := `{"model":"m","input":"hi","stream":true}`
	type answer struct {
		status int
		body   []byte
	}
	a, b := make(chan answer, 1), make(chan answer, 1)
	go func() { s, _, r := env.respondWith(t, h, body); a <- answer{s, r} }()
	<-arrived
	go func() { s, _, r := env.respondWith(t, h, body); b <- answer{s, r} }()
	<-arrived
	close(release[0])
	ra := <-a
	close(release[1])
	rb := <-b
	if ra.status != http.StatusOK || !strings.Contains(string(ra.body), "event: response.completed\n") {
		t.Fatalf("A: %d %s", ra.status, ra.body)
	}
	first := completedOf(t, ra.body)
	if strings.Contains(string(rb.body), "event: response.completed\n") || !strings.Contains(string(rb.body), "event: error\n") {
		t.Fatalf("B, second to store, ended with %s", rb.body)
	}
	i := strings.Index(string(rb.body), "event: error\ndata: ")
	line, _, _ := strings.Cut(string(rb.body[i+len("event: error\ndata: "):]), "\n")
	var ev map[string]any
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["type"] != "error" || ev["code"] == "" || !strings.Contains(ev["message"].(string), "retry") {
		t.Errorf("error event %s", line)
	}
	status, hdr, again := env.respondWith(t, h, body)
	if status != http.StatusOK || hdr.Get("Idempotent-Replayed") != "true" || completedOf(t, again).ID != first.ID {
		t.Errorf("retry: %d %v %s", status, hdr, again)
	}
	if got := env.stored(t, idemConversationID("dup")); len(got) != 2 {
		t.Errorf("the conversation holds %d messages, want 2", len(got))
	}
}

// eventsOf are a stream's events: their types, a run of one type as one,
// and the items of response.output_item.added.
func eventsOf(t *testing.T, stream []byte) (types []string, added []map[string]any) {
	t.Helper()
	for _, line := range strings.Split(string(stream), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string         `json:"type"`
			Item map[string]any `json:"item"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if n := len(types); n == 0 || types[n-1] != ev.Type {
			types = append(types, ev.Type)
		}
		if ev.Type == "response.output_item.added" {
			added = append(added, ev.Item)
		}
	}
	return types, added
}

// TestResponsesReplayedStreamEvents: a replayed stream sends the events
// the live one sent, in order, its items added in progress and empty.
func TestResponsesReplayedStreamEvents(t *testing.T) {
	env := newResponsesEnv(t)
	for i, in := range []string{"hi", "weather in Paris?"} {
		h := map[string]string{"Idempotency-Key": "events-" + strconv.Itoa(i)}
		body := `{"model":"m","input":"` + in + `","stream":true}`
		_, _, live := env.respondWith(t, h, body)
		_, hdr, replay := env.respondWith(t, h, body)
		if hdr.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: not replayed: %s", in, replay)
		}
		lt, la := eventsOf(t, live)
		rt, ra := eventsOf(t, replay)
		if !slices.Equal(lt, rt) {
			t.Errorf("%s: replayed events\n%q\nlive\n%q", in, rt, lt)
		}
		l, _ := json.Marshal(la)
		r, _ := json.Marshal(ra)
		if len(ra) == 0 || string(l) != string(r) {
			t.Errorf("%s: replayed items added\n%s\nlive\n%s", in, r, l)
		}
		for _, it := range ra {
			if it["status"] != "in_progress" || it["type"] == "message" && len(it["content"].([]any)) != 0 || it["type"] == "function_call" && it["arguments"] != "" {
				t.Errorf("%s: replayed item added %v", in, it)
			}
		}
	}
}

// writesStore is a memstore that counts the appends that stored
// something, taken back later or not.
type writesStore struct {
	*memstore.Store
	writes atomic.Int64
}

func (s *writesStore) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	res, err := s.Store.Append(ctx, key, msgs, opts)
	if err == nil && !res.Replayed {
		s.writes.Add(1)
	}
	return res, err
}

func (s *writesStore) AppendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	res, tail, err := s.Store.AppendTail(ctx, key, msgs, opts, q)
	if err == nil && !res.Replayed {
		s.writes.Add(1)
	}
	return res, tail, err
}

// TestResponsesBranchBadPolicy: a branch refused for its headers stores
// nothing, not even for a moment the history it would copy.
func TestResponsesBranchBadPolicy(t *testing.T) {
	store := &writesStore{Store: memstore.New()}
	env := newResponsesEnvOn(t, store)
	var ids []string
	for i := range 2 {
		body := `{"model":"m","input":"step"}`
		if i > 0 {
			body = `{"model":"m","input":"step","previous_response_id":"` + ids[0] + `"}`
		}
		status, b := env.do(t, "POST", "/responses", body)
		var r responseObject
		if err := json.Unmarshal(b, &r); status != http.StatusOK || err != nil {
			t.Fatalf("%d %s", status, b)
		}
		ids = append(ids, r.ID)
	}
	before, writes := env.tenantSnapshot(t), store.writes.Load()
	for _, key := range []string{"", "bad-policy"} {
		h := map[string]string{"X-Chatmem-Policy": "no-such-policy"}
		if key != "" {
			h["Idempotency-Key"] = key
		}
		status, _, b := env.respondWith(t, h, `{"model":"m","input":"branch","previous_response_id":"`+ids[0]+`"}`)
		if status != http.StatusBadRequest {
			t.Errorf("key %q: %d %s", key, status, b)
		}
	}
	if after := env.tenantSnapshot(t); after != before {
		t.Errorf("a refused branch changed the store:\n%s\nwas\n%s", after, before)
	}
	if n := store.writes.Load() - writes; n != 0 {
		t.Errorf("refused branches stored something %d times", n)
	}
}
