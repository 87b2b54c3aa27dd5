package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/sqlitefloor"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkTurn is a chat turn on SQLite against its floor, and a new
// process's first turn against a steady one:
//
//	floor/n=N    the floor alone
//	vs-floor/n=N storetest.BenchmarkTurnFloor: Memory.Turn, Append +
//	             Context and the floor alternating in one loop, and every
//	             25th iteration a first turn through a store opened again
//	             on the file (Open: another process's connections,
//	             schema check and statements)
//
// The floor is sqlitefloor's: the job done raw with the same driver and
// durability (WAL, synchronous=FULL) on a table of its own in another file
// beside the store's: one transaction that INSERTs the message and SELECTs
// the newest 64 by primary key, committed. (storetest.BenchmarkTurn on SQLite, with and
// without the tail cache, is the root package's BenchmarkTurn.)
func BenchmarkTurn(b *testing.B) {
	sizes := []int{1000, 100000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	storetest.BenchmarkTurnVsFloor(b, sizes, opts, func(b *testing.B) *Store { return open(b, filepath.Join(b.TempDir(), "chatmem.db")) },
		func(b *testing.B, s *Store, n int) storetest.TurnFloor {
			f, err := sqlitefloor.New(b.Context(), s.Path(), n, storetest.TurnContent(0))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { f.Drop(context.Background()) })
			return f.Turn
		},
		func(b *testing.B, s *Store) chatmem.Store {
			s2, err := Open(b.Context(), s.path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s2
		})
}

// TestFirstTurnOneTransaction checks that a new process's first turn on an
// existing conversation (a store opened again, a new Memory) is one write
// transaction and reads nothing through the read pool: AppendTail reads
// the system messages and the tail in the append's transaction. The read
// pool is closed before the turn, so any read through it would fail it;
// the window must be the one Context reads afterwards.
func TestFirstTurnOneTransaction(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "chatmem.db")
	s := open(t, path)
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	filler, err := chatmem.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "acme", ID: "first-turn"}
	if _, err := filler.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleSystem, Content: "Be brief."}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := filler.Append(ctx, key, []chatmem.Message{
			{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("why ", 10))},
			{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("because ", 20))},
		}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	s2 := open(t, path)
	mem, err := chatmem.New(s2, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.r.db.Close(); err != nil { // Close closes it again, which returns nil
		t.Fatal(err)
	}
	groups := s2.commit.groups.Load()
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}
	msg := chatmem.Message{Role: chatmem.RoleUser, Content: "the first turn of this process"}
	res, w, err := mem.Turn(ctx, key, []chatmem.Message{msg}, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatalf("first Turn with the read pool closed: %v", err)
	}
	if n := s2.commit.groups.Load() - groups; n != 1 {
		t.Errorf("first Turn committed %d transactions, want 1", n)
	}
	if len(w.Messages) == 0 {
		t.Fatal("first Turn's window is empty")
	}
	if got := w.Messages[len(w.Messages)-1]; got.Seq != res.Conversation.LastSeq {
		t.Errorf("first Turn's window ends with seq %d, want %d", got.Seq, res.Conversation.LastSeq)
	}
	if w.Messages[0].Role != chatmem.RoleSystem {
		t.Errorf("first Turn's window does not start with the system message: %+v", w.Messages)
	}
	want, err := filler.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(w.Messages, want.Messages, func(a, b chatmem.Message) bool {
		return a.Seq == b.Seq && a.Content == b.Content && a.Tokens == b.Tokens
	}) || w.Tokens != want.Tokens || w.Dropped != want.Dropped {
		t.Errorf("first Turn's window: %d messages, %d tokens, %d dropped; Context reads %d, %d, %d",
			len(w.Messages), w.Tokens, w.Dropped, len(want.Messages), want.Tokens, want.Dropped)
	}
}
