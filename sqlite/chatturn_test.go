package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/sqlitefloor"
	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkChatTurn is a chat turn on SQLite as users make it, the reply
// appended between turns (storetest.BenchmarkChatTurn), against
// sqlitefloor's floor: one transaction that INSERTs the user's message
// and SELECTs the newest 64 rows, then the reply's INSERT, each
// committed. SQLite runs in the process: wall time only.
func BenchmarkChatTurn(b *testing.B) {
	storetest.BenchmarkChatTurn(b, []int{1000, 100000}, chatmem.Options{Counter: tokenizer.Estimate{}}, openChat, chatFloor, nil)
}

// TestChatTurn runs BenchmarkChatTurn's measurement small, for its
// structure: every way's count of turns, and every ratio finite and
// positive.
func TestChatTurn(t *testing.T) {
	storetest.ChatTurn(t, []int{60}, 30, chatmem.Options{Counter: tokenizer.Estimate{}}, openChat, chatFloor, nil)
}

func openChat(tb testing.TB) *Store { return open(tb, filepath.Join(tb.TempDir(), "chatmem.db")) }

func chatFloor(ctx context.Context, s *Store, n int, content string) (loadtest.ChatFloor, error) {
	return sqlitefloor.New(ctx, s.Path(), n, content)
}
