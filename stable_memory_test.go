package chatmem_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/sqlite"
)

// TestMemoryCacheStable: on SQLite, turn after turn with replies between,
// Memory's cache-stable window (through Turn and through Context, in two
// processes, one with a tail cache and one without) is the one Apply
// gives over the whole stored conversation: where it starts depends on
// the stored conversation alone, so every replica sends the same bytes,
// and its front stays put between its moves.
func TestMemoryCacheStable(t *testing.T) {
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "chatmem.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mem := newCachedMemory(t, store, 0)
	other := newCachedMemory(t, store, -1) // another process, no tail cache
	key := chatmem.Key{Tenant: "acme", ID: "stable"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 300, Cache: chatmem.CacheStable}
	mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleSystem, Content: "You are ShopBot."})
	var prevStart int64
	moves := 0
	for i := range 80 {
		q := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("where is my order? ", 1+i%5))}
		_, w, err := mem.Turn(ctx, key, []chatmem.Message{q}, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		all, err := other.Messages(ctx, key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := chatmem.Apply(p, all)
		if err != nil {
			t.Fatal(err)
		}
		if got, w2 := seqsOf(w.Messages), seqsOf(want.Messages); !slices.Equal(got, w2) || w.Tokens != want.Tokens {
			t.Fatalf("turn %d: Turn's window %v (%d tokens), want Apply's %v (%d)", i, got, w.Tokens, w2, want.Tokens)
		}
		ow, err := other.Context(ctx, key, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seqsOf(ow.Messages), seqsOf(w.Messages)) {
			t.Fatalf("turn %d: the other process's window %v, want %v", i, seqsOf(ow.Messages), seqsOf(w.Messages))
		}
		if w.Tokens > p.Budget || w.Messages[1].Role != chatmem.RoleUser {
			t.Fatalf("turn %d: %d tokens, first after the system prompt %s", i, w.Tokens, w.Messages[1].Role)
		}
		if start := w.Messages[1].Seq; start != prevStart {
			moves++
			prevStart = start
		}
		mustAppend(t, mem, key, chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d: it ships tomorrow.", i)})
	}
	if moves < 3 || moves > 40 {
		t.Errorf("the window's start moved %d times in 80 turns, want it to move in steps (3 to 40)", moves)
	}
}

func seqsOf(msgs []chatmem.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}
