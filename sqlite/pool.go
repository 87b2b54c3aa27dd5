package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// pool is a connection pool with the statements prepared on it. SQLite
// spends a good part of a small statement's time parsing and planning it,
// and the store runs the same few statements all the time, so Open prepares
// each once per pool (database/sql then prepares it once per connection, on
// the connection that runs it).
type pool struct {
	db    *sql.DB
	stmts map[string]*sql.Stmt // set by prepare, read-only after Open
}

// prepare prepares queries on the pool. It must run before the pool's
// first transaction: a transaction holds the write pool's only connection,
// which preparing would wait for.
func (p *pool) prepare(ctx context.Context, queries ...string) error {
	if p.stmts == nil {
		p.stmts = make(map[string]*sql.Stmt, len(queries))
	}
	for _, q := range queries {
		st, err := p.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		p.stmts[q] = st
	}
	return nil
}

// prepared returns the pool's statement for query.
func (p *pool) prepared(query string) (*sql.Stmt, error) {
	st, ok := p.stmts[query]
	if !ok {
		return nil, fmt.Errorf("sqlite: statement not prepared on this pool: %q", query)
	}
	return st, nil
}

// row runs a query of at most one row outside a transaction.
func (p *pool) row(ctx context.Context, query string, args ...any) scanner {
	st, err := p.prepared(query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// query runs a query outside a transaction.
func (p *pool) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := p.prepared(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (p *pool) close() error {
	var errs []error
	for _, st := range p.stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(append(errs, p.db.Close())...)
}

// tx is one transaction on a pool, running the pool's prepared statements.
type tx struct {
	ctx context.Context
	tx  *sql.Tx
	p   *pool
	// later, in an append the committer groups, collects the index rows
	// the append leaves to the end of its group (see tx.index); nil
	// elsewhere.
	later *[]indexRow
	// stmts, when set, caches the pool's statements bound to tx (the
	// committer's, for the group's writes); nil binds them anew each run.
	stmts map[string]*sql.Stmt
	// wrote, when set, is set once a statement that may write ran (any but
	// a SELECT): the committer runs an append without a savepoint, and
	// must know whether a failed one left anything to undo.
	wrote *bool
}

func (t tx) stmt(query string) (*sql.Stmt, error) {
	if t.wrote != nil && !strings.HasPrefix(query, "SELECT") {
		*t.wrote = true
	}
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.p.prepared(query)
	if err != nil {
		return nil, err
	}
	st = t.tx.StmtContext(t.ctx, st)
	if t.stmts != nil {
		t.stmts[query] = st
	}
	return st, nil
}

func (t tx) exec(query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func (t tx) row(query string, args ...any) scanner {
	st, err := t.stmt(query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(t.ctx, args...)
}

func (t tx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

// scanner is a *sql.Row, or an errRow for a statement that failed to
// prepare.
type scanner interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
