package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/postgresfloor"
	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkChatTurn is a chat turn on PostgreSQL as users make it, the
// reply appended between turns (storetest.BenchmarkChatTurn), against
// postgresfloor's floor: one INSERT of the user's message and the SELECT
// of the newest 64 rows in one batch, then the reply's INSERT. The
// server's time is pg_stat_statements', where the server keeps it.
func BenchmarkChatTurn(b *testing.B) {
	storetest.BenchmarkChatTurn(b, []int{1000, 100000}, chatmem.Options{Counter: tokenizer.Estimate{}},
		func(tb testing.TB) *postgres.Store { return open(tb, newSchema(tb)) }, chatFloor, chatClock)
}

// TestChatTurn runs BenchmarkChatTurn's measurement small, for its
// structure: every way's count of turns, and every ratio finite and
// positive.
func TestChatTurn(t *testing.T) {
	storetest.ChatTurn(t, []int{60}, 30, chatmem.Options{Counter: tokenizer.Estimate{}},
		func(tb testing.TB) *postgres.Store { return open(tb, newSchema(tb)) }, chatFloor, chatClock)
}

func chatFloor(ctx context.Context, s *postgres.Store, n int, content string) (loadtest.ChatFloor, error) {
	return postgresfloor.New(ctx, s.Pool(), s.Schema(), n, content)
}

// chatClock is pg_stat_statements' clock, or nil (wall time only) where
// the server does not keep it.
func chatClock(tb testing.TB, s *postgres.Store) loadtest.ServerClock {
	if _, err := postgresfloor.ServerTime(tb.Context(), s.Pool()); errors.Is(err, postgresfloor.ErrNoStatements) {
		tb.Logf("no server time: %v", err)
		return nil
	} else if err != nil {
		tb.Fatal(err)
	}
	return func(ctx context.Context) (time.Duration, error) { return postgresfloor.ServerTime(ctx, s.Pool()) }
}
