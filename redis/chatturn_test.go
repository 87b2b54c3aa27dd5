package redis

import (
	"context"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/redisfloor"
	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkChatTurn is a chat turn on Redis as users make it, the reply
// appended between turns (storetest.BenchmarkChatTurn), against
// redisfloor's floor: RPUSH of the user's message and LRANGE of the
// newest 64, pipelined, then RPUSH of the reply. The server's time is
// INFO cpu's main-thread CPU: run it on a Redis server of its own.
func BenchmarkChatTurn(b *testing.B) {
	dial := dialer(b)
	storetest.BenchmarkChatTurn(b, []int{1000, 100000}, chatmem.Options{Counter: tokenizer.Estimate{}},
		func(tb testing.TB) *Store { return newTestStore(tb, dial) }, chatFloor, chatClock)
}

// TestChatTurn runs BenchmarkChatTurn's measurement small, for its
// structure: every way's count of turns, the server's time read and every
// ratio finite and positive.
func TestChatTurn(t *testing.T) {
	dial := dialer(t)
	storetest.ChatTurn(t, []int{60}, 30, chatmem.Options{Counter: tokenizer.Estimate{}},
		func(tb testing.TB) *Store { return newTestStore(tb, dial) }, chatFloor, chatClock)
}

func chatFloor(ctx context.Context, s *Store, n int, content string) (loadtest.ChatFloor, error) {
	return redisfloor.New(ctx, s.Client(), s.Prefix(), n, content)
}

func chatClock(_ testing.TB, s *Store) loadtest.ServerClock {
	return func(ctx context.Context) (time.Duration, error) { return redisfloor.ServerTime(ctx, s.Client()) }
}
