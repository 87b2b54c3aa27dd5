package storetest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/chatmem/chatmem"
)

// sinceTests are the subtests of chatmem.SinceReader.
var sinceTests = []subtest{
	{"Fixture", testSinceFixture},
	{"Errors", testSinceErrors},
	{"Snapshot", testSinceSnapshot},
	{"Endings", testSinceEndings},
}

// testSinceEndings checks ConversationSince on conversations ended in every
// way (see endings): not found once ended, the new conversation alone once
// an append brought the ID back.
func testSinceEndings(t *testing.T, h Harness) {
	s := h.New(t)
	r := as[chatmem.SinceReader](t, s)
	endings(t, s,
		func(key chatmem.Key) {},
		func(how string, key chatmem.Key) {
			_, _, err := r.ConversationSince(t.Context(), key, 0, 10)
			wantErr(t, fmt.Sprintf("ConversationSince(%s) after %s", key, how), err, chatmem.ErrNotFound)
		},
		func(how string, key chatmem.Key) {
			what := fmt.Sprintf("ConversationSince(%s) after %s and a new append", key, how)
			conv, msgs, err := r.ConversationSince(t.Context(), key, 0, 10)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if conv.LastSeq != 2 {
				t.Errorf("%s: LastSeq = %d, want 2", what, conv.LastSeq)
			}
			wantSeqs(t, what, msgs, 1, 2)
		})
}

// testSinceFixture checks ConversationSince(after, limit) on the fixture:
// the metadata Conversation returns and the messages Range returns.
func testSinceFixture(t *testing.T, h Harness) {
	s := h.New(t)
	r := as[chatmem.SinceReader](t, s)
	key := tailFixture(t, s)
	want := mustConversation(t, s, key)
	for _, c := range []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 100, span(1, 8)},
		{0, 3, span(1, 3)},
		{3, 2, span(4, 5)},
		{6, 10, span(7, 8)},
		{7, 1, span(8, 8)},
		{8, 5, nil},
		{100, 1, nil},
		{-5, 2, span(1, 2)},
		{0, math.MaxInt, span(1, 8)},
		{3, math.MaxInt, span(4, 8)},
	} {
		what := fmt.Sprintf("ConversationSince(%d, %d)", c.after, c.limit)
		conv, msgs, err := r.ConversationSince(t.Context(), key, c.after, c.limit)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		wantConversation(t, what, conv, want)
		wantFixture(t, what, msgs, c.want...)
	}
}

// testSinceErrors checks the errors: a missing conversation, a bad key, a
// limit below 1.
func testSinceErrors(t *testing.T, h Harness) {
	s := h.New(t)
	r := as[chatmem.SinceReader](t, s)
	ctx := t.Context()
	_, _, err := r.ConversationSince(ctx, randomKey("missing"), 0, 10)
	wantErr(t, "ConversationSince(missing)", err, chatmem.ErrNotFound)
	_, _, err = r.ConversationSince(ctx, chatmem.Key{Tenant: "acme", ID: ""}, 0, 10)
	wantErr(t, "ConversationSince(empty ID)", err, chatmem.ErrInvalid)
	key := tailFixture(t, s)
	for _, limit := range []int{0, -1} {
		_, _, err = r.ConversationSince(ctx, key, 0, limit)
		wantErr(t, fmt.Sprintf("ConversationSince(limit %d)", limit), err, chatmem.ErrInvalid)
	}
}

// testSinceSnapshot reads while another goroutine appends: every read's
// messages are those of its metadata, 1..LastSeq when the limit allows,
// never one past it.
func testSinceSnapshot(t *testing.T, h Harness) {
	s := h.New(t)
	r := as[chatmem.SinceReader](t, h.reopen(t, s))
	ctx := t.Context()
	key := randomKey("since")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "first", 1)}, chatmem.AppendOptions{})
	const appends = 100
	finished := make(chan struct{})
	defer func() { <-finished }() // a failed read stops the test, not the appends
	go func() {
		defer close(finished)
		for i := range appends {
			m := []chatmem.Message{msg(chatmem.RoleAssistant, fmt.Sprintf("reply %d", i), 2), msg(chatmem.RoleUser, fmt.Sprintf("ask %d", i), 3)}
			if _, err := s.Append(context.WithoutCancel(ctx), key, m, chatmem.AppendOptions{}); err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
		}
	}()
	read := func() chatmem.Conversation {
		t.Helper()
		conv, msgs, err := r.ConversationSince(ctx, key, 0, 10000)
		if err != nil {
			t.Fatalf("ConversationSince: %v", err)
		}
		if got := seqs(msgs); !slices.Equal(got, span(1, conv.LastSeq)) {
			t.Fatalf("ConversationSince: messages %v of a conversation at LastSeq %d", got, conv.LastSeq)
		}
		var tokens int64
		for _, m := range msgs {
			tokens += int64(m.Tokens)
		}
		if tokens != conv.Tokens {
			t.Fatalf("ConversationSince: the messages hold %d tokens, the metadata says %d", tokens, conv.Tokens)
		}
		return conv
	}
	reads := 0
	for running := true; running; reads++ {
		select {
		case <-finished:
			running = false
		default:
		}
		read()
	}
	if conv := read(); !t.Failed() && conv.LastSeq != 1+2*appends {
		t.Errorf("after the appends: LastSeq = %d, want %d", conv.LastSeq, 1+2*appends)
	}
	t.Logf("%d reads during %d appends", reads, appends)
}
