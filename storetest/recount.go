package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// recountTests lists the chatmem.Recounter subtests in the order
// testRecounts runs the chatmem.Recounter subtests when the store implements it.
var recountTests = []subtest{
	{"Double", testRecountDouble},
	{"Long", testRecountLong},
	{"Content", testRecountContent},
	{"Conflict", testRecountConflict},
	{"Invalid", testRecountInvalid},
	{"NotFound", testRecountNotFound},
	{"TenantIsolation", testRecountTenantIsolation},
	{"KeepsSummary", testRecountKeepsSummary},
	{"ConcurrentAppends", testRecountConcurrentAppends},
}

// testRecounts runs the chatmem.Recounter subtests if the harness's stores implement it.
var testRecounts = optional[chatmem.Recounter](recountTests)

// mustRecount recounts key and fails the test on an error.
func mustRecount(t *testing.T, s chatmem.Store, key chatmem.Key, tokenizer string, lastSeq int64, tokens []int) {
	t.Helper()
	if err := as[chatmem.Recounter](t, s).Recount(t.Context(), key, tokenizer, lastSeq, tokens); err != nil {
		t.Fatalf("Recount(%s, %q, %d, %d counts) error = %v, want nil", key, tokenizer, lastSeq, len(tokens), err)
	}
}

// snapshot is what a recount may change: the conversation's metadata and
// its messages with their counts.
type snapshot struct {
	conv chatmem.Conversation
	msgs []chatmem.Message
}

func takeSnapshot(t *testing.T, s chatmem.Store, key chatmem.Key) snapshot {
	t.Helper()
	return snapshot{conv: mustConversation(t, s, key), msgs: mustRange(t, s, key, 0, 0)}
}

// wantSnapshot fails the test unless key's conversation and messages are
// as in want, and its tails are those of want's counts.
func wantSnapshot(t *testing.T, what string, s chatmem.Store, key chatmem.Key, want snapshot) {
	t.Helper()
	wantConversation(t, what+": Conversation", mustConversation(t, s, key), want.conv)
	wantMessages(t, what+": Range", mustRange(t, s, key, 0, 0), want.msgs)
	wantTails(t, what, s, key, want.msgs)
}

// recounted returns deep copies of msgs with the counts tokens.
func recounted(msgs []chatmem.Message, tokens []int) []chatmem.Message {
	out := make([]chatmem.Message, len(msgs))
	for i, m := range msgs {
		m = m.Clone()
		m.Tokens = tokens[i]
		out[i] = m
	}
	return out
}

// totals returns the non-system and the system tokens of msgs.
func totals(msgs []chatmem.Message) (tokens, system int64) {
	for _, m := range msgs {
		if m.Role == chatmem.RoleSystem {
			system += int64(m.Tokens)
		} else {
			tokens += int64(m.Tokens)
		}
	}
	return tokens, system
}

// tailSeqs works out what Tail{Tokens: budget} selects from all of a
// conversation's messages: the longest run of newest messages whose
// non-system tokens sum to at most budget.
func tailSeqs(msgs []chatmem.Message, budget int) []int64 {
	if budget <= 0 {
		return nil
	}
	start, sum := len(msgs), 0
	for start > 0 {
		cost := msgs[start-1].Tokens
		if msgs[start-1].Role == chatmem.RoleSystem {
			cost = 0
		}
		if sum+cost > budget {
			break
		}
		sum += cost
		start--
	}
	return seqs(msgs[start:])
}

// wantTails fails the test unless Tail by tokens selects what msgs' counts
// select, at the boundaries: for each run of newest messages (at most 40
// of them, evenly spread), a budget of exactly its tokens and one less.
func wantTails(t *testing.T, what string, s chatmem.Store, key chatmem.Key, msgs []chatmem.Message) {
	t.Helper()
	var bounds []int // the tokens of the runs of newest messages, growing
	sum := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != chatmem.RoleSystem && msgs[i].Tokens > 0 {
			sum += msgs[i].Tokens
			bounds = append(bounds, sum)
		}
	}
	step := max(len(bounds)/40, 1)
	budgets := []int{1, sum + 1}
	for i := 0; i < len(bounds); i += step {
		budgets = append(budgets, bounds[i]-1, bounds[i])
	}
	for _, b := range budgets {
		got := mustTail(t, s, key, chatmem.TailQuery{Tokens: b})
		wantSeqs(t, fmt.Sprintf("%s: Tail(Tokens=%d)", what, b), got, tailSeqs(msgs, b)...)
		for _, m := range got {
			if m.Seq >= 1 && m.Seq <= int64(len(msgs)) && m.Tokens != msgs[m.Seq-1].Tokens {
				t.Errorf("%s: Tail(Tokens=%d) seq %d has %d tokens, want %d", what, b, m.Seq, m.Tokens, msgs[m.Seq-1].Tokens)
				break
			}
		}
	}
	// Turns do not depend on counts: the newest user message onwards.
	var want []int64
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == chatmem.RoleUser {
			want = span(msgs[i].Seq, int64(len(msgs)))
			break
		}
	}
	if want == nil {
		want = span(1, int64(len(msgs)))
	}
	wantSeqs(t, what+": Tail(Turns=1)", mustTail(t, s, key, chatmem.TailQuery{Turns: 1}), want...)
}

// testRecountDouble recounts the tail fixture with every count doubled:
// the messages, the totals and the tokenizer change, nothing else does, a
// second store sees the same, Tail by tokens selects by the new counts with
// exact boundaries, and appends afterwards continue the new totals.
func testRecountDouble(t *testing.T, h Harness) {
	s := h.New(t)
	key := tailFixture(t, s)
	before := takeSnapshot(t, s, key)
	if before.conv.Tokens != 70 || before.conv.SystemTokens != 150 {
		t.Fatalf("fixture Conversation = %+v, want Tokens 70, SystemTokens 150", before.conv)
	}
	doubled := make([]int, len(before.msgs))
	for i, m := range before.msgs {
		doubled[i] = 2 * m.Tokens
	}
	mustRecount(t, s, key, "double", 8, doubled)

	want := snapshot{conv: before.conv, msgs: recounted(before.msgs, doubled)}
	want.conv.Tokenizer, want.conv.Tokens, want.conv.SystemTokens = "double", 140, 300
	wantSnapshot(t, "after Recount(double)", s, key, want)
	wantSnapshot(t, "after Recount(double), second store", h.reopen(t, s), key, want)
	// The fixture's boundaries, doubled: 24 takes the newest message (12
	// before), 23 nothing.
	wantFixture(t, "Tail(Tokens=23)", mustTail(t, s, key, chatmem.TailQuery{Tokens: 23}))
	wantFixture(t, "Tail(Tokens=24)", mustTail(t, s, key, chatmem.TailQuery{Tokens: 24}), 8)
	wantFixture(t, "Tail(Tokens=70)", mustTail(t, s, key, chatmem.TailQuery{Tokens: 70}), span(5, 8)...)
	wantFixture(t, "Tail(Tokens=79)", mustTail(t, s, key, chatmem.TailQuery{Tokens: 79}), span(5, 8)...)
	wantFixture(t, "Tail(Tokens=80)", mustTail(t, s, key, chatmem.TailQuery{Tokens: 80}), span(4, 8)...)
	if sys, err := s.System(t.Context(), key); err != nil {
		t.Errorf("System(%s) error = %v", key, err)
	} else {
		wantMessages(t, "System after Recount", sys, []chatmem.Message{want.msgs[0], want.msgs[4]})
	}

	// Appends continue from the new totals.
	later := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "m9", 7), msg(chatmem.RoleSystem, "m10", 3)},
		chatmem.AppendOptions{Tokenizer: "other", Now: later})
	want.msgs = append(want.msgs, res.Messages...)
	want.conv.LastSeq, want.conv.Tokens, want.conv.SystemTokens, want.conv.Turns = 10, 147, 303, 4
	want.conv.UpdatedAt = res.Conversation.UpdatedAt
	wantConversation(t, "Append after Recount: Conversation", res.Conversation, want.conv)
	wantSnapshot(t, "Append after Recount", s, key, want)

	// Back to the first counts: as before, but for the append.
	orig := make([]int, len(want.msgs))
	for i, m := range want.msgs {
		orig[i] = m.Tokens
	}
	for i := range 8 {
		orig[i] /= 2
	}
	mustRecount(t, s, key, "estimate", 10, orig)
	want.msgs = recounted(want.msgs, orig)
	want.conv.Tokenizer, want.conv.Tokens, want.conv.SystemTokens = "estimate", 77, 153
	wantSnapshot(t, "after Recount(estimate)", s, key, want)
}

// testRecountLong recounts a conversation of 2500 messages, appended in
// batches, with uneven counts (zeros among them) and system messages
// throughout: enough to cross any batching a store does.
func testRecountLong(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("long")
	const n = 2500
	var batch []chatmem.Message
	for seq := 1; seq <= n; seq++ {
		role := chatmem.RoleUser
		switch {
		case seq%7 == 0:
			role = chatmem.RoleSystem
		case seq%2 == 0:
			role = chatmem.RoleAssistant
		}
		batch = append(batch, msg(role, fmt.Sprintf("m%d", seq), 20))
		if len(batch) == 1000 || seq == n {
			mustAppend(t, s, key, batch, chatmem.AppendOptions{Tokenizer: "estimate"})
			batch = nil
		}
	}
	before := takeSnapshot(t, s, key)
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = (i * 7) % 13 // 0..12
	}
	mustRecount(t, s, key, "uneven", n, tokens)
	want := snapshot{conv: before.conv, msgs: recounted(before.msgs, tokens)}
	want.conv.Tokenizer = "uneven"
	want.conv.Tokens, want.conv.SystemTokens = totals(want.msgs)
	wantSnapshot(t, "after Recount", s, key, want)
}

// testRecountContent recounts messages whose content, tool calls and
// metadata look like counts, and checks that only the counts changed.
func testRecountContent(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("content")
	call := chatmem.ToolCall{ID: `"tokens":1`, Type: "function", Function: chatmem.FunctionCall{Name: "tokens", Arguments: `{"tokens":3,"x":"\"tokens\":4"}`}}
	msgs := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: `"tokens":5 {"seq":1,"role":"user","tokens":6}`, Tokens: 1},
		{Role: chatmem.RoleUser, Content: "\"tokens\":7 \\\"tokens\\\": 8", Name: `"tokens":9`, Tokens: 2,
			Metadata: map[string]string{`"tokens":10`: `"tokens":11`, "tokens": "12"}},
		{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{call}, Tokens: 3},
		{Role: chatmem.RoleTool, ToolCallID: `"tokens":1`, Content: "héllo \u0000 \x00 ✓ \n", Tokens: 4},
	}
	mustAppend(t, s, key, msgs, chatmem.AppendOptions{Tokenizer: "estimate"})
	before := takeSnapshot(t, s, key)
	tokens := []int{100, 200, 300, 400}
	mustRecount(t, s, key, "other", 4, tokens)
	want := snapshot{conv: before.conv, msgs: recounted(before.msgs, tokens)}
	want.conv.Tokenizer, want.conv.Tokens, want.conv.SystemTokens = "other", 900, 100
	wantSnapshot(t, "after Recount", s, key, want)
	if sys, err := s.System(t.Context(), key); err != nil {
		t.Errorf("System(%s) error = %v", key, err)
	} else {
		wantMessages(t, "System after Recount", sys, want.msgs[:1])
	}
}

// testRecountConflict checks that a recount for another LastSeq than the
// conversation's fails with ErrConflict and changes nothing.
func testRecountConflict(t *testing.T, h Harness) {
	s := h.New(t)
	key := tailFixture(t, s)
	before := takeSnapshot(t, s, key)
	rc := as[chatmem.Recounter](t, s)
	for _, last := range []int64{7, 9, 1} {
		tokens := make([]int, last)
		for i := range tokens {
			tokens[i] = 3
		}
		err := rc.Recount(t.Context(), key, "other", last, tokens)
		wantErr(t, fmt.Sprintf("Recount(lastSeq=%d) of a conversation at 8", last), err, chatmem.ErrConflict)
	}
	wantSnapshot(t, "after conflicting recounts", s, key, before)
}

// testRecountInvalid checks that bad arguments wrap ErrInvalid and change
// nothing.
func testRecountInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	key := tailFixture(t, s)
	before := takeSnapshot(t, s, key)
	rc := as[chatmem.Recounter](t, s)
	good := []int{1, 2, 3, 4, 5, 6, 7, 8}
	for _, c := range []struct {
		name      string
		key       chatmem.Key
		tokenizer string
		last      int64
		tokens    []int
	}{
		{"too few counts", key, "other", 8, good[:7]},
		{"too many counts", key, "other", 8, append(good, 9)},
		{"no counts", key, "other", 8, nil},
		{"negative count", key, "other", 8, []int{1, 2, 3, -4, 5, 6, 7, 8}},
		{"negative last seq", key, "other", -1, nil},
		{"no tokenizer", key, "", 8, good},
		{"bad key", chatmem.Key{Tenant: key.Tenant, ID: "a/b"}, "other", 8, good},
		{"bad tenant", chatmem.Key{Tenant: "", ID: key.ID}, "other", 8, good},
	} {
		err := rc.Recount(t.Context(), c.key, c.tokenizer, c.last, c.tokens)
		wantErr(t, "Recount with "+c.name, err, chatmem.ErrInvalid)
	}
	wantSnapshot(t, "after invalid recounts", s, key, before)
}

// testRecountNotFound checks ErrNotFound for a conversation that never
// existed, was deleted or has expired.
func testRecountNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	rc := as[chatmem.Recounter](t, s)
	ctx := t.Context()
	tenant := randomTenant()
	one := []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}

	missing := chatmem.Key{Tenant: tenant, ID: "missing"}
	wantErr(t, "Recount of a missing conversation", rc.Recount(ctx, missing, "other", 1, []int{2}), chatmem.ErrNotFound)

	deleted := chatmem.Key{Tenant: tenant, ID: "deleted"}
	mustAppend(t, s, deleted, one, chatmem.AppendOptions{})
	if err := s.Delete(ctx, deleted); err != nil {
		t.Fatalf("Delete(%s) error = %v", deleted, err)
	}
	wantErr(t, "Recount of a deleted conversation", rc.Recount(ctx, deleted, "other", 1, []int{2}), chatmem.ErrNotFound)
	wantNotFound(t, s, deleted)

	expired := chatmem.Key{Tenant: tenant, ID: "expired"}
	res := mustAppend(t, s, expired, one, chatmem.AppendOptions{TTL: 100 * time.Millisecond})
	time.Sleep(time.Until(res.Conversation.ExpiresAt) + 50*time.Millisecond)
	wantErr(t, "Recount of an expired conversation", rc.Recount(ctx, expired, "other", 1, []int{2}), chatmem.ErrNotFound)
	wantNotFound(t, s, expired)
}

// testRecountTenantIsolation checks that a recount reaches only its own
// tenant's conversation.
func testRecountTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	a := chatmem.Key{Tenant: randomTenant(), ID: "shared"}
	b := chatmem.Key{Tenant: randomTenant(), ID: "shared"}
	mustAppend(t, s, a, []chatmem.Message{msg(chatmem.RoleUser, "a1", 1), msg(chatmem.RoleAssistant, "a2", 1)}, chatmem.AppendOptions{Tokenizer: "estimate"})
	mustAppend(t, s, b, []chatmem.Message{msg(chatmem.RoleSystem, "b1", 1), msg(chatmem.RoleUser, "b2", 1)}, chatmem.AppendOptions{Tokenizer: "estimate"})
	beforeA, beforeB := takeSnapshot(t, s, a), takeSnapshot(t, s, b)

	mustRecount(t, s, a, "other", 2, []int{5, 6})
	want := snapshot{conv: beforeA.conv, msgs: recounted(beforeA.msgs, []int{5, 6})}
	want.conv.Tokenizer, want.conv.Tokens = "other", 11
	wantSnapshot(t, "tenant A after its recount", s, a, want)
	wantSnapshot(t, "tenant B after A's recount", s, b, beforeB)

	aOnly := chatmem.Key{Tenant: a.Tenant, ID: "a-only"}
	mustAppend(t, s, aOnly, []chatmem.Message{msg(chatmem.RoleUser, "x", 1)}, chatmem.AppendOptions{})
	bOnly := chatmem.Key{Tenant: b.Tenant, ID: aOnly.ID}
	err := as[chatmem.Recounter](t, s).Recount(t.Context(), bOnly, "other", 1, []int{9})
	wantErr(t, fmt.Sprintf("Recount(%s) of tenant A's ID", bOnly), err, chatmem.ErrNotFound)
	if got := mustConversation(t, s, aOnly); got.Tokens != 1 || got.Tokenizer != "" {
		t.Errorf("Conversation(%s) after tenant B's recount = Tokens %d, Tokenizer %q; want 1, \"\"", aOnly, got.Tokens, got.Tokenizer)
	}
}

// testRecountKeepsSummary checks that a recount leaves the stored summary
// as it was, its Tokens included.
func testRecountKeepsSummary(t *testing.T, h Harness) {
	s := h.New(t)
	ss, ok := s.(chatmem.SummaryStore)
	if !ok {
		t.Skip("store does not implement SummaryStore")
	}
	key := tailFixture(t, s)
	sum := chatmem.Summary{Text: "they talked", CoversSeq: 4, Tokens: 6, Summarizer: "test", CreatedAt: time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)}
	if err := ss.PutSummary(t.Context(), key, sum, 0); err != nil {
		t.Fatalf("PutSummary error = %v", err)
	}
	mustRecount(t, s, key, "double", 8, []int{2, 2, 2, 2, 2, 2, 2, 2})
	wantSummary(t, "after Recount", ss, key, sum)
}

// testRecountConcurrentAppends recounts while another client appends: each
// recount either lands or fails with ErrConflict, and whatever the
// interleaving the totals and tails agree with the stored counts.
func testRecountConcurrentAppends(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.reopen(t, s)
	ctx := t.Context()
	key := randomKey("busy")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleSystem, "sys", 4), msg(chatmem.RoleUser, "u0", 5)}, chatmem.AppendOptions{Tokenizer: "estimate"})

	wait := appendConcurrently(ctx, s2, key, 40)
	landed, conflicts := 0, 0
	recount := func() error {
		msgs := mustRange(t, s, key, 0, 0)
		tokens := make([]int, len(msgs))
		for i := range tokens {
			tokens[i] = 3
		}
		return as[chatmem.Recounter](t, s).Recount(ctx, key, "three", int64(len(msgs)), tokens)
	}
	for range 20 {
		switch err := recount(); {
		case err == nil:
			landed++
		case errors.Is(err, chatmem.ErrConflict):
			conflicts++
		default:
			t.Fatalf("Recount during appends error = %v, want nil or ErrConflict", err)
		}
	}
	if err := wait(); err != nil {
		t.Fatalf("Append during recounts error = %v", err)
	}
	t.Logf("%d recounts landed, %d conflicted", landed, conflicts)

	// Whatever landed, the stored counts and the totals agree.
	msgs := mustRange(t, s, key, 0, 0)
	conv := mustConversation(t, s, key)
	if tokens, system := totals(msgs); conv.Tokens != tokens || conv.SystemTokens != system || conv.LastSeq != int64(len(msgs)) {
		t.Errorf("Conversation = Tokens %d, SystemTokens %d, LastSeq %d; messages hold %d, %d, %d", conv.Tokens, conv.SystemTokens, conv.LastSeq, tokens, system, len(msgs))
	}
	wantTails(t, "after concurrent recounts", s, key, msgs)

	if err := recount(); err != nil {
		t.Fatalf("Recount after the appends error = %v", err)
	}
	msgs = mustRange(t, s, key, 0, 0)
	if conv := mustConversation(t, s, key); conv.Tokens != 3*int64(len(msgs)-1) || conv.SystemTokens != 3 || conv.Tokenizer != "three" {
		t.Errorf("Conversation after the last recount = Tokens %d, SystemTokens %d, Tokenizer %q; want %d, 3, \"three\"", conv.Tokens, conv.SystemTokens, conv.Tokenizer, 3*(len(msgs)-1))
	}
	wantTails(t, "after the last recount", s, key, msgs)
}

// appendConcurrently appends n messages of 5 tokens to key one at a time
// on s, in a goroutine, alternating assistant and user messages; wait
// waits for it and returns the first append's error.
func appendConcurrently(ctx context.Context, s chatmem.Store, key chatmem.Key, n int) (wait func() error) {
	var wg sync.WaitGroup
	var appendErr error
	wg.Go(func() {
		for i := range n {
			role := chatmem.RoleAssistant
			if i%2 == 1 {
				role = chatmem.RoleUser
			}
			if _, err := s.Append(ctx, key, []chatmem.Message{msg(role, fmt.Sprintf("c%d", i), 5)}, chatmem.AppendOptions{}); err != nil {
				appendErr = err
				return
			}
		}
	})
	return func() error {
		wg.Wait()
		return appendErr
	}
}
