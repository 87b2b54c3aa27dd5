package redis

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/redisfloor"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkTurn is a chat turn on Redis, with its floor beside it:
//
//	memstore/... storetest.BenchmarkTurn: Memory.Append + Memory.Context
//	             per turn (n=N), the context read alone (read/n=N)
//	floor/n=N    raw Redis (redisfloor): RPUSH of the message's record and
//	             LRANGE of the newest 64, pipelined (one round trip)
//	vs-floor/n=N storetest.BenchmarkTurnFloor: Memory.Turn and the floor
//	             alternating in one loop, and a new process's first turn
//	             (a new client), with their ratios
func BenchmarkTurn(b *testing.B) {
	sizes := []int{1000, 100000}
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	dial := dialer(b)
	b.Run("memory", func(b *testing.B) {
		storetest.BenchmarkTurn(b, func(b *testing.B) chatmem.Store { return newTestStore(b, dial) }, opts, sizes)
	})
	// Another process opens the store as cmd/chatmem does.
	storetest.BenchmarkTurnVsFloor(b, sizes, opts, func(b *testing.B) *Store { return newTestStore(b, dial) }, redisFloor,
		func(b *testing.B, s *Store) chatmem.Store {
			s2, err := Open(b.Context(), testenv.RedisURL(), Options{Prefix: s.Prefix()})
			if err != nil {
				b.Fatal(err)
			}
			return s2
		})
}

// redisFloor is redisfloor's floor beside s's keys, of n messages of the
// benchmark's first content, dropped when b ends.
func redisFloor(b *testing.B, s *Store, n int) storetest.TurnFloor {
	f, err := redisfloor.New(b.Context(), s.Client(), s.Prefix(), n, storetest.TurnContent(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Drop(context.Background()) })
	return f.Turn
}

// TestTurnRoundTrips counts what Memory.Turn sends to Redis: a steady
// turn (the tail cache holds the conversation) is one round trip, the
// append script with the tenant's index behind it; so is a new process's
// first turn (a store from Open), whose append script reads the system
// messages and finds the tail (AppendTail), with the LRANGE of the tail
// and the re-read of meta behind it, and no dial (Open made the
// connection) nor NOSCRIPT resend.
func TestTurnRoundTrips(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, dialer(t))
	key := chatmem.Key{Tenant: "t", ID: "round-trips"}
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: storetest.TurnBudget}
	turn := func(mem *chatmem.Memory, i int) {
		t.Helper()
		msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: storetest.TurnContent(i)}}
		if _, w, err := mem.Turn(ctx, key, msg, chatmem.AppendOptions{}, p, chatmem.ContextOptions{}); err != nil || len(w.Messages) == 0 {
			t.Fatalf("Turn: %d messages, %v", len(w.Messages), err)
		}
	}
	mem, err := chatmem.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		turn(mem, i)
	}
	h := &tripCounter{}
	s.client.AddHook(h)
	turn(mem, 200)
	if want := []string{"evalsha zadd"}; !slices.Equal(h.trips, want) {
		t.Errorf("steady turn: round trips %q, want %q", h.trips, want)
	}

	s2, err := Open(ctx, testenv.RedisURL(), Options{Prefix: s.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	h2 := &tripCounter{}
	s2.client.AddHook(h2)
	mem2, err := chatmem.New(s2, opts)
	if err != nil {
		t.Fatal(err)
	}
	turn(mem2, 201)
	if want := []string{"evalsha zadd lrange hmget"}; !slices.Equal(h2.trips, want) {
		t.Errorf("first turn of a new store: round trips %q, want %q", h2.trips, want)
	}
	h2.trips = nil
	turn(mem2, 202)
	if want := []string{"evalsha zadd"}; !slices.Equal(h2.trips, want) {
		t.Errorf("second turn of a new store: round trips %q, want %q", h2.trips, want)
	}
}

// tripCounter records each round trip a client makes: a dial, or the
// names of the commands sent together.
type tripCounter struct {
	mu    sync.Mutex
	trips []string
}

func (h *tripCounter) add(s string) {
	h.mu.Lock()
	h.trips = append(h.trips, s)
	h.mu.Unlock()
}

func (h *tripCounter) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.add("dial")
		return next(ctx, network, addr)
	}
}

func (h *tripCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (h *tripCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		h.add(strings.Join(names, " "))
		return next(ctx, cmds)
	}
}
