// Package postgres is a chatmem.Store on PostgreSQL, through pgx's pool.
//
// All tables live in one schema (Options.Schema, default "chatmem"), created
// and migrated on open by the numbered SQL files embedded from migrations/.
// Migrations run in one transaction under an advisory lock, so any number of
// processes may open the same database at once.
//
// Layout: conversations holds one row per conversation with its running
// totals (last_seq, tokens, system_tokens, turns); messages holds one row per
// message keyed by (tenant, conv_id, seq), with cum, the running total of
// non-system tokens up to and including the message, and turn, the number of
// user messages up to and including it. Because cum and turn never decrease
// along seq, Tail finds where its window starts with one index probe
// (messages_cum or messages_user_turn) and reads the window as one range of
// the primary key: its cost follows the window, not the conversation.
//
// Each conversation's summary is one row of summaries; PutSummary's
// compare-and-set is a single conditional INSERT or UPDATE on covers_seq.
// facts keeps every value each fact key has had, numbered by version; the
// partial index facts_current holds the current ones, so Facts reads one
// index range in key order whatever the history. Summaries and facts are
// written under a lock on the conversation's row, and deleted with the
// conversation in the same transaction (Delete, Sweep, PurgeInactive, and
// an append that restarts an expired conversation).
//
// Appends are serialized per conversation by the lock on its conversations
// row (taken by an upsert, so creating and appending are one atomic step;
// an append to a live conversation without an idempotency key, the common
// one, takes it with the UPDATE of a single statement that also writes the
// messages, so it costs one round trip and one commit; AppendTail, a
// process's first turn on a conversation, sends that statement and the
// reads of the conversation's system messages and tail as one batch, one
// round trip and one implicit transaction, still under the row's lock):
// concurrent appenders, in any number of processes, never share a sequence
// number, and a batch is written in one transaction or not at all. The row
// lock is held until the commit's WAL flush, so one conversation takes as
// many appends per second as the disk takes flushes (a few hundred on
// ordinary disks); batches of messages are what scale, not concurrency on
// one conversation.
//
// Search (chatmem.Searcher): message_terms holds one row per posting,
// (conv, term, seq), for the terms chatmem.IndexTerms gives each non-system
// message, deleted with the conversation. The append does not write them,
// so that a turn writes only its messages and the conversation's row:
// conversations.terms_seq is the index's watermark, and IndexPending
// (chatmem.IndexCatcher, which Memory's worker calls every few messages)
// writes the postings of the messages past it and moves it on in one
// statement; Postings and UserPostings index what is left past it before
// they answer, so a message is found from the moment its append returned,
// and a crash only delays the indexing. conv is conversations.num, a number each
// conversation row gets, so that the conversation's key is not repeated in
// every posting. Its primary key orders a term's postings by seq, so
// Postings reads the newest ones before a seq with a backward index scan
// that stops at the limit, whatever the history's length. A GIN index over
// a tsvector, PostgreSQL's own full-text search, was measured and not used:
// it returns every match of a term, to be sorted by seq (or the planner
// walks seq backwards testing each message), so a search costs more as the
// conversation grows: in BenchmarkPostings, six terms on a million messages
// took seconds with GIN, and as long as on a thousand with message_terms.
// The price is space: about 90 bytes per posting, table and index, four to
// five times the size of the messages themselves for chat text (GIN would
// take about a sixth of that).
//
// Content is stored as bytea, so any content round-trips byte for byte, NUL
// included. PostgreSQL's text and jsonb cannot hold NUL (U+0000), so a
// message whose name, tool_call_id, tool calls or metadata contain one is
// refused with chatmem.ErrInvalid before anything is written. Timestamps are
// kept to the microsecond, PostgreSQL's precision: Append truncates them and
// returns what later reads return. Idempotency keys are stored as their
// SHA-256, so keys of any length and content are accepted.
//
// Arguments are checked before anything is read or written, with package
// storekit and the root package's validators, as every store checks them:
// a malformed key, tenant, user or fact name, a limit out of range and an
// empty search term wrap chatmem.ErrInvalid (see chatmem.Store). The
// methods' docs name only the refusals of their own.
//
// Expiry is checked on every read against Options.Now: an expired
// conversation is not found by any method, Delete included. Its rows stay on
// disk until Sweep (chatmem.Sweeper) removes them, or an append to the same
// ID starts the conversation afresh in their place.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatmem/chatmem"
)

// DefaultSchema is the schema a zero Options.Schema stands for.
const DefaultSchema = "chatmem"

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Schema is the PostgreSQL schema holding the store's tables; it is
	// created if missing. 1 to 63 characters from [a-z0-9_], starting with a
	// letter or underscore. Default DefaultSchema.
	Schema string
	// Now is the clock: reads check expiry against it, and appends with a
	// zero AppendOptions.Now use it. Nil: time.Now.
	Now func() time.Time
	// Tracer, if set, is the tracer of the connections Open makes
	// (pgx.ConnConfig.Tracer): to trace, time or count what the store
	// sends. It may also implement pgx.BatchTracer (a batch is one round
	// trip) and pgx.PrepareTracer (a statement a connection prepares on
	// its first use costs one more; Open's connections prepare a turn's
	// statements as they are made). New's pool carries its own.
	Tracer pgx.QueryTracer
}

// Store is a chatmem.Store on PostgreSQL. It is safe for concurrent use, by
// many goroutines and many processes sharing one database.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool // Close closes pool (Open made it)
	schema  string
	now     func() time.Time
	q       queries
	uq      userQueries
	sq      userSearchQueries // usersearch.go
	// eraseStep, if set (by tests), is called between DeleteUser's
	// transactions.
	eraseStep func()
}

var (
	_ chatmem.Store        = (*Store)(nil)
	_ chatmem.Sweeper      = (*Store)(nil)
	_ chatmem.Purger       = (*Store)(nil)
	_ chatmem.SummaryStore = (*Store)(nil)
	_ chatmem.FactStore    = (*Store)(nil)
	_ chatmem.TailAppender = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string, as pgxpool.ParseConfig accepts), applies the
// migrations, prepares a turn's statements on each connection as it is
// made (see hotStatements), indexes for search the messages stored before the search
// index existed (on the first open after the upgrade, 1000 messages per
// transaction), and returns a Store that owns the pool: Close closes it. It
// wraps chatmem.ErrInvalid for a bad URL or schema and
// chatmem.ErrUnavailable when the database cannot be reached. A URL may
// carry schema=NAME among its query options, which sets Options.Schema
// unless opts sets it (so several stores can share one database). The pool
// holds DefaultMaxConns connections unless the URL sets pool_max_conns.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	url, schema, err := cutSchemaOption(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: %w", chatmem.ErrInvalid, err)
	}
	if opts.Schema == "" {
		opts.Schema = schema
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: %w", chatmem.ErrInvalid, err)
	}
	poolDefaults(cfg, url)
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	var w warmer
	cfg.AfterConnect = w.afterConnect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap(ctx, "postgres: open", err)
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	w.store.Store(s)
	return s, nil
}

// cutSchemaOption removes the schema=NAME query option from a postgres://
// URL and returns it; a key=value connection string is returned as it is.
func cutSchemaOption(raw string) (string, string, error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return raw, "", nil
	}
	u, err := neturl.Parse(raw)
	if err != nil {
		return "", "", err
	}
	q := u.Query()
	schema := q.Get("schema")
	if !q.Has("schema") {
		return raw, "", nil
	}
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// New returns a Store over pool after applying the migrations, with a
// turn's statements prepared on one of its connections. The caller keeps
// ownership of pool: Close does not close it. Errors are as for Open.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("postgres: %w: nil pool", chatmem.ErrInvalid)
	}
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validateSchema(schema); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, schema: schema, now: opts.Now, q: buildQueries(schema), uq: buildUserQueries(schema),
		sq: buildUserSearchQueries(schema)}
	if s.now == nil {
		s.now = time.Now
	}
	if err := migrate(ctx, pool, schema); err != nil {
		return nil, wrap(ctx, "postgres: migrate schema "+schema, err)
	}
	if err := s.backfill(ctx); err != nil {
		return nil, wrap(ctx, "postgres: index the messages of schema "+schema, err)
	}
	s.warm(ctx)
	return s, nil
}

// validateSchema keeps schema names to what needs no quoting, so that the
// name an operator types in psql is the name the store uses.
func validateSchema(name string) error {
	ok := len(name) >= 1 && len(name) <= 63
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9'
	}
	if !ok {
		return fmt.Errorf("postgres: %w: schema %q: want 1 to 63 characters from [a-z0-9_], starting with a letter or underscore", chatmem.ErrInvalid, name)
	}
	return nil
}

// Schema returns the schema holding the store's tables.
func (s *Store) Schema() string { return s.schema }

// Pool returns the pool the store queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping reports whether the database is reachable, wrapping
// chatmem.ErrUnavailable if not.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return wrap(ctx, "postgres: ping", err)
	}
	return nil
}

// Close closes the pool if Open made it; a pool passed to New stays open.
func (s *Store) Close() error {
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// wrap adds op to err and translates it into the chatmem sentinels:
// pgx.ErrNoRows into ErrNotFound, connection failures into ErrUnavailable.
// When ctx is done the result also matches ctx.Err(), whatever pgx returned.
func wrap(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", op, chatmem.ErrNotFound)
	case ctx.Err() != nil:
		if errors.Is(err, ctx.Err()) {
			return fmt.Errorf("%s: %w", op, err)
		}
		return fmt.Errorf("%s: %w: %w", op, ctx.Err(), err)
	case unavailable(err):
		return fmt.Errorf("%s: %w: %w", op, chatmem.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unavailable reports whether err means the database could not be reached
// or dropped the connection, as opposed to refusing the statement.
func unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed): // a connection the driver closed after a failure
		return true
	case errors.As(err, &pgErr):
		// Class 08: connection exception; 57P01-57P03: the server is
		// shutting down or starting; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" ||
			pgErr.Code == "57P02" || pgErr.Code == "57P03" || pgErr.Code == "53300"
	case strings.Contains(err.Error(), "closed pool"):
		return true // pgxpool (puddle) after Close; not an exported sentinel of pgx
	}
	return false
}
