package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// testConditionalAppend checks appends conditional on the conversation's
// last seq (ExpectedLastSeq > 0), the write of each turn of
// chatmem.Memory.Turn, which keeps their result in its tail cache instead
// of reading the messages back: the result must be what reads return,
// messages and conversation alike, and the running totals the tail reads
// use must come out as with unconditional appends. A conditional append
// whose other checks fail (tokenizer, user, expiry) writes nothing.
func testConditionalAppend(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("turn")
	now := time.Now().UTC().Truncate(time.Millisecond) // TTLs count from it
	res := mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleSystem, "Be brief.", 3),
		msg(chatmem.RoleUser, "one", 10),
		msg(chatmem.RoleAssistant, "two", 20),
	}, chatmem.AppendOptions{Tokenizer: "estimate", Now: now})
	last := res.Conversation.LastSeq
	turns := []chatmem.Message{
		msg(chatmem.RoleUser, "three", 30),
		msg(chatmem.RoleSystem, "Now in French.", 4),
		{Role: chatmem.RoleAssistant, Content: "quatre", Tokens: 40, Metadata: map[string]string{"model": "m"}},
		msg(chatmem.RoleUser, "cinq", 50),
	}
	for i, m := range turns {
		opts := chatmem.AppendOptions{ExpectedLastSeq: &last, ExpectedTokenizer: "estimate", Now: now.Add(time.Duration(i+1) * time.Second)}
		if i == 2 {
			opts.TTL = time.Hour
		}
		res := mustAppend(t, s, key, []chatmem.Message{m}, opts)
		last = res.Conversation.LastSeq
		stored := mustRange(t, s, key, last-1, 0)
		if !reflect.DeepEqual(wall(res.Messages), wall(stored)) {
			t.Errorf("turn %d: Append returned %+v, Range reads %+v", i, res.Messages, stored)
		}
		if conv := mustConversation(t, s, key); !reflect.DeepEqual(wallConv(res.Conversation), wallConv(conv)) {
			t.Errorf("turn %d: Append returned %+v, Conversation reads %+v", i, res.Conversation, conv)
		}
	}
	conv := mustConversation(t, s, key)
	if conv.LastSeq != 7 || conv.Tokens != 150 || conv.SystemTokens != 7 || conv.Turns != 3 {
		t.Errorf("after the turns: LastSeq %d, Tokens %d, SystemTokens %d, Turns %d; want 7, 150, 7, 3",
			conv.LastSeq, conv.Tokens, conv.SystemTokens, conv.Turns)
	}
	wantSeqs(t, "Tail(Tokens=90)", mustTail(t, s, key, chatmem.TailQuery{Tokens: 90}), 5, 6, 7) // the system message just before comes along
	wantSeqs(t, "Tail(Tokens=120)", mustTail(t, s, key, chatmem.TailQuery{Tokens: 120}), 4, 5, 6, 7)
	wantSeqs(t, "Tail(Turns=2)", mustTail(t, s, key, chatmem.TailQuery{Turns: 2}), 4, 5, 6, 7)

	// Conditions beside the last seq: nothing is written.
	one := []chatmem.Message{msg(chatmem.RoleUser, "refused", 1)}
	_, err := s.Append(ctx, key, one, chatmem.AppendOptions{ExpectedLastSeq: &last, ExpectedTokenizer: "o200k_base"})
	wantErr(t, "conditional Append(ExpectedTokenizer=o200k_base) to an estimate conversation", err, chatmem.ErrConflict)
	if _, ok := s.(chatmem.UserStore); ok {
		_, err := s.Append(ctx, key, one, chatmem.AppendOptions{ExpectedLastSeq: &last, User: "someone"})
		wantErr(t, "conditional Append(User) to a conversation of no user", err, chatmem.ErrConflict)
	}
	stale := last - 1
	_, err = s.Append(ctx, key, one, chatmem.AppendOptions{ExpectedLastSeq: &stale})
	wantErr(t, "conditional Append at a stale last seq", err, chatmem.ErrConflict)
	if got := mustConversation(t, s, key); got.LastSeq != last {
		t.Errorf("LastSeq after refused appends = %d, want %d", got.LastSeq, last)
	}
}

// wall strips the monotonic clock readings of messages' times, which no
// encoding shows.
func wall(msgs []chatmem.Message) []chatmem.Message {
	out := make([]chatmem.Message, len(msgs))
	for i, m := range msgs {
		m.CreatedAt = m.CreatedAt.Round(0)
		out[i] = m
	}
	return out
}

func wallConv(c chatmem.Conversation) chatmem.Conversation {
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt = c.CreatedAt.Round(0), c.UpdatedAt.Round(0), c.ExpiresAt.Round(0)
	return c
}
