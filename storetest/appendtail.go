package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// appendTailTests are the subtests of chatmem.TailAppender.
var appendTailTests = []subtest{
	{"Reads", testAppendTailReads},
	{"Refusals", testAppendTailRefusals},
	{"Snapshot", testAppendTailSnapshot},
}

// appendTail calls AppendTail, failing the test on an error.
func appendTail(t *testing.T, s chatmem.Store, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead) {
	t.Helper()
	res, read, err := as[chatmem.TailAppender](t, s).AppendTail(t.Context(), key, msgs, opts, q)
	if err != nil {
		t.Fatalf("AppendTail(%s, %d messages, %+v): %v", key, len(msgs), q, err)
	}
	return res, read
}

// testAppendTailReads checks that AppendTail returns what Append would, and
// the system messages and tail that System and Tail read right after it:
// on a new conversation, on one with system messages (under a token and a
// turn query), and as nothing for a replay.
func testAppendTailReads(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("appendtail")
	now := time.Now().UTC().Truncate(time.Millisecond)

	// A new conversation: the tail is the batch.
	first := []chatmem.Message{
		msg(chatmem.RoleSystem, "Be brief.", 3),
		msg(chatmem.RoleUser, "one", 10),
	}
	res, read := appendTail(t, s, key, first, chatmem.AppendOptions{Tokenizer: "estimate", Now: now}, chatmem.TailQuery{Tokens: 1000})
	wantSeqs(t, "new conversation: AppendTail's messages", res.Messages, 1, 2)
	if res.Conversation.LastSeq != 2 || res.Conversation.Tokens != 10 || res.Conversation.SystemTokens != 3 {
		t.Errorf("new conversation: AppendTail's conversation = %+v, want LastSeq 2, Tokens 10, SystemTokens 3", res.Conversation)
	}
	wantMessages(t, "new conversation: AppendTail's system messages", read.System, mustSystem(t, s, key))
	wantMessages(t, "new conversation: AppendTail's tail", read.Recent, withSeqs(first, 1, now))

	// A longer conversation, a system message in the middle of it.
	more := []chatmem.Message{
		msg(chatmem.RoleAssistant, "two", 20),
		msg(chatmem.RoleUser, "three", 30),
		msg(chatmem.RoleSystem, "Now in French.", 4),
		msg(chatmem.RoleAssistant, "quatre", 40),
	}
	mustAppend(t, s, key, more, chatmem.AppendOptions{Now: now})
	for _, q := range []chatmem.TailQuery{{Tokens: 95}, {Tokens: 1}, {Turns: 1}, {Turns: 5}, {Tokens: 60, Turns: 1}} {
		what := fmt.Sprintf("AppendTail(%+v)", q)
		batch := []chatmem.Message{msg(chatmem.RoleUser, "cinq "+what, 50)}
		res, read := appendTail(t, s, key, batch, chatmem.AppendOptions{IdempotencyKey: what, Now: now}, q)
		last := res.Conversation.LastSeq
		wantMessages(t, what+"'s messages", res.Messages, withSeqs(batch, last, now))
		if conv := mustConversation(t, s, key); !conv.UpdatedAt.Equal(res.Conversation.UpdatedAt) || conv.LastSeq != last || conv.Tokens != res.Conversation.Tokens || conv.SystemTokens != res.Conversation.SystemTokens {
			t.Errorf("%s: conversation = %+v, Conversation reads %+v", what, res.Conversation, conv)
		}
		wantMessages(t, what+"'s system messages", read.System, mustSystem(t, s, key))
		wantMessages(t, what+"'s tail", read.Recent, mustTail(t, s, key, q))
		if n := len(read.Recent); n > 0 && read.Recent[n-1].Seq != last { // Tokens: 1 selects nothing
			t.Errorf("%s: tail ends at %v, want the append's last message %d", what, seqs(read.Recent), last)
		}

		// Its retry is a replay, and reads nothing.
		again, read := appendTail(t, s, key, batch, chatmem.AppendOptions{IdempotencyKey: what, Now: now}, q)
		if !again.Replayed || again.Conversation.LastSeq != last {
			t.Errorf("%s again: Replayed %v, LastSeq %d; want a replay at %d", what, again.Replayed, again.Conversation.LastSeq, last)
		}
		if read.System != nil || read.Recent != nil {
			t.Errorf("%s again (a replay): read %d system messages and %d recent ones, want none", what, len(read.System), len(read.Recent))
		}
	}
}

// testAppendTailRefusals checks that what Append refuses AppendTail refuses
// with the same error and writes nothing, and that a query selecting
// nothing is invalid.
func testAppendTailRefusals(t *testing.T, h Harness) {
	s := h.New(t)
	ta := as[chatmem.TailAppender](t, s)
	ctx := t.Context()
	key := randomKey("appendtail-refused")
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "one", 10)}, chatmem.AppendOptions{Tokenizer: "estimate"})
	one := []chatmem.Message{msg(chatmem.RoleUser, "refused", 1)}
	q := chatmem.TailQuery{Tokens: 100}

	stale := res.Conversation.LastSeq - 1
	_, _, err := ta.AppendTail(ctx, key, one, chatmem.AppendOptions{ExpectedLastSeq: &stale}, q)
	wantErr(t, "AppendTail at a stale last seq", err, chatmem.ErrConflict)
	_, _, err = ta.AppendTail(ctx, key, one, chatmem.AppendOptions{ExpectedTokenizer: "o200k_base"}, q)
	wantErr(t, "AppendTail(ExpectedTokenizer=o200k_base) to an estimate conversation", err, chatmem.ErrConflict)
	_, _, err = ta.AppendTail(ctx, key, nil, chatmem.AppendOptions{}, q)
	wantErr(t, "AppendTail of no messages", err, chatmem.ErrInvalid)
	_, _, err = ta.AppendTail(ctx, key, one, chatmem.AppendOptions{}, chatmem.TailQuery{})
	wantErr(t, "AppendTail with an empty tail query", err, chatmem.ErrInvalid)
	_, _, err = ta.AppendTail(ctx, chatmem.Key{Tenant: "bad tenant", ID: "x"}, one, chatmem.AppendOptions{}, q)
	wantErr(t, "AppendTail to an invalid key", err, chatmem.ErrInvalid)
	if got := mustConversation(t, s, key); got.LastSeq != res.Conversation.LastSeq || got.Tokens != res.Conversation.Tokens {
		t.Errorf("after refused AppendTails: LastSeq %d, Tokens %d; want %d, %d", got.LastSeq, got.Tokens, res.Conversation.LastSeq, res.Conversation.Tokens)
	}

	// An empty query creates nothing either.
	fresh := randomKey("appendtail-none")
	_, _, err = ta.AppendTail(ctx, fresh, one, chatmem.AppendOptions{}, chatmem.TailQuery{Turns: -1})
	wantErr(t, "AppendTail to a new conversation with a query selecting nothing", err, chatmem.ErrInvalid)
	wantNotFound(t, s, fresh)
}

// testAppendTailSnapshot races AppendTails on one conversation: each one's
// tail must be the conversation's tail as its append left it (its own
// messages last, nothing appended after them, nothing before them
// missing), and every append lands, densely numbered.
func testAppendTailSnapshot(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("appendtail-race")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleSystem, "Be brief.", 3)}, chatmem.AppendOptions{Tokenizer: "estimate"})
	const writers, each, turns = 4, 10, 3
	type seen struct {
		what   string
		last   int64
		recent []chatmem.Message
		system []int64
	}
	var mu sync.Mutex
	var all []seen
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				what := fmt.Sprintf("writer %d, turn %d", w, i)
				batch := []chatmem.Message{msg(chatmem.RoleUser, what, 5), msg(chatmem.RoleAssistant, "answer to "+what, 7)}
				res, read, err := as[chatmem.TailAppender](t, s).AppendTail(t.Context(), key, batch, chatmem.AppendOptions{}, chatmem.TailQuery{Turns: turns})
				if err != nil {
					t.Errorf("%s: AppendTail: %v", what, err)
					continue
				}
				mu.Lock()
				all = append(all, seen{what, res.Conversation.LastSeq, read.Recent, seqs(read.System)})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stored := mustRange(t, s, key, 0, 0)
	wantSeqs(t, "the conversation after the race", stored, span(1, 1+2*writers*each)...)
	for _, a := range all {
		// Tail(Turns) as of a.last: from the turns-th newest user message
		// of the messages up to it.
		upTo := stored[:a.last]
		start, users := len(upTo), 0
		for start > 0 && users < turns {
			start--
			if upTo[start].Role == chatmem.RoleUser {
				users++
			}
		}
		wantMessages(t, a.what+": AppendTail's tail", a.recent, upTo[start:])
		if len(a.recent) > 0 && a.recent[len(a.recent)-1].Content != "answer to "+a.what {
			t.Errorf("%s: the tail ends with %q, not its own messages", a.what, a.recent[len(a.recent)-1].Content)
		}
		if len(a.system) != 1 || a.system[0] != 1 {
			t.Errorf("%s: system messages %v, want [1]", a.what, a.system)
		}
	}
}
