package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/postgresfloor"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkTurn is a chat turn on PostgreSQL, with its floor beside
// it:
//
//	memstore/... storetest.BenchmarkTurn: Memory.Append + Memory.Context
//	             per turn (n=N), the context read alone (read/n=N)
//	floor/n=N    raw SQL (postgresfloor): one INSERT of the message and one SELECT of the
//	             newest 64 by primary key, sent as one batch: one round
//	             trip, one implicit transaction, committed with the
//	             server's durability settings (synchronous_commit as
//	             configured), as the store's appends are
//	vs-floor/n=N storetest.BenchmarkTurnFloor: Memory.Turn and the floor
//	             alternating in one loop, and a new process's first turn
//	             (Open: a new pool), with their ratios
func BenchmarkTurn(b *testing.B) {
	sizes := []int{1000, 100000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	b.Run("memory", func(b *testing.B) {
		storetest.BenchmarkTurn(b, func(b *testing.B) chatmem.Store { return open(b, newSchema(b)) }, opts, sizes)
	})
	storetest.BenchmarkTurnVsFloor(b, sizes, opts, func(b *testing.B) *postgres.Store { return open(b, newSchema(b)) }, sqlFloor,
		func(b *testing.B, s *postgres.Store) chatmem.Store {
			s2, err := postgres.Open(b.Context(), testenv.PostgresURL(), postgres.Options{Schema: s.Schema()})
			if err != nil {
				b.Fatal(err)
			}
			return s2
		})
}

// sqlFloor is postgresfloor's floor in s's schema, of n messages of the
// benchmark's first content, dropped when b ends.
func sqlFloor(b *testing.B, s *postgres.Store, n int) storetest.TurnFloor {
	f, err := postgresfloor.New(b.Context(), s.Pool(), s.Schema(), n, storetest.TurnContent(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Drop(context.Background()) })
	return f.Turn
}

// TestTurnRoundTrips traces what Memory.Turn sends to PostgreSQL: a new
// process's first turn on a conversation (a store on a new pool, a new
// Memory) is one round trip, a batch of the append and the reads of the
// system messages and the tail (AppendTail), with no connection made and
// no statement prepared (New prepared them); a steady turn (the tail cache
// holds the conversation) is one statement, the append.
func TestTurnRoundTrips(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema)
	key := chatmem.Key{Tenant: "t", ID: "round-trips"}
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: storetest.TurnBudget}
	first := []chatmem.Message{{Role: chatmem.RoleSystem, Content: "Be brief.", Tokens: 3}}
	if _, err := s.Append(ctx, key, first, chatmem.AppendOptions{Tokenizer: tokenizer.Estimate{}.Name()}); err != nil {
		t.Fatal(err)
	}
	turn := func(mem *chatmem.Memory, i int) chatmem.Window {
		t.Helper()
		msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: storetest.TurnContent(i)}}
		_, w, err := mem.Turn(ctx, key, msg, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
		if err != nil || len(w.Messages) == 0 {
			t.Fatalf("Turn: %d messages, %v", len(w.Messages), err)
		}
		return w
	}
	mem, err := chatmem.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		turn(mem, i)
	}

	tracer := &tripTracer{names: postgres.StatementNames(schema)}
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s2, err := postgres.New(ctx, pool, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	mem2, err := chatmem.New(s2, opts)
	if err != nil {
		t.Fatal(err)
	}
	tracer.reset()
	w := turn(mem2, 200)
	if want := []string{"batch appendExisting system tail"}; !slices.Equal(tracer.trips, want) {
		t.Errorf("first turn of a new store: round trips %q, want %q", tracer.trips, want)
	}
	if w.Messages[0].Role != chatmem.RoleSystem {
		t.Errorf("first turn of a new store: window starts with a %s message, want the system message", w.Messages[0].Role)
	}
	tracer.reset()
	turn(mem2, 201)
	if want := []string{"appendExisting"}; !slices.Equal(tracer.trips, want) {
		t.Errorf("second turn of a new store: round trips %q, want %q", tracer.trips, want)
	}
}

// tripTracer records what a pool sends: each statement (by its name in
// names, or its first words), each batch ("batch" and its statements),
// each prepare and each connection made.
type tripTracer struct {
	names map[string]string
	mu    sync.Mutex
	trips []string
}

func (tr *tripTracer) add(s string) {
	tr.mu.Lock()
	tr.trips = append(tr.trips, s)
	tr.mu.Unlock()
}

func (tr *tripTracer) reset() {
	tr.mu.Lock()
	tr.trips = nil
	tr.mu.Unlock()
}

func (tr *tripTracer) name(sql string) string {
	if n, ok := tr.names[sql]; ok {
		return n
	}
	f := strings.Fields(sql)
	return strings.Join(f[:min(len(f), 3)], " ")
}

func (tr *tripTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	tr.add(tr.name(data.SQL))
	return ctx
}

func (tr *tripTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tr *tripTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	names := []string{"batch"}
	for _, q := range data.Batch.QueuedQueries {
		names = append(names, tr.name(q.SQL))
	}
	tr.add(strings.Join(names, " "))
	return ctx
}

func (tr *tripTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (tr *tripTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (tr *tripTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, data pgx.TracePrepareStartData) context.Context {
	tr.add("prepare " + tr.name(data.SQL))
	return ctx
}

func (tr *tripTracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

func (tr *tripTracer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	tr.add("connect")
	return ctx
}

func (tr *tripTracer) TraceConnectEnd(context.Context, pgx.TraceConnectEndData) {}

// TestAppendTailExisting checks AppendTail's one-batch path, an append to a
// live conversation without an idempotency key (storetest's AppendTail
// tests mostly take the transaction, with their keys): what it reads is
// what System and Tail read right after it, under token and turn queries.
func TestAppendTailExisting(t *testing.T) {
	ctx := context.Background()
	s := open(t, newSchema(t))
	key := chatmem.Key{Tenant: "t", ID: "append-tail"}
	var msgs []chatmem.Message
	for i := range 40 {
		m := chatmem.Message{Role: storetest.TurnRole(i), Content: storetest.TurnContent(i), Tokens: 10 + i}
		if i == 0 || i == 21 {
			m.Role = chatmem.RoleSystem
		}
		msgs = append(msgs, m)
	}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{Tokenizer: "estimate"}); err != nil {
		t.Fatal(err)
	}
	for i, q := range []chatmem.TailQuery{{Tokens: 100}, {Tokens: 1}, {Tokens: 100000}, {Turns: 1}, {Turns: 4}, {Turns: 1000}, {Tokens: 200, Turns: 3}} {
		batch := []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprint("turn ", i), Tokens: 5}}
		res, read, err := s.AppendTail(ctx, key, batch, chatmem.AppendOptions{ExpectedTokenizer: "estimate"}, q)
		if err != nil {
			t.Fatalf("AppendTail(%+v): %v", q, err)
		}
		system, err := s.System(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		tail, err := s.Tail(ctx, key, q)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(read.System), fmt.Sprint(system); got != want {
			t.Errorf("AppendTail(%+v): system messages\n%s\nwant\n%s", q, got, want)
		}
		if got, want := fmt.Sprint(read.Recent), fmt.Sprint(tail); got != want {
			t.Errorf("AppendTail(%+v): tail\n%s\nwant\n%s", q, got, want)
		}
		if n := len(read.Recent); n > 0 && read.Recent[n-1].Seq != res.Conversation.LastSeq {
			t.Errorf("AppendTail(%+v): tail ends at %d, want the append's last message %d", q, read.Recent[n-1].Seq, res.Conversation.LastSeq)
		}
	}
}
