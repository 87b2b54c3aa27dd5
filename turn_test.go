package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
)

// TestTurn: a turn whose conversation is in the tail cache appends and
// assembles its window without a read; the window is the one Context
// returns right after the append, whichever process appended before it;
// and Turn refuses what Append and Context refuse, writing nothing.
func TestTurn(t *testing.T) {
	ctx := t.Context()
	store := &readCounter{Store: memstore.New()}
	mem := newCachedMemory(t, sinceCounter{store}, 0)
	other := newCachedMemory(t, store.Store, 0) // another process
	plain := newCachedMemory(t, store.Store, -1)
	key := chatmem.Key{Tenant: "acme", ID: "turn"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}
	mustAppend(t, other, key, chatmem.Message{Role: chatmem.RoleSystem, Content: "Be brief."})
	for i := range 50 {
		mustAppend(t, other, key,
			chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("why ", 10))},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("because ", 20))})
	}
	turn := func(i int) (chatmem.AppendResult, chatmem.Window) {
		t.Helper()
		store.reset()
		msg := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("turn %d: %s", i, strings.Repeat("and ", 12))}
		res, w, err := mem.Turn(ctx, key, []chatmem.Message{msg}, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatalf("Turn %d: %v", i, err)
		}
		if got := w.Messages[len(w.Messages)-1]; got.Seq != res.Conversation.LastSeq || got.Content != msg.Content {
			t.Fatalf("Turn %d: the window ends with seq %d %q, want the appended message, seq %d", i, got.Seq, got.Content, res.Conversation.LastSeq)
		}
		want, err := plain.Context(ctx, key, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(wallClock(w), wallClock(want)) {
			t.Fatalf("Turn %d: window\n%+v\nwant Context's\n%+v", i, w, want)
		}
		return res, w
	}

	// A process's first turn reads the window, not the conversation's row.
	turn(0)
	if store.convs.Load()+store.sinces.Load() != 0 || store.tails.Load() != 1 {
		t.Errorf("first turn read %s; want one tail (and the system messages), no conversation", store.reads())
	}
	for i := 1; i < 10; i++ {
		turn(i)
		if r := store.reads(); r != "tail 0, range 0, system 0, conversation 0, conversation since 0" {
			t.Fatalf("turn %d read %s; want nothing but the append", i, r)
		}
	}

	// Another process appends: the next turn's window has its messages.
	mustAppend(t, other, key, chatmem.Message{Role: chatmem.RoleAssistant, Content: "from the other process"})
	_, w := turn(10)
	if got := w.Messages[len(w.Messages)-2].Content; got != "from the other process" {
		t.Errorf("after another process's append, the window's last but one message is %q", got)
	}
	turn(11)
	if r := store.reads(); r != "tail 0, range 0, system 0, conversation 0, conversation since 0" {
		t.Errorf("the turn after the other process's read %s; want nothing but the append", r)
	}

	// Refused: nothing is written.
	before, err := store.Conversation(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	user := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello"}}
	if _, _, err := mem.Turn(ctx, key, user, chatmem.AppendOptions{}, chatmem.Policy{Kind: "nope"}, chatmem.ContextOptions{}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Turn with a bad policy = %v, want ErrInvalid", err)
	}
	if _, _, err := mem.Turn(ctx, key, []chatmem.Message{{Role: "robot", Content: "x"}}, chatmem.AppendOptions{}, p, chatmem.ContextOptions{}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Turn with a bad message = %v, want ErrInvalid", err)
	}
	stale := before.LastSeq - 1
	if _, _, err := mem.Turn(ctx, key, user, chatmem.AppendOptions{ExpectedLastSeq: &stale}, p, chatmem.ContextOptions{}); !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("Turn with a stale ExpectedLastSeq = %v, want ErrConflict", err)
	}
	if after, err := store.Conversation(ctx, key); err != nil || after.LastSeq != before.LastSeq {
		t.Errorf("after refused turns LastSeq = %d, %v; want %d", after.LastSeq, err, before.LastSeq)
	}

	// A retried turn replays its append and sends the window as it is.
	opts := chatmem.AppendOptions{IdempotencyKey: "k1"}
	first, _, err := mem.Turn(ctx, key, user, opts, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, w, err := mem.Turn(ctx, key, user, opts, p, chatmem.ContextOptions{})
	if err != nil || !again.Replayed || again.Messages[0].Seq != first.Messages[0].Seq {
		t.Fatalf("retried Turn = %+v, %v; want a replay of seq %d", again, err, first.Messages[0].Seq)
	}
	if want, _ := plain.Context(ctx, key, p, chatmem.ContextOptions{}); !reflect.DeepEqual(wallClock(w), wallClock(want)) {
		t.Errorf("replayed Turn's window differs from Context's")
	}

	// A budget too small for the new message: the append landed, and the
	// error says so with its result.
	big := []chatmem.Message{{Role: chatmem.RoleUser, Content: strings.Repeat("long ", 1000)}}
	res, _, err := mem.Turn(ctx, key, big, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
	if !errors.Is(err, chatmem.ErrBudgetTooSmall) || len(res.Messages) != 1 {
		t.Errorf("Turn over the budget = %d messages, %v; want the append's result and ErrBudgetTooSmall", len(res.Messages), err)
	}
}

// TestTurnAppendTail: on a TailAppender store, a process's first turn on a
// conversation (and on a new one) reads its window with the append, in one
// call, and the window is Context's; the next turns are served by the tail
// cache it filled.
func TestTurnAppendTail(t *testing.T) {
	ctx := t.Context()
	store := &readCounter{Store: memstore.New()}
	var appendTails atomic.Int64
	counted := tailAppendCounter{sinceCounter{store}, &appendTails}
	other := newCachedMemory(t, store.Store, 0)
	plain := newCachedMemory(t, store.Store, -1)
	key := chatmem.Key{Tenant: "acme", ID: "turn-appendtail"}
	mustAppend(t, other, key, chatmem.Message{Role: chatmem.RoleSystem, Content: "Be brief."})
	for i := range 50 {
		mustAppend(t, other, key,
			chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("why ", 10))},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("because ", 20))})
	}
	const nothing = "tail 0, range 0, system 0, conversation 0, conversation since 0"
	for _, tc := range []struct {
		name string
		key  chatmem.Key
		p    chatmem.Policy
	}{
		{"budget", key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}},
		{"turns", key, chatmem.Policy{Kind: chatmem.PolicyLastTurns, Turns: 3}},
		{"new conversation", chatmem.Key{Tenant: "acme", ID: "turn-appendtail-new"}, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}},
	} {
		mem := newCachedMemory(t, counted, 0) // a new process
		for i := range 3 {
			store.reset()
			appendTails.Store(0)
			msg := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s turn %d", tc.name, i)}
			res, w, err := mem.Turn(ctx, tc.key, []chatmem.Message{msg}, chatmem.AppendOptions{}, tc.p, chatmem.ContextOptions{})
			if err != nil {
				t.Fatalf("%s: Turn %d: %v", tc.name, i, err)
			}
			if r := store.reads(); r != nothing {
				t.Errorf("%s: Turn %d read %s; want nothing but the append", tc.name, i, r)
			}
			want := int64(0)
			if i == 0 {
				want = 1 // the first turn only
			}
			if appendTails.Load() != want {
				t.Errorf("%s: Turn %d made %d AppendTail calls, want %d", tc.name, i, appendTails.Load(), want)
			}
			if len(w.Messages) == 0 {
				t.Fatalf("%s: Turn %d's window is empty", tc.name, i)
			}
			if got := w.Messages[len(w.Messages)-1]; got.Seq != res.Conversation.LastSeq {
				t.Errorf("%s: Turn %d's window ends with seq %d, want %d", tc.name, i, got.Seq, res.Conversation.LastSeq)
			}
			ctxw, err := plain.Context(ctx, tc.key, tc.p, chatmem.ContextOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(wallClock(w), wallClock(ctxw)) {
				t.Errorf("%s: Turn %d: window\n%+v\nwant Context's\n%+v", tc.name, i, w, ctxw)
			}
		}
	}

	// PolicyAll reads the whole conversation as Context does: no tail with
	// the append.
	mem := newCachedMemory(t, counted, 0)
	appendTails.Store(0)
	if _, _, err := mem.Turn(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "all"}}, chatmem.AppendOptions{}, chatmem.Policy{Kind: chatmem.PolicyAll}, chatmem.ContextOptions{}); err != nil {
		t.Fatal(err)
	}
	if appendTails.Load() != 0 {
		t.Errorf("a turn under PolicyAll made %d AppendTail calls, want 0", appendTails.Load())
	}
}

// TestTurnOtherTokenizer: a process's first turn on a conversation kept
// under another tokenizer than the default counts with the
// conversation's.
func TestTurnOtherTokenizer(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	other := newCountedMemory(t, store, lenCounter{}, 0)
	key := chatmem.Key{Tenant: "acme", ID: "len"}
	mustAppend(t, other, key, chatmem.Message{Role: chatmem.RoleUser, Content: "hi"})
	mem, err := chatmem.New(store, chatmem.Options{Counter: eighthCounter{}, Counters: func(name string) (chatmem.Counter, error) {
		if name == "len" {
			return lenCounter{}, nil
		}
		return nil, fmt.Errorf("%w: %s", chatmem.ErrInvalid, name)
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, w, err := mem.Turn(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "twelve chars"}}, chatmem.AppendOptions{},
		chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 100}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].Tokens != 12 || w.Tokens != 14 {
		t.Errorf("Turn counted %d tokens, window %d; want 12 (the conversation's tokenizer), 14", res.Messages[0].Tokens, w.Tokens)
	}
}

// wallClock strips the monotonic clock readings off a window's times,
// which the memory store keeps from time.Now and no encoding shows.
func wallClock(w chatmem.Window) chatmem.Window {
	for i := range w.Messages {
		w.Messages[i].CreatedAt = w.Messages[i].CreatedAt.Round(0)
	}
	return w
}

// indexCounter is a store whose index catches up from a watermark
// (chatmem.IndexCatcher), counting the catch-ups.
type indexCounter struct {
	chatmem.Store
	calls atomic.Int64
}

func (s *indexCounter) IndexPending(ctx context.Context, key chatmem.Key) error {
	s.calls.Add(1)
	_, err := s.Store.Conversation(ctx, key)
	return err
}

// TestIndexCatchUp: with a running worker, appends have an IndexCatcher's
// index caught up every few dozen messages, not at every append; without
// one, nothing is queued (Postings catches up).
func TestIndexCatchUp(t *testing.T) {
	ctx := t.Context()
	store := &indexCounter{Store: memstore.New()}
	mem := newCachedMemory(t, store, 0)
	key := chatmem.Key{Tenant: "acme", ID: "index"}
	for i := range 40 {
		mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprint("m", i)})
	}
	if n := store.calls.Load(); n != 0 {
		t.Errorf("%d catch-ups without a running worker, want 0", n)
	}
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for i := range 200 {
		mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprint("m", i)})
	}
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Messages 41 to 240 cross six multiples of 32: one catch-up each,
	// fewer when jobs queued behind a running one merge.
	if n := store.calls.Load(); n < 1 || n > 6 {
		t.Errorf("%d catch-ups over 200 appends, want 1 to 6 (one per 32 messages crossed, merged when queued)", n)
	}
}

// appendCounter counts a store's appends.
type appendCounter struct {
	sinceCounter
	appends *atomic.Int64
}

func (s appendCounter) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	s.appends.Add(1)
	return s.Store.Append(ctx, key, msgs, opts)
}

// TestTurnWithReplies: a chatbot's steady turn, Turn for the user's
// message and then Append for the reply, costs the store two writes and
// no read: the reply's append, conditional on the tail cache's last
// message, keeps the entry current, so the next Turn's fast path holds.
// Another writer in between costs a read, and the windows stay right.
func TestTurnWithReplies(t *testing.T) {
	ctx := t.Context()
	counter := &readCounter{Store: memstore.New()}
	var appends atomic.Int64
	mem := newCachedMemory(t, appendCounter{sinceCounter{counter}, &appends}, 0)
	other := newCachedMemory(t, counter.Store, -1)
	key := chatmem.Key{Tenant: "acme", ID: "replies"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 120}
	turn := func(i int) chatmem.Window {
		t.Helper()
		_, w, err := mem.Turn(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d about my order", i)}}, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
		return w
	}
	reads := func() int64 {
		return counter.tails.Load() + counter.ranges.Load() + counter.systems.Load() + counter.convs.Load() + counter.sinces.Load()
	}
	turn(0) // the first turn reads and fills the cache
	for i := 1; i <= 10; i++ {
		r0, a0 := reads(), appends.Load()
		w := turn(i)
		if r, a := reads()-r0, appends.Load()-a0; r != 0 || a != 2 {
			t.Errorf("steady turn %d with its reply: %d store reads and %d appends, want 0 and 2", i, r, a)
		}
		all, err := other.Messages(ctx, key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := chatmem.Apply(p, all[:len(all)-1]) // as it stood before the reply
		if err != nil {
			t.Fatal(err)
		}
		if got := seqsOf(w.Messages); !reflect.DeepEqual(got, seqsOf(want.Messages)) {
			t.Errorf("turn %d: window %v, want %v", i, got, seqsOf(want.Messages))
		}
	}
	// Another writer in between: the reply's condition fails, it is
	// appended all the same, and the next window holds everything.
	mustAppend(t, other, key, chatmem.Message{Role: chatmem.RoleUser, Content: "from another process"})
	mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleAssistant, Content: "answer to it"})
	a0 := appends.Load()
	w := turn(11)
	// The Turn's condition fails once (the entry is behind), its append is
	// then made without one, and the reply's lands: three writes, not a
	// second try on the condition that just failed.
	if a := appends.Load() - a0; a != 3 {
		t.Errorf("turn with the cache's entry behind: %d appends, want 3", a)
	}
	all, err := other.Messages(ctx, key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.Messages); w.Messages[n-1].Seq != all[len(all)-2].Seq || w.Messages[n-2].Content != "answer to it" || w.Messages[n-3].Content != "from another process" {
		t.Errorf("after another writer, window %v ends wrong (stored %d messages)", seqsOf(w.Messages), len(all))
	}
}

// TestTurnOwnRevisionOnly: a Turn that pins only the revision is not
// refused because the tail cache's entry is behind the conversation's
// last message (an Append of tool results passes the cache by): only the
// caller's own condition decides, as it does for Append.
func TestTurnOwnRevisionOnly(t *testing.T) {
	ctx := t.Context()
	mem := newCachedMemory(t, memstore.New(), 0)
	key := chatmem.Key{Tenant: "acme", ID: "own-revision"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 1000}
	user := func(text string) []chatmem.Message { return []chatmem.Message{{Role: chatmem.RoleUser, Content: text}} }
	if _, _, err := mem.Turn(ctx, key, user("where is my order?"), chatmem.AppendOptions{}, p, chatmem.ContextOptions{}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "c1", Type: "function", Function: chatmem.FunctionCall{Name: "track", Arguments: `{"order":"SE-10423"}`}}}})
	mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleTool, ToolCallID: "c1", Content: "in transit"})
	zero := int64(0)
	res, w, err := mem.Turn(ctx, key, user("thanks"), chatmem.AppendOptions{ExpectedRevision: &zero}, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatalf("Turn(ExpectedRevision=0) at revision 0: %v", err)
	}
	if res.Conversation.LastSeq != 4 || w.Messages[len(w.Messages)-1].Content != "thanks" {
		t.Errorf("Turn: LastSeq %d, window ends %q; want 4, thanks", res.Conversation.LastSeq, w.Messages[len(w.Messages)-1].Content)
	}
	stale := int64(1)
	if _, _, err := mem.Turn(ctx, key, user("stale"), chatmem.AppendOptions{ExpectedRevision: &stale}, p, chatmem.ContextOptions{}); !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("Turn(ExpectedRevision=1) at revision 0 = %v, want ErrConflict", err)
	}
}
