package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/seed"
)

// TestEndToEnd drives the API through the Client, against a real loopback
// server, over every store.
func TestEndToEnd(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t)
			ts := newTestServer(t, newMemory(t, store, nil), Options{Limits: testLimits})
			t.Run("Seed", func(t *testing.T) { testSeed(t, ts) })
			t.Run("ConflictAndIdempotency", func(t *testing.T) { testConflictAndIdempotency(t, ts) })
			t.Run("Tenancy", func(t *testing.T) { testTenancy(t, ts) })
			t.Run("Paging", func(t *testing.T) { testPaging(t, ts) })
			t.Run("ToolCalls", func(t *testing.T) { testToolCalls(t, ts) })
			t.Run("TTL", func(t *testing.T) { testTTL(t, ts) })
			t.Run("ConcurrentAppends", func(t *testing.T) { testConcurrentAppends(t, ts) })
			t.Run("Facts", func(t *testing.T) {
				if _, ok := store.(chatmem.FactStore); !ok {
					t.Skipf("%T keeps no facts", store)
				}
				testFacts(t, ts)
			})
			t.Run("BadRequests", func(t *testing.T) { testBadRequests(t, ts) })
			t.Run("Delete", func(t *testing.T) { testDelete(t, ts) })
		})
	}
}

// testSeed appends the seed's conversation and reads the seed's windows.
func testSeed(t *testing.T, ts *testServer) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	res, err := c.Append(ctx, "seed", seed.History(), client.AppendOptions{Tokenizer: "estimate"})
	must(t, "Append(seed)", err)
	if res.Replayed {
		t.Error("Append(seed).Replayed = true, want false")
	}
	if len(res.Messages) != 5 {
		t.Fatalf("Append(seed) = %d messages, want 5", len(res.Messages))
	}
	for i, m := range res.Messages {
		if m.Seq != int64(i+1) || m.Tokens == 0 || m.CreatedAt.IsZero() || m.Content != seed.History()[i].Content {
			t.Errorf("message %d = seq %d tokens %d created_at %v content %q; want seq %d, tokens and created_at set, content kept",
				i, m.Seq, m.Tokens, m.CreatedAt, m.Content, i+1)
		}
	}
	conv := res.Conversation
	if conv.ID != "seed" || conv.LastSeq != 5 || conv.Tokens != 63 || conv.Turns != 3 || conv.Tokenizer != "estimate" {
		t.Errorf("Append(seed).Conversation = id %q %s; want seed, last_seq=5 tokens=63 turns=3 tokenizer=estimate", conv.ID, describe(conv))
	}

	for _, tc := range []struct{ budget, msgs, tokens, dropped int }{{100, 5, 63, 0}, {40, 3, 36, 2}, {25, 1, 9, 4}} {
		w, err := c.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: tc.budget})
		must(t, fmt.Sprintf("Context(budget=%d)", tc.budget), err)
		if len(w.Messages) != tc.msgs || w.Tokens != tc.tokens || w.Dropped != tc.dropped {
			t.Errorf("Context(budget=%d) = %d msgs, %d tokens, %d dropped; want %d, %d, %d",
				tc.budget, len(w.Messages), w.Tokens, w.Dropped, tc.msgs, tc.tokens, tc.dropped)
		}
		if w.Parts.Recent != tc.tokens {
			t.Errorf("Context(budget=%d).Parts.Recent = %d, want %d", tc.budget, w.Parts.Recent, tc.tokens)
		}
	}
	w, err := c.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40})
	must(t, "Context(budget=40)", err)
	if got := w.Messages[0].Content; got != "Ok. Also, do you have running socks?" {
		t.Errorf("Context(budget=40) first message = %q", got)
	}
	w, err = c.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyLastTurns, Turns: 1})
	must(t, "Context(last_turns=1)", err)
	if len(w.Messages) != 1 || w.Messages[0].Seq != 5 {
		t.Errorf("Context(last_turns=1) = %d messages, want the last one", len(w.Messages))
	}
	w, err = c.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyAll})
	must(t, "Context(all)", err)
	if len(w.Messages) != 5 || w.Tokens != 63 {
		t.Errorf("Context(all) = %d msgs %d tokens, want 5, 63", len(w.Messages), w.Tokens)
	}
	w, err = c.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40, Tokenizer: "o200k_base"})
	must(t, "Context(budget=40, tokenizer=o200k_base)", err)
	if len(w.Messages) == 0 || w.Parts.Overhead == 0 {
		t.Errorf("Context(tokenizer=o200k_base) = %d msgs, overhead %d; want a window counted with o200k framing", len(w.Messages), w.Parts.Overhead)
	}

	// The budget is smaller than the newest user message: 422.
	_, err = c.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 3})
	wantAPIError(t, "Context(budget=3)", err, http.StatusUnprocessableEntity, "budget_too_small")
	if !errors.Is(err, chatmem.ErrBudgetTooSmall) {
		t.Errorf("Context(budget=3) error %v is not ErrBudgetTooSmall", err)
	}

	// facts is [] (not null) and summary null, as JSON.
	r := ts.raw(t, "GET", "/v1/conversations/seed/context?policy=token_budget&budget=40", acmeKey, nil, "")
	if r.status != http.StatusOK || !containsAll(string(r.body), `"facts":[]`, `"summary":null`, `"parts":{`, `"tokens":36`) {
		t.Errorf("GET context raw = %d %s; want facts [] and summary null", r.status, r.body)
	}

	got, err := c.Conversation(ctx, "seed")
	must(t, "Conversation(seed)", err)
	if got.ID != "seed" || got.LastSeq != 5 || got.CreatedAt.IsZero() || got.UpdatedAt.IsZero() {
		t.Errorf("Conversation(seed) = %q %s", got.ID, describe(got))
	}
	// No summary is written without a summarizer.
	_, err = c.Summary(ctx, "seed")
	wantAPIError(t, "Summary(seed)", err, http.StatusNotFound, "not_found")
}

// testConflictAndIdempotency checks If-Match and Idempotency-Key.
func testConflictAndIdempotency(t *testing.T, ts *testServer) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	id := "occ"
	msg := func(s string) []chatmem.Message { return []chatmem.Message{{Role: chatmem.RoleUser, Content: s}} }

	// If-Match 0 creates; a second If-Match 0 conflicts.
	_, err := c.Append(ctx, id, msg("first"), client.AppendOptions{IfMatch: ptr(int64(0))})
	must(t, "Append(If-Match 0)", err)
	_, err = c.Append(ctx, id, msg("again"), client.AppendOptions{IfMatch: ptr(int64(0))})
	wantAPIError(t, "Append(stale If-Match 0)", err, http.StatusConflict, "conflict")
	if !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("stale If-Match error %v is not ErrConflict", err)
	}
	if e := new(Error); errors.As(err, &e) && e.RequestID == "" {
		t.Error("error has no request ID")
	}

	res, err := c.Append(ctx, id, msg("second"), client.AppendOptions{IfMatch: ptr(int64(1)), IdempotencyKey: "req-42"})
	must(t, "Append(If-Match 1, key)", err)
	if res.Replayed || len(res.Messages) != 1 || res.Messages[0].Seq != 2 {
		t.Fatalf("Append(If-Match 1) = replayed %v, %d messages; want a fresh seq 2", res.Replayed, len(res.Messages))
	}
	// The retry (even with its now stale If-Match) replays: same seqs,
	// nothing added.
	for i := range 2 {
		again, err := c.Append(ctx, id, msg("second"), client.AppendOptions{IfMatch: ptr(int64(1)), IdempotencyKey: "req-42"})
		must(t, "Append(retry)", err)
		if !again.Replayed || len(again.Messages) != 1 || again.Messages[0].Seq != 2 || again.Messages[0].Content != "second" {
			t.Errorf("retry %d = replayed %v, %v; want the original seq 2 replayed", i, again.Replayed, again.Messages)
		}
	}
	r := ts.raw(t, "POST", "/v1/conversations/occ/messages", acmeKey, map[string]string{"Idempotency-Key": "req-42"}, `{"messages":[{"role":"user","content":"second"}]}`)
	if r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("raw retry = %d, Idempotent-Replayed %q; want 200 true", r.status, r.header.Get("Idempotent-Replayed"))
	}
	// The key with another body names another request: refused.
	_, err = c.Append(ctx, id, msg("second, edited"), client.AppendOptions{IdempotencyKey: "req-42"})
	wantAPIError(t, "Append(req-42 with another body)", err, http.StatusUnprocessableEntity, "idempotency_key_reused")
	if !errors.Is(err, chatmem.ErrIdempotencyKeyReused) {
		t.Errorf("reused key error %v is not ErrIdempotencyKeyReused", err)
	}
	conv, err := c.Conversation(ctx, id)
	must(t, "Conversation", err)
	if conv.LastSeq != 2 {
		t.Errorf("after retries last_seq = %d, want 2", conv.LastSeq)
	}

	// If-Match accepts the ETag form and the bare number.
	for i, v := range []string{`"2"`, `3`} {
		r := ts.raw(t, "POST", "/v1/conversations/occ/messages", acmeKey, map[string]string{"If-Match": v}, `{"messages":[{"role":"user","content":"more"}]}`)
		if want := fmt.Sprintf(`"%d"`, 3+i); r.status != http.StatusCreated || r.header.Get("ETag") != want {
			t.Errorf("If-Match %s = %d, ETag %q; want 201, %s: %s", v, r.status, r.header.Get("ETag"), want, r.body)
		}
	}
}

// testTenancy checks that a second tenant sees nothing of the first's.
func testTenancy(t *testing.T, ts *testServer) {
	ctx := t.Context()
	acme, globex := ts.client(acmeKey), ts.client(globexKey)
	_, err := acme.Conversation(ctx, "seed")
	must(t, "acme Conversation(seed)", err)

	_, err = globex.Conversation(ctx, "seed")
	wantAPIError(t, "globex Conversation(seed)", err, http.StatusNotFound, "not_found")
	if !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("globex Conversation(seed) error %v is not ErrNotFound", err)
	}
	_, err = globex.Messages(ctx, "seed", 0, 0)
	wantAPIError(t, "globex Messages(seed)", err, http.StatusNotFound, "not_found")
	_, err = globex.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40})
	wantAPIError(t, "globex Context(seed)", err, http.StatusNotFound, "not_found")
	wantAPIError(t, "globex Delete(seed)", globex.Delete(ctx, "seed"), http.StatusNotFound, "not_found")
	page, err := globex.List(ctx, "", 0)
	must(t, "globex List", err)
	if len(page.Conversations) != 0 || page.Next != "" {
		t.Errorf("globex List = %v, want empty", page)
	}

	// globex's own "seed" is another conversation; acme's is untouched.
	res, err := globex.Append(ctx, "seed", []chatmem.Message{{Role: chatmem.RoleUser, Content: "globex here"}}, client.AppendOptions{})
	must(t, "globex Append(seed)", err)
	if res.Messages[0].Seq != 1 {
		t.Errorf("globex Append(seed) seq = %d, want 1 (a conversation of its own)", res.Messages[0].Seq)
	}
	conv, err := acme.Conversation(ctx, "seed")
	must(t, "acme Conversation(seed)", err)
	if conv.LastSeq != 5 {
		t.Errorf("acme seed last_seq = %d after globex's append, want 5", conv.LastSeq)
	}
	page, err = globex.List(ctx, "", 0)
	must(t, "globex List", err)
	if len(page.Conversations) != 1 || page.Conversations[0].ID != "seed" || page.Conversations[0].LastSeq != 1 {
		t.Errorf("globex List = %+v, want its own seed only", page.Conversations)
	}
	must(t, "globex Delete(seed)", globex.Delete(ctx, "seed"))
	if _, err := acme.Conversation(ctx, "seed"); err != nil {
		t.Errorf("acme Conversation(seed) after globex deleted its own: %v", err)
	}
}

// testPaging pages through messages and conversations.
func testPaging(t *testing.T, ts *testServer) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	var seqs []int64
	var after int64
	for range 10 {
		page, err := c.Messages(ctx, "seed", after, 2)
		must(t, "Messages", err)
		for _, m := range page.Messages {
			seqs = append(seqs, m.Seq)
		}
		if page.NextAfter == nil {
			break
		}
		after = *page.NextAfter
	}
	if !slices.Equal(seqs, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("paged seqs = %v, want 1..5", seqs)
	}
	page, err := c.Messages(ctx, "seed", 3, 0)
	must(t, "Messages(after 3)", err)
	if len(page.Messages) != 2 || page.Messages[0].Seq != 4 || page.NextAfter != nil {
		t.Errorf("Messages(after 3) = %d messages, next %v; want seqs 4, 5 and no next", len(page.Messages), page.NextAfter)
	}
	page, err = c.Messages(ctx, "seed", 5, 0)
	must(t, "Messages(after 5)", err)
	if page.Messages == nil || len(page.Messages) != 0 {
		t.Errorf("Messages(after 5) = %v, want []", page.Messages)
	}

	for _, id := range []string{"page-a", "page-b", "page-c"} {
		_, err := c.Append(ctx, id, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi"}}, client.AppendOptions{})
		must(t, "Append("+id+")", err)
	}
	var ids []string
	cursor := ""
	for range 20 {
		p, err := c.List(ctx, cursor, 2)
		must(t, "List", err)
		for _, conv := range p.Conversations {
			ids = append(ids, conv.ID)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if !slices.IsSorted(ids) || !containsAllStrings(ids, "occ", "page-a", "page-b", "page-c", "seed") {
		t.Errorf("listed ids = %v, want sorted, with occ, page-*, seed", ids)
	}
}

// testToolCalls appends a tool-call unit in two requests: the results
// answer a call stored by the first.
func testToolCalls(t *testing.T, ts *testServer) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	call := chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{
		{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "track", Arguments: `{"order":"SE-10423"}`}},
	}}
	_, err := c.Append(ctx, "tools", []chatmem.Message{{Role: chatmem.RoleUser, Content: "Where is SE-10423?"}, call}, client.AppendOptions{})
	must(t, "Append(user, call)", err)
	_, err = c.Append(ctx, "tools", []chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "call_2", Content: "??"}}, client.AppendOptions{})
	wantAPIError(t, "Append(result of an unknown call)", err, http.StatusBadRequest, "invalid_request")
	res, err := c.Append(ctx, "tools", []chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "call_1", Content: "out for delivery"}}, client.AppendOptions{})
	must(t, "Append(result)", err)
	if res.Messages[0].Seq != 3 {
		t.Errorf("result seq = %d, want 3", res.Messages[0].Seq)
	}
	w, err := c.Context(ctx, "tools", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 1000})
	must(t, "Context(tools)", err)
	if len(w.Messages) != 3 || len(w.Messages[1].ToolCalls) != 1 || w.Messages[1].ToolCalls[0].Function.Arguments != `{"order":"SE-10423"}` {
		t.Errorf("Context(tools) = %+v, want user, call (arguments kept), result", w.Messages)
	}
}

// testTTL checks that ttl_seconds sets the expiry.
func testTTL(t *testing.T, ts *testServer) {
	c := ts.client(acmeKey)
	before := time.Now()
	res, err := c.Append(t.Context(), "ttl", []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi"}}, client.AppendOptions{TTL: time.Hour})
	must(t, "Append(TTL 1h)", err)
	exp := res.Conversation.ExpiresAt
	if exp.Before(before.Add(59*time.Minute)) || exp.After(before.Add(61*time.Minute)) {
		t.Errorf("expires_at = %v, want about an hour after %v", exp, before)
	}
}

// testConcurrentAppends appends from many clients at once: every message
// lands, densely numbered.
func testConcurrentAppends(t *testing.T, ts *testServer) {
	ctx := t.Context()
	const writers, each = 6, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		c := ts.client(acmeKey)
		wg.Go(func() {
			for i := range each {
				_, err := c.Append(ctx, "busy", []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprintf("writer %d message %d", w, i)}}, client.AppendOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Append: %v", err)
	}
	page, err := ts.client(acmeKey).Messages(ctx, "busy", 0, 1000)
	must(t, "Messages(busy)", err)
	if len(page.Messages) != writers*each {
		t.Fatalf("busy has %d messages, want %d", len(page.Messages), writers*each)
	}
	for i, m := range page.Messages {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d: not dense", i, m.Seq)
		}
	}
}

// testFacts sets, replaces and deletes facts.
func testFacts(t *testing.T, ts *testServer) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	id := "seed"
	keys := func(fs []chatmem.Fact) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Key+"="+f.Value)
		}
		return out
	}
	facts, err := c.Facts(ctx, id)
	must(t, "Facts", err)
	if facts == nil || len(facts) != 0 {
		t.Errorf("Facts before any = %v, want []", facts)
	}
	facts, err = c.PatchFacts(ctx, id, []FactInput{{Key: "name", Value: "Kavya"}, {Key: "order_id", Value: "SE-10423", Confidence: 0.9, SourceSeq: 1}})
	must(t, "PatchFacts", err)
	if got := keys(facts); !slices.Equal(got, []string{"name=Kavya", "order_id=SE-10423"}) {
		t.Errorf("PatchFacts = %v", got)
	}
	for _, f := range facts {
		if f.SetBy != "app" || f.CreatedAt.IsZero() {
			t.Errorf("fact %s set_by %q created_at %v; want app, set", f.Key, f.SetBy, f.CreatedAt)
		}
		if f.Key == "name" && f.Confidence != 1 || f.Key == "order_id" && (f.Confidence != 0.9 || f.SourceSeq != 1) {
			t.Errorf("fact %s confidence %v source_seq %d", f.Key, f.Confidence, f.SourceSeq)
		}
	}
	facts, err = c.PatchFacts(ctx, id, []FactInput{{Key: "city", Value: "Pune"}})
	must(t, "PatchFacts(city)", err)
	if got := keys(facts); !slices.Equal(got, []string{"city=Pune", "name=Kavya", "order_id=SE-10423"}) {
		t.Errorf("PatchFacts(city) = %v; want the others kept", got)
	}

	w, err := c.Context(ctx, id, client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 100, Facts: true})
	must(t, "Context(facts=true)", err)
	if len(w.Facts) != 3 || w.Parts.Facts == 0 {
		t.Errorf("Context(facts=true) facts = %v, parts.facts %d; want 3 facts sent", keys(w.Facts), w.Parts.Facts)
	}

	facts, err = c.PutFacts(ctx, id, []FactInput{{Key: "name", Value: "Kavya R."}})
	must(t, "PutFacts", err)
	if got := keys(facts); !slices.Equal(got, []string{"name=Kavya R."}) {
		t.Errorf("PutFacts = %v; want only name", got)
	}
	_, err = c.PatchFacts(ctx, id, []FactInput{{Key: "Bad Key", Value: "x"}})
	wantAPIError(t, "PatchFacts(bad key)", err, http.StatusBadRequest, "invalid_request")
	_, err = c.PutFacts(ctx, id, []FactInput{{Key: "email", Value: "k@example.com"}, {Key: "x", Value: ""}})
	wantAPIError(t, "PutFacts(empty value)", err, http.StatusBadRequest, "invalid_request")
	if facts, _ := c.Facts(ctx, id); !slices.Equal(keys(facts), []string{"name=Kavya R."}) {
		t.Errorf("after refused PUT facts = %v; want unchanged", keys(facts))
	}

	must(t, "DeleteFact(name)", c.DeleteFact(ctx, id, "name"))
	err = c.DeleteFact(ctx, id, "name")
	wantAPIError(t, "DeleteFact(name) again", err, http.StatusNotFound, "not_found")
	if !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("DeleteFact(absent) error %v is not ErrNotFound", err)
	}
	_, err = c.PatchFacts(ctx, id, []FactInput{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}})
	must(t, "PatchFacts(a, b)", err)
	must(t, "DeleteFacts", c.DeleteFacts(ctx, id))
	if facts, err := c.Facts(ctx, id); err != nil || len(facts) != 0 {
		t.Errorf("Facts after DeleteFacts = %v, %v; want none", keys(facts), err)
	}
	facts, err = c.PutFacts(ctx, id, nil)
	must(t, "PutFacts(none)", err)
	if len(facts) != 0 {
		t.Errorf("PutFacts(none) = %v", keys(facts))
	}

	_, err = c.Facts(ctx, "no-such")
	wantAPIError(t, "Facts(no-such)", err, http.StatusNotFound, "not_found")
	_, err = c.PatchFacts(ctx, "no-such", []FactInput{{Key: "name", Value: "x"}})
	wantAPIError(t, "PatchFacts(no-such)", err, http.StatusNotFound, "not_found")
	_, err = ts.client(globexKey).PatchFacts(ctx, id, []FactInput{{Key: "name", Value: "x"}})
	wantAPIError(t, "globex PatchFacts(acme's)", err, http.StatusNotFound, "not_found")
}

// testDelete deletes a conversation: then it is gone.
func testDelete(t *testing.T, ts *testServer) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	must(t, "Delete(seed)", c.Delete(ctx, "seed"))
	_, err := c.Conversation(ctx, "seed")
	wantAPIError(t, "Conversation(deleted)", err, http.StatusNotFound, "not_found")
	_, err = c.Messages(ctx, "seed", 0, 0)
	wantAPIError(t, "Messages(deleted)", err, http.StatusNotFound, "not_found")
	_, err = c.Context(ctx, "seed", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40})
	wantAPIError(t, "Context(deleted)", err, http.StatusNotFound, "not_found")
	wantAPIError(t, "Delete(deleted)", c.Delete(ctx, "seed"), http.StatusNotFound, "not_found")
	page, err := c.List(ctx, "", 1000)
	must(t, "List", err)
	for _, conv := range page.Conversations {
		if conv.ID == "seed" {
			t.Error("List still shows the deleted conversation")
		}
	}
	// The ID may be used again, from seq 1.
	res, err := c.Append(ctx, "seed", seed.History()[:1], client.AppendOptions{})
	must(t, "Append(seed) after delete", err)
	if res.Messages[0].Seq != 1 {
		t.Errorf("Append after delete seq = %d, want 1", res.Messages[0].Seq)
	}
}

func containsAllStrings(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
