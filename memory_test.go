package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

func newMemory(t testing.TB) *chatmem.Memory {
	t.Helper()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter: tokenizer.Estimate{},
		Counters: func(name string) (chatmem.Counter, error) {
			if name == (doubleCounter{}).Name() {
				return doubleCounter{}, nil
			}
			return nil, fmt.Errorf("%w: unknown tokenizer %q", chatmem.ErrInvalid, name)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// doubleCounter counts twice what the estimate does, to tell recounted
// windows from stored counts.
type doubleCounter struct{}

func (doubleCounter) Name() string { return "double" }
func (doubleCounter) Count(ctx context.Context, m chatmem.Message) (int, error) {
	n, err := tokenizer.Estimate{}.Count(ctx, m)
	return 2 * n, err
}

var seedKey = chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "seed"}

func TestMemorySeed(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	// One message per append, as a live chat does.
	for _, m := range seed.History() {
		if _, err := mem.Append(ctx, seedKey, []chatmem.Message{m}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ budget, n, tokens, dropped int }{{100, 5, 63, 0}, {40, 3, 36, 2}, {25, 1, 9, 4}} {
		w, err := mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: tt.budget}, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Messages) != tt.n || w.Tokens != tt.tokens || w.Dropped != tt.dropped {
			t.Errorf("Context(budget=%d) = %d msgs, %d tokens, %d dropped; want %d, %d, %d", tt.budget, len(w.Messages), w.Tokens, w.Dropped, tt.n, tt.tokens, tt.dropped)
		}
	}
	_, err := mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 8}, chatmem.ContextOptions{})
	if !errors.Is(err, chatmem.ErrBudgetTooSmall) {
		t.Errorf("Context(budget=8) error = %v, want ErrBudgetTooSmall", err)
	}
	w, err := mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 40}, chatmem.ContextOptions{Tokenizer: "double"})
	if err != nil {
		t.Fatal(err)
	}
	// Doubled counts: 18 (last user), then 36 more would exceed 40.
	if len(w.Messages) != 1 || w.Tokens != 18 {
		t.Errorf("Context(budget=40, tokenizer=double) = %d msgs, %d tokens; want 1, 18", len(w.Messages), w.Tokens)
	}
	if _, err := mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 40}, chatmem.ContextOptions{Tokenizer: "nope"}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("unknown tokenizer: error = %v, want ErrInvalid", err)
	}
}

func TestMemoryPinnedSystemAcrossLongHistory(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "long"}
	batch := []chatmem.Message{{Role: chatmem.RoleSystem, Content: "You are terse."}} // 3 tokens
	for i := range 500 {
		batch = append(batch,
			chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %03d", i)},     // 3 tokens
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %03d!", i)}) // 2 tokens
	}
	for _, part := range [][]chatmem.Message{batch[:501], batch[501:]} {
		if _, err := mem.Append(ctx, key, part, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 14}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, m := range w.Messages {
		got = append(got, m.Content)
	}
	want := []string{"You are terse.", "question 498", "answer 498!", "question 499", "answer 499!"}
	if fmt.Sprint(got) != fmt.Sprint(want) || w.Tokens != 13 || w.Dropped != 1001-5 {
		t.Errorf("Context = %q (%d tokens, %d dropped), want %q (13, 996)", got, w.Tokens, w.Dropped, want)
	}
	w, err = mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyLastTurns, Turns: 1}, chatmem.ContextOptions{})
	if err != nil || len(w.Messages) != 3 || w.Messages[1].Content != "question 499" {
		t.Errorf("last_turns=1: %v, %v", w.Messages, err)
	}
}

func TestMemoryAppendRejectsBadInputAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "bad"}
	call := chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "c1", Type: "function", Function: chatmem.FunctionCall{Name: "track", Arguments: `{"order":"SE-10423"}`}}}}
	tests := []struct {
		name string
		key  chatmem.Key
		msgs []chatmem.Message
		err  error
	}{
		{"no messages", key, nil, chatmem.ErrInvalid},
		{"unknown role", key, []chatmem.Message{{Role: "robot", Content: "hi"}}, chatmem.ErrInvalid},
		{"empty content", key, []chatmem.Message{{Role: chatmem.RoleUser}}, chatmem.ErrInvalid},
		{"invalid utf-8", key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "\xff\xfe"}}, chatmem.ErrInvalid},
		{"tool result without call", key, []chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "c9", Content: "x"}}, chatmem.ErrInvalid},
		{"tool result for another call", key, []chatmem.Message{call, {Role: chatmem.RoleTool, ToolCallID: "c2", Content: "x"}}, chatmem.ErrInvalid},
		{"tool calls on a user message", key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "x", ToolCalls: call.ToolCalls}}, chatmem.ErrInvalid},
		{"oversized content", key, []chatmem.Message{{Role: chatmem.RoleUser, Content: strings.Repeat("x", 300<<10)}}, chatmem.ErrTooLarge},
		{"valid message after a bad one", key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "fine"}, {Role: "robot", Content: "x"}}, chatmem.ErrInvalid},
		{"bad id", chatmem.Key{Tenant: "t", ID: "../etc"}, []chatmem.Message{{Role: chatmem.RoleUser, Content: "x"}}, chatmem.ErrInvalid},
		{"key pattern id", chatmem.Key{Tenant: "t", ID: "a*"}, []chatmem.Message{{Role: chatmem.RoleUser, Content: "x"}}, chatmem.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mem.Append(ctx, tt.key, tt.msgs, chatmem.AppendOptions{})
			if !errors.Is(err, tt.err) {
				t.Fatalf("Append error = %v, want %v", err, tt.err)
			}
			if _, err := mem.Store().Conversation(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
				t.Errorf("after a refused append, Conversation error = %v, want ErrNotFound", err)
			}
		})
	}
	if !utf8.ValidString(tests[4].msgs[0].Content) {
		t.Fatal("fixture broken")
	}
}

func TestMemoryToolResultsInLaterAppends(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "tools"}
	call := chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{
		{ID: "c1", Type: "function", Function: chatmem.FunctionCall{Name: "track", Arguments: `{"order":"SE-10423"}`}},
		{ID: "c2", Type: "function", Function: chatmem.FunctionCall{Name: "eta", Arguments: `{}`}},
	}}
	steps := []struct {
		msgs []chatmem.Message
		err  error
	}{
		{[]chatmem.Message{{Role: chatmem.RoleUser, Content: "Where is SE-10423?"}, call}, nil},
		{[]chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "c1", Content: "out for delivery"}}, nil},
		{[]chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "c1", Content: "again"}}, chatmem.ErrInvalid}, // answered already
		{[]chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "c2", Content: "8 pm"}}, nil},
		{[]chatmem.Message{{Role: chatmem.RoleAssistant, Content: "It arrives by 8 pm."}}, nil},
		{[]chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "c2", Content: "late"}}, chatmem.ErrInvalid}, // unit closed
	}
	for i, s := range steps {
		if _, err := mem.Append(ctx, key, s.msgs, chatmem.AppendOptions{}); !errors.Is(err, s.err) {
			t.Fatalf("step %d: error = %v, want %v", i, err, s.err)
		}
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyAll}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Messages) != 5 || w.Messages[2].ToolCallID != "c1" || w.Messages[3].ToolCallID != "c2" {
		t.Errorf("history = %+v", w.Messages)
	}
}

// Concurrent writers appending tool results and other messages: the
// validation read and the write are pinned together, so every append
// either lands valid or is refused; none is lost.
func TestMemoryConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "busy"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				msg := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("g%d m%d", g, i)}
				if _, err := mem.Append(ctx, key, []chatmem.Message{msg}, chatmem.AppendOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	conv, err := mem.Store().Conversation(ctx, key)
	if err != nil || conv.LastSeq != 400 {
		t.Fatalf("LastSeq = %d (%v), want 400", conv.LastSeq, err)
	}
}

// BenchmarkContext measures one turn's context read through Memory on the
// in-process store: the 1,000,000-message conversation should cost what the
// 1,000-message one does.
func BenchmarkContext(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 1000000} {
		mem := newMemory(b)
		key := chatmem.Key{Tenant: "bench", ID: fmt.Sprint("c", n)}
		batch := make([]chatmem.Message, 0, 1000)
		for i := 0; i < n; i++ {
			role := chatmem.RoleUser
			if i%2 == 1 {
				role = chatmem.RoleAssistant
			}
			batch = append(batch, chatmem.Message{Role: role, Content: strings.Repeat("word ", 30)})
			if len(batch) == cap(batch) {
				if _, err := mem.Append(ctx, key, batch, chatmem.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 4000}
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Pending messages are assembled as if appended, and nothing is stored.
func TestContextWithPending(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	if _, err := mem.Append(ctx, seedKey, seed.History()[:4], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	next := seed.History()[4]
	w, err := mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 40}, chatmem.ContextOptions{Pending: []chatmem.Message{next}})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Messages) != 3 || w.Tokens != 36 || w.Dropped != 2 || w.Messages[2].Content != next.Content {
		t.Errorf("with pending: %d messages, %d tokens, %d dropped; want 3, 36, 2 ending with the pending one", len(w.Messages), w.Tokens, w.Dropped)
	}
	if conv, _ := mem.Store().Conversation(ctx, seedKey); conv.LastSeq != 4 {
		t.Errorf("LastSeq = %d after a context read with pending, want 4 (nothing stored)", conv.LastSeq)
	}
	_, err = mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 40}, chatmem.ContextOptions{Pending: []chatmem.Message{{Role: chatmem.RoleTool, ToolCallID: "x", Content: "y"}}})
	if !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("an orphan pending tool result: error = %v, want ErrInvalid", err)
	}
}

// TestContextReserve: messages sent along but not stored come off the
// budget, counted with the conversation's tokenizer; a reserve that takes
// the whole budget, or an invalid one, is an error.
func TestContextReserve(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "reserve"}
	for i := range 20 {
		msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d about the order", i)}, {Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d", i)}}
		if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	prompt := chatmem.Message{Role: chatmem.RoleSystem, Content: "You are a careful assistant who answers in full sentences."}
	n, err := tokenizer.Estimate{}.Count(ctx, prompt)
	if err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 100}
	plain, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{Reserve: []chatmem.Message{prompt}})
	if err != nil {
		t.Fatal(err)
	}
	if w.Reserved != n || w.Tokens+w.Reserved > p.Budget || len(w.Messages) >= len(plain.Messages) || plain.Reserved != 0 {
		t.Errorf("reserve of %d tokens: window %d tokens + reserved %d, %d messages (without: %d tokens, %d messages)",
			n, w.Tokens, w.Reserved, len(w.Messages), plain.Tokens, len(plain.Messages))
	}
	if _, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: n}, chatmem.ContextOptions{Reserve: []chatmem.Message{prompt}}); !errors.Is(err, chatmem.ErrBudgetTooSmall) {
		t.Errorf("a reserve taking the whole budget: %v, want ErrBudgetTooSmall", err)
	}
	if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{Reserve: []chatmem.Message{{Role: "wizard", Content: "x"}}}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("an invalid reserve message: %v, want ErrInvalid", err)
	}
}
