package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
)

// hotStatements are the statements of a turn (Memory.Turn, Append and
// Context; a first turn's AppendTail is appendExisting, system and tail in
// one batch), which each connection prepares before its first use of them:
// pgx prepares a statement on a connection the first time it runs there,
// a round trip each, and the server loads the tables' and indexes'
// descriptions into the new backend's caches as it plans and runs them.
// Done when the connection is made, that is off the first turn.
func (s *Store) hotStatements() []string {
	return []string{s.q.appendExisting, s.q.conversation, s.q.conversationSince, s.q.tail, s.q.system, s.q.rangeAfter}
}

// warmRuns is how many times prepare runs each hot statement: PostgreSQL
// plans a prepared statement afresh for each of its first five runs
// (plan_cache_mode auto) before it settles on a generic plan, so a
// connection whose statements ran fewer times plans them again on its
// first turns, which a steady turn does not.
const warmRuns = 6

// prepare prepares the hot statements on conn, under their SQL as names,
// which pgx's Query then uses as they are, and runs each warmRuns times,
// for real, on a conversation of its own in a transaction that it rolls
// back: the append stores a message, the reads read it,
// so that the backend loads everything a turn touches (the tables'
// indexes, which an insert opens only when it inserts a row; the
// statistics; the functions and types) and has its generic plans, all
// before the connection serves a request. The conversation's key has an
// empty tenant, which no caller's key has (chatmem.ValidateID), and the
// backend's process ID, so connections warming at once do not wait for
// each other; rolled back, it is never seen and nothing of it is kept
// but a number of the conversations' sequence. It costs three round
// trips (begin, one batch, rollback). It returns the first error; what
// it did not do is done on first use instead, so an error matters only if
// it closed the connection (see afterConnect).
func (s *Store) prepare(ctx context.Context, conn *pgx.Conn) error {
	for _, sql := range s.hotStatements() {
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return err
		}
	}
	now := dbTime(s.now())
	key := chatmem.Key{Tenant: "", ID: "warm-" + strconv.FormatUint(uint64(conn.PgConn().PID()), 10)}
	b, err := encodeBatch([]chatmem.Message{{Role: chatmem.RoleUser, Content: "warming up the statements of a turn", Tokens: 9}}, now)
	if err != nil {
		return err
	}
	// Numbered from 0, as appendExisting numbers its batches: every run
	// appends the same message after the last.
	var added chatmem.Conversation
	b.number(&added)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	batch := &pgx.Batch{}
	batch.Queue(strings.ReplaceAll(`INSERT INTO {s}.conversations (tenant, id, created_at, updated_at) VALUES ($1, $2, $3, $3)`,
		"{s}", pgx.Identifier{s.schema}.Sanitize()), key.Tenant, key.ID, now)
	for range warmRuns {
		batch.Queue(s.q.appendExisting, key.Tenant, key.ID, nil, now, nil, "", "",
			added.Tokens, added.SystemTokens, added.Turns, added.LastSeq,
			b.seq, b.role, b.content, b.name, b.cum, b.turn, b.toolCalls, b.toolCallID, b.tokens, b.createdAt, b.metadata, []byte(nil), nil)
		// A budget of fewer tokens than the conversation holds, and a
		// number of turns, so that the tail probes both of its indexes.
		batch.Queue(s.q.tail, key.Tenant, key.ID, now, 10, 1)
		batch.Queue(s.q.conversation, key.Tenant, key.ID, now)
		batch.Queue(s.q.conversationSince, key.Tenant, key.ID, now, 0, 2)
		batch.Queue(s.q.system, key.Tenant, key.ID, now)
		batch.Queue(s.q.rangeAfter, key.Tenant, key.ID, now, 0, 2)
	}
	return tx.SendBatch(ctx, batch).Close()
}

// warm prepares the hot statements on one of the pool's connections (the
// one the migrations used, which the first turn then gets), after the
// schema exists. A connection prepare leaves closed is dropped by
// Release.
func (s *Store) warm(ctx context.Context) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	_ = s.prepare(ctx, conn.Conn())
}

// warmer is the pool's AfterConnect for the pools Open makes: once the
// store is ready (its schema migrated), every new connection prepares the
// hot statements. A connection that the server or the network closed
// meanwhile is refused with the error that closed it (so the pool does not
// hand it out, and the caller sees chatmem.ErrUnavailable); any other
// failure leaves it as it is.
type warmer struct{ store atomic.Pointer[Store] }

func (w *warmer) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	if s := w.store.Load(); s != nil {
		if err := s.prepare(ctx, conn); err != nil && conn.IsClosed() {
			return err
		}
	}
	return nil
}
