package postgres

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// hotStatements are the statements of a turn (Memory.Turn, Append and
// Context), which each connection prepares before its first use of them:
// pgx prepares a statement on a connection the first time it runs there,
// a round trip each, and the server loads the tables' and indexes'
// descriptions into the new backend's caches as it plans them. Done when
// the connection is made, that is off the first turn.
func (s *Store) hotStatements() []string {
	return []string{s.q.appendExisting, s.q.conversation, s.q.conversationSince, s.q.tail, s.q.system, s.q.rangeAfter}
}

// prepare prepares the hot statements on conn, under their SQL as names,
// which pgx's Query then uses as they are. A failure is not an error of
// the connection (the statement is prepared on its first use instead), so
// prepare reports none.
func (s *Store) prepare(ctx context.Context, conn *pgx.Conn) {
	for _, sql := range s.hotStatements() {
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return
		}
	}
}

// warm prepares the hot statements on one of the pool's connections (the
// one the migrations used, which the first turn then gets), after the
// schema exists.
func (s *Store) warm(ctx context.Context) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	s.prepare(ctx, conn.Conn())
}

// warmer is the pool's AfterConnect for the pools Open makes: once the
// store is ready (its schema migrated), every new connection prepares the
// hot statements.
type warmer struct{ store atomic.Pointer[Store] }

func (w *warmer) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	if s := w.store.Load(); s != nil {
		s.prepare(ctx, conn)
	}
	return nil
}
