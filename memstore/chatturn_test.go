package memstore_test

import (
	"context"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkChatTurn is a chat turn on the in-process store as users make
// it, the reply appended between turns (storetest.BenchmarkChatTurn),
// against a bare Go loop (loadtest.ChatLoopFloor): the message appended
// to a slice, the newest messages that fit the budget copied out, then
// the reply appended.
func BenchmarkChatTurn(b *testing.B) {
	storetest.BenchmarkChatTurn(b, []int{1000, 100000, 1000000}, chatmem.Options{Counter: tokenizer.Estimate{}},
		func(testing.TB) *memstore.Store { return memstore.New() }, chatFloor, nil)
}

// TestChatTurn runs BenchmarkChatTurn's measurement small, for its
// structure: every way's count of turns, and every ratio finite and
// positive.
func TestChatTurn(t *testing.T) {
	storetest.ChatTurn(t, []int{60}, 30, chatmem.Options{Counter: tokenizer.Estimate{}},
		func(testing.TB) *memstore.Store { return memstore.New() }, chatFloor, nil)
}

func chatFloor(ctx context.Context, _ *memstore.Store, n int, content string) (loadtest.ChatFloor, error) {
	return loadtest.ChatLoopFloor(tokenizer.Estimate{}, storetest.TurnBudget)(ctx, n, content)
}
