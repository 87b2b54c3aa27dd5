package postgres

import (
	"context"
	"sync/atomic"
	"time"

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
// which pgx's Query then uses as they are, and runs each once for a
// conversation that cannot exist (an empty key, which ValidateID refuses),
// so that the backend also loads what planning them reads (the indexes,
// the statistics): that write finds no row and writes nothing. A failure
// is not an error of the connection (what it did not do is done on first
// use instead), so prepare reports none.
func (s *Store) prepare(ctx context.Context, conn *pgx.Conn) {
	for _, sql := range s.hotStatements() {
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return
		}
	}
	now := s.now()
	var none []string
	runs := [][]any{
		{s.q.appendExisting, "", "", nil, now, nil, "", "", 0, 0, 0, 0,
			[]int64{}, none, [][]byte{}, none, []int64{}, []int64{}, none, none, []int64{}, []time.Time{}, none, none, []int64{}},
		{s.q.conversation, "", "", now},
		{s.q.conversationSince, "", "", now, 0, 1},
		{s.q.tail, "", "", now, 4000, 0},
		{s.q.system, "", "", now},
		{s.q.rangeAfter, "", "", now, 0, 1},
	}
	for _, r := range runs {
		rows, err := conn.Query(ctx, r[0].(string), r[1:]...)
		if err != nil {
			return
		}
		rows.Close()
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
