// Package sqlite is chatmem's embedded default store: one SQLite file, pure
// Go (modernc.org/sqlite, no cgo), safe for many goroutines and for several
// processes sharing the file.
//
// The database runs in WAL mode, so readers never wait for the writer. SQLite
// has one writer at a time: every write runs in a BEGIN IMMEDIATE
// transaction, which takes the write lock before it reads anything, so
// concurrent appenders queue for the lock instead of failing half-way with
// SQLITE_BUSY. In one process the writes that wait at the same time share
// one transaction and one fsync (group commit, commit.go), a write that
// fails undone alone; across processes each group waits for the lock for
// up to Options.BusyTimeout. Reads run
// on a separate pool of read-only connections, each read one snapshot.
//
// Conversations keep running totals and every message row carries the
// non-system tokens before it and the user turns up to it, so the newest
// messages that fit a budget, or the last N turns, are found with one index
// seek and read with one index range, whatever the length of the history.
// Summaries and facts reference their conversation with ON DELETE CASCADE,
// so they end with it, in the same transaction, however it ends. The schema
// is in migrations/, applied by Open.
//
// For chatmem.Searcher each non-system message is a row of an FTS5 table,
// message_terms, written in its append's transaction: its
// chatmem.IndexTerms, each prefixed with the conversation's number, so that
// every term of every conversation has a doclist of its own and a search
// reads the newest postings of its own conversation and nothing else. A
// trigger deletes a conversation's rows with it (search.go and
// migrations/0003_search.sql tell the details).
//
// Arguments are checked before anything is read or written, with package
// storekit and the root package's validators, as every store checks them:
// a malformed key, tenant, user or fact name, a limit out of range and an
// empty search term wrap chatmem.ErrInvalid (see chatmem.Store). The
// methods' docs name only the refusals of their own.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/chatmem/chatmem"
)

var (
	_ chatmem.Store        = (*Store)(nil)
	_ chatmem.Sweeper      = (*Store)(nil)
	_ chatmem.Purger       = (*Store)(nil)
	_ chatmem.SummaryStore = (*Store)(nil)
	_ chatmem.FactStore    = (*Store)(nil)
	_ chatmem.Searcher     = (*Store)(nil)
	_ chatmem.TailAppender = (*Store)(nil)
)

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// BusyTimeout is how long a write waits for the write lock while
	// other processes hold it (and a read for a lock it needs, which is
	// rare in WAL mode) before failing with chatmem.ErrUnavailable. Zero:
	// 10 seconds.
	BusyTimeout time.Duration
	// MaxReaders bounds the open read connections. Zero: GOMAXPROCS, at
	// least 4.
	MaxReaders int
	// Now is the clock reads use to tell whether a conversation has
	// expired, and appends without AppendOptions.Now use. Nil: time.Now.
	Now func() time.Time
}

// DefaultBusyTimeout is the busy timeout a zero Options.BusyTimeout stands for.
const DefaultBusyTimeout = 10 * time.Second

// Store is a chatmem.Store over one SQLite file. It implements
// chatmem.Sweeper, chatmem.Purger, chatmem.SummaryStore,
// chatmem.FactStore, chatmem.Searcher and chatmem.TailAppender too. It is safe for concurrent use by many goroutines
// and processes.
type Store struct {
	path string
	// w is the write pool: one connection whose transactions begin
	// IMMEDIATE, so this process's writers queue on it (honouring their
	// contexts) and take SQLite's write lock in turn.
	w *pool
	// r is the read pool: read-only connections, each read transaction one
	// WAL snapshot.
	r           *pool
	now         func() time.Time
	busyTimeout time.Duration
	// commit runs the writes, in groups (commit.go).
	commit *committer
	// eraseStep, if set (by tests), is called between DeleteUser's
	// transactions.
	eraseStep func()
	// userIdents keeps the identities of the conversations UserPostings
	// has seen (usersearch.go).
	userIdents userIdents
	// ckpt checkpoints the WAL beside the committer (checkpoint.go).
	ckpt *checkpointer

	closeOnce sync.Once
	closeErr  error
}

// Open opens the SQLite database at path, creating the file if it does not
// exist, switches it to WAL mode and applies the pending migrations (in one
// write transaction, so processes opening the same file at once apply them
// exactly once). The first Open after the upgrade that added the search
// index indexes the messages stored before it, 1,000 per transaction, before
// it returns (see Store.backfill), and the one after the user index's
// upgrade the messages of conversations with a user (Store.backfillUsers);
// an Open interrupted meanwhile leaves the rest to the next. ctx bounds only the opening. It wraps chatmem.ErrInvalid
// for an empty path or ":memory:" (the store needs a file its connections
// share).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("%w: sqlite store needs a file path, not %q", chatmem.ErrInvalid, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.MaxReaders <= 0 {
		opts.MaxReaders = max(runtime.GOMAXPROCS(0), 4)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}

	w, err := sql.Open("sqlite", dsn(abs, opts, false))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	r, err := sql.Open("sqlite", dsn(abs, opts, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.MaxReaders)
	r.SetMaxIdleConns(opts.MaxReaders)
	ckpt, err := sql.Open("sqlite", dsn(abs, opts, false))
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	ckpt.SetMaxOpenConns(1)
	ckpt.SetMaxIdleConns(1)
	s := &Store{path: abs, w: &pool{db: w}, r: &pool{db: r}, now: opts.Now, busyTimeout: opts.BusyTimeout}
	s.startCheckpointer(ckpt)
	s.startCommitter()

	if err := s.setup(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, translate(ctx, err))
	}
	if err := s.clearLeases(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	return s, nil
}

// writeCacheKiB is the page cache of the write connection, in KiB (see
// dsn).
const writeCacheKiB = 64 << 10

// WriteCacheBytes is the most memory the write connection's page cache
// holds: a server's resident memory grows by up to that much as the cache
// fills, once.
const WriteCacheBytes = writeCacheKiB << 10

// dsn returns the modernc.org/sqlite data source name for the file at abs.
// The path goes in a file: URI, escaped, so that no character of it is
// taken for the query.
func dsn(abs string, opts Options, readOnly bool) string {
	q := url.Values{}
	if readOnly {
		// busy_timeout first: every later pragma may need to wait for a
		// lock. The driver's busy handler gives up when the context ends.
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
		q.Set("_query_only", "1")
		// Reads copy pages into the connection's own cache; they do not
		// map the file (mmap_size): with appends going on, reads of a
		// mapped file cost a recall across a user's 1,000,000 messages
		// twice what copying does (docs/performance.md, "Recall across a
		// user's conversations").
	} else {
		// No busy timeout: beginWrite waits for the write lock itself.
		q.Add("_pragma", "busy_timeout(0)")
		q.Set("_txlock", "immediate")
		// No automatic checkpoint after a commit: the checkpointer runs
		// them beside the committer (checkpoint.go).
		q.Add("_pragma", "wal_autocheckpoint(0)")
		// An append to a conversation with a user posts each of its
		// messages under each of its terms (usersearch.go): a page of
		// user_postings per (user, term), the last of its run, which
		// the next message with that term writes again. The default
		// cache (2 MiB, 500 pages) keeps a few hundred of them; a user
		// of a long history has thousands: reading them again from the
		// file, a turn across 1,000,000 messages took 8.4 ms where it
		// takes 6.5 with 64 MiB. The checkpointer's connection gets the
		// same setting and reads no pages into it.
		q.Add("_pragma", fmt.Sprintf("cache_size(%d)", -writeCacheKiB))
	}
	q.Add("_pragma", "foreign_keys(1)")
	// Deleted content is overwritten, not left in free pages: erasing a
	// user (DeleteUser) must leave nothing of them in the file.
	q.Add("_pragma", "secure_delete(1)")
	// FULL, not NORMAL: in WAL mode NORMAL may lose the last commits on a
	// power failure, and appends must never be lost once acknowledged.
	q.Add("_pragma", "synchronous(FULL)")
	return fileURL(abs, q)
}

// fileURL returns the modernc.org/sqlite data source name of the file at
// abs with the query q: the path in a file: URI, escaped, so that no
// character of it is taken for the query.
func fileURL(abs string, q url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	return (&url.URL{Scheme: "file", Path: p}).String() + "?" + q.Encode()
}

// setup switches the file to WAL mode, migrates its schema and prepares the
// statements.
func (s *Store) setup(ctx context.Context) error {
	var mode string
	err := s.retryBusy(ctx, func() error {
		return s.w.db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
	})
	if err != nil {
		return fmt.Errorf("set WAL mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("set WAL mode: journal mode is %q", mode)
	}
	if err := migrate(ctx, s.beginWrite); err != nil {
		return err
	}
	if err := s.w.prepare(ctx, slices.Concat(writeStatements, savepointStatements, usageWriteStatements)...); err != nil {
		return err
	}
	if err := s.r.prepare(ctx, slices.Concat(readStatements, usageReadStatements())...); err != nil {
		return err
	}
	if err := s.backfill(ctx); err != nil {
		return err
	}
	return s.backfillUsers(ctx) // usersearch.go
}

// Ping reports whether the database file can be read, wrapping
// chatmem.ErrUnavailable if not.
func (s *Store) Ping(ctx context.Context) error {
	var v int
	if err := s.r.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		if ctx.Err() != nil {
			return translate(ctx, err)
		}
		return fmt.Errorf("%w: sqlite %s: %v", chatmem.ErrUnavailable, s.path, err)
	}
	return nil
}

// Path returns the absolute path of the store's database file.
func (s *Store) Path() string { return s.path }

// Close ends the committer and the checkpointer and closes the
// connections (the last one closed checkpoints what is left in the WAL).
// Further calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopCommitter()
		s.closeErr = errors.Join(s.stopCheckpointer(), s.r.close(), s.w.close())
	})
	return s.closeErr
}

// read runs fn in one read transaction: every statement of fn sees the
// same snapshot.
func (s *Store) read(ctx context.Context, fn func(tx) error) error {
	t, err := s.r.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return translate(ctx, err)
	}
	return s.run(ctx, s.r, t, fn)
}

func (s *Store) run(ctx context.Context, p *pool, t *sql.Tx, fn func(tx) error) error {
	defer t.Rollback()
	if err := fn(tx{ctx: ctx, tx: t, p: p}); err != nil {
		return translate(ctx, err)
	}
	return translate(ctx, t.Commit())
}

// beginWrite begins an IMMEDIATE transaction on the write connection, which
// takes SQLite's write lock. It waits for its turn on the connection in
// this process, then, holding the connection, for the lock while another
// process holds it: so one writer per process polls for the lock while
// the others wait their turn without spending CPU. The caller closes c
// once the transaction has ended.
func (s *Store) beginWrite(ctx context.Context) (c *sql.Conn, t *sql.Tx, err error) {
	if c, err = s.w.db.Conn(ctx); err != nil {
		return nil, nil, err
	}
	err = s.retryBusy(ctx, func() error {
		t, err = c.BeginTx(ctx, nil)
		return err
	})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, t, nil
}

// retryBusy runs fn until it does not fail with SQLITE_BUSY; once the
// database has stayed locked for the busy timeout it wraps
// chatmem.ErrUnavailable. It polls at short random intervals instead of
// leaving the wait to SQLite's busy handler, whose back-off grows to 100ms
// between attempts: a process that sleeps that long hardly ever finds the
// lock free while another process writes back to back, and would starve
// until its timeout. (TestTwoProcesses shows the difference.)
func (s *Store) retryBusy(ctx context.Context, fn func() error) error {
	var deadline time.Time // from the first failure: queueing in this process does not count
	for {
		err := fn()
		if err == nil || !isBusy(err) {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.busyTimeout)
		} else if time.Now().After(deadline) {
			return fmt.Errorf("%w: sqlite: the database stayed locked for %v: %v", chatmem.ErrUnavailable, s.busyTimeout, err)
		}
		pause := time.NewTimer(100*time.Microsecond + rand.N(time.Millisecond))
		select {
		case <-ctx.Done():
			pause.Stop()
			return ctx.Err()
		case <-pause.C:
		}
	}
}

// SQLite primary result codes translate recognises.
const (
	sqliteBusy   = 5
	sqliteLocked = 6
)

// translate turns err into what the Store contract promises: the context's
// error once ctx is done (the driver may report an interrupted statement
// instead), chatmem.ErrUnavailable for a lock not granted within the busy
// timeout. chatmem sentinels pass unchanged; other driver errors get the
// package's prefix.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return err
		}
		return fmt.Errorf("sqlite: %w (%v)", cerr, err)
	}
	if isBusy(err) {
		return fmt.Errorf("%w: sqlite: %v", chatmem.ErrUnavailable, err)
	}
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		return fmt.Errorf("sqlite: %w", err)
	}
	return err
}

// isBusy reports whether err is SQLite's "database is locked" (SQLITE_BUSY
// or SQLITE_LOCKED, with any extended code).
func isBusy(err error) bool {
	var se *sqlitedriver.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqliteBusy || c == sqliteLocked
}
