package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// tailFixture appends, in two batches, a conversation whose tails the
// subtests work out by hand. Content is "m<seq>".
//
//	seq  role       tokens  non-system tokens from here to the end
//	1    system     100     70
//	2    user        10     70
//	3    assistant   20     60
//	4    user         5     40
//	5    system      50     35
//	6    assistant   15     35
//	7    user         8     20
//	8    assistant   12     12
func tailFixture(t *testing.T, s chatmem.Store) chatmem.Key {
	t.Helper()
	key := randomKey("tail")
	roles := []chatmem.Role{"", chatmem.RoleSystem, chatmem.RoleUser, chatmem.RoleAssistant, chatmem.RoleUser,
		chatmem.RoleSystem, chatmem.RoleAssistant, chatmem.RoleUser, chatmem.RoleAssistant}
	tokens := []int{0, 100, 10, 20, 5, 50, 15, 8, 12}
	var msgs []chatmem.Message
	for seq := 1; seq <= 8; seq++ {
		msgs = append(msgs, msg(roles[seq], fmt.Sprintf("m%d", seq), tokens[seq]))
	}
	mustAppend(t, s, key, msgs[:4], chatmem.AppendOptions{})
	mustAppend(t, s, key, msgs[4:], chatmem.AppendOptions{})
	return key
}

// wantFixture fails the test unless msgs are the fixture's messages seqs
// want, with their content and tokens.
func wantFixture(t *testing.T, what string, msgs []chatmem.Message, want ...int64) {
	t.Helper()
	wantSeqs(t, what, msgs, want...)
	for _, m := range msgs {
		if c := fmt.Sprintf("m%d", m.Seq); m.Content != c {
			t.Errorf("%s: seq %d has content %q, want %q", what, m.Seq, m.Content, c)
		}
	}
}

// testConversationMetadata checks the running totals (LastSeq, Tokens,
// SystemTokens, Turns), the times, and that the tokenizer is the one the
// first append named.
func testConversationMetadata(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("meta")
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 250000000, time.UTC)
	t1 := t0.Add(90 * time.Minute)

	res := mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleSystem, "be brief", 5),
		msg(chatmem.RoleUser, "hi", 10),
		msg(chatmem.RoleAssistant, "hello", 7),
	}, chatmem.AppendOptions{Tokenizer: "estimate", Now: t0})
	want := chatmem.Conversation{Key: key, Tokenizer: "estimate", LastSeq: 3, Tokens: 17, SystemTokens: 5, Turns: 1, CreatedAt: t0, UpdatedAt: t0}
	wantConversation(t, "Append(1).Conversation", res.Conversation, want)
	wantConversation(t, "Conversation after append 1", mustConversation(t, s, key), want)

	res = mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleUser, "order?", 3),
		msg(chatmem.RoleAssistant, "which one?", 4),
		msg(chatmem.RoleSystem, "the user is Ada", 2),
		msg(chatmem.RoleUser, "A-17", 6),
	}, chatmem.AppendOptions{Tokenizer: "o200k_base", Now: t1})
	want = chatmem.Conversation{Key: key, Tokenizer: "estimate", LastSeq: 7, Tokens: 30, SystemTokens: 7, Turns: 3, CreatedAt: t0, UpdatedAt: t1}
	wantConversation(t, "Append(2).Conversation", res.Conversation, want)
	wantConversation(t, "Conversation after append 2", mustConversation(t, s, key), want)

	// A message's own CreatedAt does not move the conversation's times.
	old := msg(chatmem.RoleAssistant, "imported", 1)
	old.CreatedAt = t0.Add(-24 * time.Hour)
	mustAppend(t, s, key, []chatmem.Message{old}, chatmem.AppendOptions{Now: t1})
	want.LastSeq, want.Tokens = 8, 31
	wantConversation(t, "Conversation after append 3", mustConversation(t, s, key), want)
}

// wantConversation fails the test unless got equals want.
func wantConversation(t *testing.T, what string, got, want chatmem.Conversation) {
	t.Helper()
	switch {
	case got.Key != want.Key:
		t.Errorf("%s: Key = %v, want %v", what, got.Key, want.Key)
	case got.Tokenizer != want.Tokenizer:
		t.Errorf("%s: Tokenizer = %q, want %q", what, got.Tokenizer, want.Tokenizer)
	case got.LastSeq != want.LastSeq:
		t.Errorf("%s: LastSeq = %d, want %d", what, got.LastSeq, want.LastSeq)
	case got.Tokens != want.Tokens:
		t.Errorf("%s: Tokens = %d, want %d", what, got.Tokens, want.Tokens)
	case got.SystemTokens != want.SystemTokens:
		t.Errorf("%s: SystemTokens = %d, want %d", what, got.SystemTokens, want.SystemTokens)
	case got.Turns != want.Turns:
		t.Errorf("%s: Turns = %d, want %d", what, got.Turns, want.Turns)
	case !got.CreatedAt.Equal(want.CreatedAt):
		t.Errorf("%s: CreatedAt = %v, want %v", what, got.CreatedAt, want.CreatedAt)
	case !got.UpdatedAt.Equal(want.UpdatedAt):
		t.Errorf("%s: UpdatedAt = %v, want %v", what, got.UpdatedAt, want.UpdatedAt)
	case !got.ExpiresAt.Equal(want.ExpiresAt):
		t.Errorf("%s: ExpiresAt = %v, want %v", what, got.ExpiresAt, want.ExpiresAt)
	case got.Revision != want.Revision:
		t.Errorf("%s: Revision = %d, want %d", what, got.Revision, want.Revision)
	}
}

// testTailTokens checks Tail by token budget on the fixture: the longest run
// of newest messages whose non-system tokens fit, system messages inside it
// included but not counted, with exact boundaries.
func testTailTokens(t *testing.T, h Harness) {
	s := h.New(t)
	key := tailFixture(t, s)
	for _, c := range []struct {
		tokens int
		want   []int64
	}{
		{1, nil},
		{11, nil}, // the newest message alone (12) does not fit
		{12, span(8, 8)},
		{19, span(8, 8)},
		{20, span(7, 8)},
		{34, span(7, 8)},
		{35, span(5, 8)}, // the system message at 5 costs nothing, so the run reaches it
		{39, span(5, 8)},
		{40, span(4, 8)},
		{59, span(4, 8)},
		{60, span(3, 8)},
		{69, span(3, 8)},
		{70, span(1, 8)}, // everything; the leading system message is free
		{1000000, span(1, 8)},
	} {
		got := mustTail(t, s, key, chatmem.TailQuery{Tokens: c.tokens})
		wantFixture(t, fmt.Sprintf("Tail(Tokens=%d)", c.tokens), got, c.want...)
	}
	wantFixture(t, "Tail({})", mustTail(t, s, key, chatmem.TailQuery{}))
}

// testTailTurns checks Tail by turns, and by turns and tokens together (the
// shorter run wins), on the fixture, whose user messages are at 2, 4 and 7.
func testTailTurns(t *testing.T, h Harness) {
	s := h.New(t)
	key := tailFixture(t, s)
	for _, c := range []struct {
		q    chatmem.TailQuery
		want []int64
	}{
		{chatmem.TailQuery{Turns: 1}, span(7, 8)},
		{chatmem.TailQuery{Turns: 2}, span(4, 8)},
		{chatmem.TailQuery{Turns: 3}, span(2, 8)},
		{chatmem.TailQuery{Turns: 4}, span(1, 8)}, // fewer user messages: all
		{chatmem.TailQuery{Turns: 1000}, span(1, 8)},
		{chatmem.TailQuery{Tokens: 40, Turns: 1}, span(7, 8)},
		{chatmem.TailQuery{Tokens: 20, Turns: 3}, span(7, 8)},
		{chatmem.TailQuery{Tokens: 19, Turns: 1}, span(8, 8)},
		{chatmem.TailQuery{Tokens: 11, Turns: 1}, nil},
		{chatmem.TailQuery{Tokens: 1000, Turns: 2}, span(4, 8)},
		{chatmem.TailQuery{Tokens: 60, Turns: 3}, span(3, 8)},
	} {
		got := mustTail(t, s, key, c.q)
		wantFixture(t, fmt.Sprintf("Tail(Tokens=%d, Turns=%d)", c.q.Tokens, c.q.Turns), got, c.want...)
	}

	// A conversation without user messages has fewer than one turn.
	key2 := chatmem.Key{Tenant: key.Tenant, ID: "no-user"}
	mustAppend(t, s, key2, []chatmem.Message{msg(chatmem.RoleSystem, "s", 1), msg(chatmem.RoleAssistant, "a", 1)}, chatmem.AppendOptions{})
	wantSeqs(t, "Tail(Turns=1) without user messages", mustTail(t, s, key2, chatmem.TailQuery{Turns: 1}), 1, 2)
}

// testSystem checks that System returns the system messages, oldest first,
// and nothing for a conversation without any.
func testSystem(t *testing.T, h Harness) {
	s := h.New(t)
	key := tailFixture(t, s)
	sys, err := s.System(t.Context(), key)
	if err != nil {
		t.Fatalf("System error = %v, want nil", err)
	}
	wantFixture(t, "System", sys, 1, 5)
	for _, m := range sys {
		if m.Role != chatmem.RoleSystem {
			t.Errorf("System returned seq %d with role %q", m.Seq, m.Role)
		}
	}

	key2 := chatmem.Key{Tenant: key.Tenant, ID: "no-system"}
	mustAppend(t, s, key2, []chatmem.Message{msg(chatmem.RoleUser, "u", 1)}, chatmem.AppendOptions{})
	sys, err = s.System(t.Context(), key2)
	if err != nil || len(sys) != 0 {
		t.Errorf("System without system messages = seqs %v, %v; want none, nil", seqs(sys), err)
	}
}

// testRange checks Range(after, limit) on the fixture.
func testRange(t *testing.T, h Harness) {
	s := h.New(t)
	key := tailFixture(t, s)
	for _, c := range []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 0, span(1, 8)},
		{0, -1, span(1, 8)},
		{0, 3, span(1, 3)},
		{3, 2, span(4, 5)},
		{6, 10, span(7, 8)},
		{7, 0, span(8, 8)},
		{8, 5, nil},
		{100, 0, nil},
		{-5, 2, span(1, 2)},
	} {
		got := mustRange(t, s, key, c.after, c.limit)
		wantFixture(t, fmt.Sprintf("Range(%d, %d)", c.after, c.limit), got, c.want...)
	}
}

// testLongTail appends 20,000 messages and checks that small tails return
// only the newest few. Whether the read is bounded by the window rather than
// the history is measured by BenchmarkTail, not asserted here.
func testLongTail(t *testing.T, h Harness) {
	const n = 20000
	s := h.New(t)
	key := randomKey("long")
	fill(t, t.Context(), s, key, n) // 20 tokens each, users at odd seqs

	c := mustConversation(t, s, key)
	if c.LastSeq != n || c.Tokens != 20*n || c.Turns != n/2 {
		t.Errorf("Conversation = LastSeq %d, Tokens %d, Turns %d; want %d, %d, %d", c.LastSeq, c.Tokens, c.Turns, n, 20*n, n/2)
	}
	for _, q := range []struct {
		q    chatmem.TailQuery
		want []int64
	}{
		{chatmem.TailQuery{Tokens: 100}, span(n-4, n)},
		{chatmem.TailQuery{Tokens: 119}, span(n-4, n)},
		{chatmem.TailQuery{Tokens: 120}, span(n-5, n)},
		{chatmem.TailQuery{Turns: 2}, span(n-3, n)},
		{chatmem.TailQuery{Tokens: 4000}, span(n-199, n)},
		{chatmem.TailQuery{Tokens: 4000, Turns: 3}, span(n-5, n)},
	} {
		got := mustTail(t, s, key, q.q)
		wantSeqs(t, fmt.Sprintf("Tail(Tokens=%d, Turns=%d)", q.q.Tokens, q.q.Turns), got, q.want...)
		for _, m := range got {
			if want := fmt.Sprintf("message %d", m.Seq); m.Content != want {
				t.Errorf("Tail: seq %d has content %q, want %q", m.Seq, m.Content, want)
				break
			}
		}
	}
	wantSeqs(t, fmt.Sprintf("Range(%d, 5)", n-10), mustRange(t, s, key, n-10, 5), span(n-9, n-5)...)
}
