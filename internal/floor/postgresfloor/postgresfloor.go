// Package postgresfloor is the raw floor of a chat turn on PostgreSQL, the
// yardstick of the PostgreSQL store's turn in its benchmarks and in
// chatmem bench: the turn's job done in plain SQL on the store's pool, on
// a table of its own.
package postgresfloor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatmem/chatmem"
)

// Floor is the floor of a turn on one table of messages. Make one with
// New; it is not safe for concurrent use.
type Floor struct {
	pool         *pgxpool.Pool
	table        string
	insert, read string
	reply        string
	seq          int
}

// floorRead is how many of the newest rows a floor turn reads back.
const floorRead = 64

// New makes a table of messages keyed by conversation and seq in a store's
// schema (with a random name; Drop drops it), fills one conversation with
// n messages of content, alternately of a user and an assistant, gives the
// table its statistics (ANALYZE) and returns the floor of a turn on it.
// pool and schema are the store's (postgres.Store's Pool and Schema). It
// wraps chatmem.ErrInvalid for a negative n and returns the database's
// errors.
func New(ctx context.Context, pool *pgxpool.Pool, schema string, n int, content string) (*Floor, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: a PostgreSQL turn floor of %d messages", chatmem.ErrInvalid, n)
	}
	name := "turn_floor_" + strings.ToLower(rand.Text()[:10])
	table := pgx.Identifier{schema, name}.Sanitize()
	f := &Floor{pool: pool, table: table, seq: n,
		insert: `INSERT INTO ` + table + ` (conv, seq, role, content, tokens) VALUES (1, $1, 'user', $2, $3)`,
		reply:  `INSERT INTO ` + table + ` (conv, seq, role, content, tokens) VALUES (1, $1, 'assistant', $2, $3)`,
		read:   fmt.Sprintf(`SELECT seq, role, content, tokens, created_at FROM %s WHERE conv = 1 ORDER BY seq DESC LIMIT %d`, table, floorRead)}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (conv bigint NOT NULL, seq bigint NOT NULL, role text NOT NULL,
		content bytea NOT NULL, tokens bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (conv, seq))`); err != nil {
		return nil, fmt.Errorf("postgres: create the turn floor's table: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (conv, seq, role, content, tokens)
		SELECT 1, i, CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END, $2::bytea, $3
		FROM generate_series(1, $1::bigint) AS i`, n, []byte(content), len(content)/4); err != nil {
		_ = f.Drop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgres: fill the turn floor: %w", err)
	}
	// The table gets its statistics now, as autovacuum would give it (and
	// a server run with autovacuum off never does): without them the
	// planner guesses that conv = 1 matches few rows, and reads every row
	// of the conversation and sorts them (a bitmap scan and a top-N sort)
	// instead of 64 backwards along the primary key, so at n=1000 the
	// floor took 1 to 3 ms, more than the store's turn, and flattered it.
	if _, err := pool.Exec(ctx, `ANALYZE `+table); err != nil {
		_ = f.Drop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgres: analyze the turn floor: %w", err)
	}
	return f, nil
}

// Turn is one turn of the floor: one INSERT of a user message of content
// and one SELECT of the newest 64 rows by primary key, sent as one batch:
// one round trip, one implicit transaction, committed with the server's
// durability settings (synchronous_commit as configured), as the store's
// appends are. It fails if it reads back fewer than 64 rows, or than the
// table holds.
func (f *Floor) Turn(ctx context.Context, content string) error {
	f.seq++
	batch := &pgx.Batch{}
	batch.Queue(f.insert, f.seq, []byte(content), len(content)/4)
	batch.Queue(f.read)
	br := f.pool.SendBatch(ctx, batch)
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
	if err := errors.Join(rows.Err(), br.Close()); err != nil {
		return err
	}
	if want := min(floorRead, f.seq); got != want {
		return fmt.Errorf("postgres: the turn floor read %d rows, want %d", got, want)
	}
	return nil
}

// Reply is the rest of a chat turn on the floor: one INSERT of an
// assistant message of content, the reply appended before the next turn.
func (f *Floor) Reply(ctx context.Context, content string) error {
	f.seq++
	_, err := f.pool.Exec(ctx, f.reply, f.seq, []byte(content), len(content)/4)
	return err
}

// ErrNoStatements is ServerTime's error when the server does not keep
// pg_stat_statements (the module is not in shared_preload_libraries, or
// the extension is not created in the database).
var ErrNoStatements = errors.New("postgres: pg_stat_statements is not available (shared_preload_libraries and CREATE EXTENSION)")

// ServerTime returns the time the server has spent executing statements
// in pool's database since pg_stat_statements was last reset (its
// total_exec_time, summed). It is every client's, so a difference of two
// readings is a benchmark's only on a database nothing else uses
// meanwhile. It wraps ErrNoStatements where pg_stat_statements is not
// available.
func ServerTime(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	var ms float64
	err := pool.QueryRow(ctx, `SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&ms)
	if err != nil {
		var pgErr *pgconn.PgError
		// undefined_table: no extension; object_not_in_prerequisite_state:
		// not loaded at the server's start.
		if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "55000") {
			return 0, fmt.Errorf("%w: %s", ErrNoStatements, pgErr.Message)
		}
		return 0, err
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// Drop drops the floor's table. The pool stays open: it is the store's.
func (f *Floor) Drop(ctx context.Context) error {
	_, err := f.pool.Exec(ctx, `DROP TABLE IF EXISTS `+f.table)
	return err
}
