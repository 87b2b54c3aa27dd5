package sqlite

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
)

// TestTailAgainstMemory appends random batches (users, assistants, system
// messages, zero-token messages) to conversations of both this store and
// the in-process one, and after each batch asks both for random tails (a
// budget, turns, or both): the runs must be the same messages. The tail's
// start is found here by a walk back along messages_seq (selectTailStart),
// there by a binary search over running totals.
func TestTailAgainstMemory(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "tail.db"))
	ref := memstore.New()
	ctx := t.Context()
	r := rand.New(rand.NewPCG(1, 2))
	roles := []chatmem.Role{chatmem.RoleUser, chatmem.RoleAssistant, chatmem.RoleSystem, chatmem.RoleUser, chatmem.RoleAssistant}
	seqs := func(ms []chatmem.Message) []int64 {
		out := []int64{}
		for _, m := range ms {
			out = append(out, m.Seq)
		}
		return out
	}
	for c := range 40 {
		key := chatmem.Key{Tenant: "t", ID: fmt.Sprint("c", c)}
		for n := r.IntN(40) + 1; n > 0; {
			batch := make([]chatmem.Message, min(r.IntN(3)+1, n))
			n -= len(batch)
			for j := range batch {
				tokens := r.IntN(6)
				if r.IntN(4) == 0 {
					tokens = 0
				}
				batch[j] = chatmem.Message{Role: roles[r.IntN(len(roles))], Content: "x", Tokens: tokens}
			}
			for _, st := range []chatmem.Store{s, ref} {
				if _, err := st.Append(ctx, key, batch, chatmem.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for range 30 {
				var q chatmem.TailQuery
				if r.IntN(3) > 0 {
					q.Tokens = r.IntN(60) + 1
				}
				if r.IntN(3) > 0 || q.Tokens == 0 {
					q.Turns = r.IntN(15) + 1
				}
				got, err := s.Tail(ctx, key, q)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Tail(ctx, key, q)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(seqs(got), seqs(want)) {
					t.Fatalf("%s Tail(%+v) = seqs %v, the memory store's %v", key, q, seqs(got), seqs(want))
				}
			}
		}
	}
}
