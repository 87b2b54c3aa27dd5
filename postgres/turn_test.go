package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkTurn is issue 18's turn on PostgreSQL, with its floor beside
// it:
//
//	memory/...   storetest.BenchmarkTurn: Memory.Append + Memory.Context
//	             per turn (n=N), the context read alone (read/n=N)
//	floor/n=N    raw SQL: one INSERT of the message and one SELECT of the
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

// sqlFloor makes a table of messages in s's schema, keyed by conversation
// and seq, fills one conversation with n of the benchmark's messages, and
// returns the floor of a turn on it.
func sqlFloor(b *testing.B, s *postgres.Store, n int) storetest.TurnFloor {
	ctx := context.Background()
	table := pgx.Identifier{s.Schema(), "floor"}.Sanitize()
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE `+table+` (conv bigint NOT NULL, seq bigint NOT NULL, role text NOT NULL,
		content bytea NOT NULL, tokens bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (conv, seq))`); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO `+table+` (conv, seq, role, content, tokens)
		SELECT 1, i, CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END, convert_to(repeat('x', 200), 'UTF8'), 52
		FROM generate_series(1, $1::bigint) AS i`, n); err != nil {
		b.Fatal(err)
	}
	// The table gets its statistics now, as autovacuum would give it (and
	// a server run with autovacuum off never does): without them the
	// planner guesses that conv = 1 matches few rows, and reads every row
	// of the conversation and sorts them (a bitmap scan and a top-N sort)
	// instead of 64 backwards along the primary key, so at n=1000 the
	// floor took 1 to 3 ms, more than the store's turn, and flattered it.
	if _, err := s.Pool().Exec(ctx, `ANALYZE `+table); err != nil {
		b.Fatal(err)
	}
	insert := `INSERT INTO ` + table + ` (conv, seq, role, content, tokens) VALUES (1, $1, 'user', $2, $3)`
	read := `SELECT seq, role, content, tokens, created_at FROM ` + table + ` WHERE conv = 1 ORDER BY seq DESC LIMIT 64`
	seq := n
	return func(ctx context.Context, i int, content string) error {
		seq++
		batch := &pgx.Batch{}
		batch.Queue(insert, seq, []byte(content), len(content)/4)
		batch.Queue(read)
		br := s.Pool().SendBatch(ctx, batch)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return err
		}
		got := 0
		for rows.Next() {
			got++
		}
		rows.Close()
		if err := br.Close(); err != nil {
			return err
		}
		if got != 64 {
			return fmt.Errorf("floor read %d rows, want 64", got)
		}
		return nil
	}
}
