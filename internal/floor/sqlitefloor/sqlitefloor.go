// Package sqlitefloor is the raw floor of a chat turn on SQLite, the
// yardstick of the SQLite store's turn in its benchmarks and in chatmem
// bench: the turn's job done with the same driver and durability (WAL,
// synchronous=FULL) on a table of its own, in a database file of its own
// beside the store's.
package sqlitefloor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the store's driver

	"github.com/chatmem/chatmem"
)

// Floor is the floor of a turn on one database file. Make one with New;
// it is not safe for concurrent use.
type Floor struct {
	db   *sql.DB
	path string
	seq  int
}

// floorRead is how many of the newest rows a floor turn reads back, with
// floorReadSQL.
const (
	floorRead    = 64
	floorReadSQL = `SELECT seq, role, content, tokens, created_at FROM floor WHERE conv = 1 ORDER BY seq DESC LIMIT 64`
)

// New makes a database file of its own beside a store's file, path
// (sqlite.Store's Path; Drop removes it), with a table of messages keyed
// by conversation and seq, fills one conversation with n messages of
// content, alternately of a user and an assistant, and returns the floor
// of a turn on it. It wraps chatmem.ErrInvalid for a negative n and
// returns the file system's and the driver's errors.
func New(ctx context.Context, path string, n int, content string) (*Floor, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: a SQLite turn floor of %d messages", chatmem.ErrInvalid, n)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	file, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".turn-floor-*")
	if err != nil {
		return nil, fmt.Errorf("sqlite: the turn floor's file: %w", err)
	}
	f := &Floor{path: file.Name(), seq: n}
	if err := file.Close(); err != nil {
		_ = f.Drop(ctx)
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	if f.db, err = sql.Open("sqlite", fileURL(f.path, q)); err != nil {
		_ = f.Drop(ctx)
		return nil, fmt.Errorf("sqlite: open the turn floor: %w", err)
	}
	f.db.SetMaxOpenConns(1)
	if _, err := f.db.ExecContext(ctx, `CREATE TABLE floor (conv INTEGER NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,
		content BLOB NOT NULL, tokens INTEGER NOT NULL, created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
		PRIMARY KEY (conv, seq)) WITHOUT ROWID`); err != nil {
		_ = f.Drop(ctx)
		return nil, fmt.Errorf("sqlite: create the turn floor's table: %w", err)
	}
	if _, err := f.db.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
		INSERT INTO floor (conv, seq, role, content, tokens)
		SELECT 1, n, CASE WHEN n % 2 = 1 THEN 'user' ELSE 'assistant' END, ?, ? FROM i`, n, []byte(content), len(content)/4); err != nil {
		_ = f.Drop(ctx)
		return nil, fmt.Errorf("sqlite: fill the turn floor: %w", err)
	}
	return f, nil
}

// fileURL is the driver's data source name of the file at abs with the
// query q, as the store writes its own: the path in a file: URI, escaped,
// so that no character of it is taken for the query.
func fileURL(abs string, q url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	return (&url.URL{Scheme: "file", Path: p}).String() + "?" + q.Encode()
}

// Turn is one turn of the floor: one transaction that INSERTs a user
// message of content and SELECTs the newest 64 rows by primary key, then
// commits. It fails if it reads back fewer than 64 rows, or than the
// table holds.
func (f *Floor) Turn(ctx context.Context, content string) error {
	f.seq++
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO floor (conv, seq, role, content, tokens) VALUES (1, ?, 'user', ?, ?)`,
		f.seq, []byte(content), len(content)/4); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, floorReadSQL)
	if err != nil {
		return err
	}
	got := 0
	for rows.Next() {
		var (
			seq, tokens int64
			role, at    string
			content     []byte
		)
		if err := rows.Scan(&seq, &role, &content, &tokens, &at); err != nil {
			rows.Close()
			return err
		}
		got++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if want := min(floorRead, f.seq); got != want {
		return fmt.Errorf("sqlite: the turn floor read %d rows, want %d", got, want)
	}
	return tx.Commit()
}

// Reply is the rest of a chat turn on the floor: one INSERT of an
// assistant message of content, committed, the reply appended before the
// next turn.
func (f *Floor) Reply(ctx context.Context, content string) error {
	f.seq++
	_, err := f.db.ExecContext(ctx, `INSERT INTO floor (conv, seq, role, content, tokens) VALUES (1, ?, 'assistant', ?, ?)`,
		f.seq, []byte(content), len(content)/4)
	return err
}

// Drop closes the floor's database and removes its file and the file's
// WAL and shared-memory files.
func (f *Floor) Drop(context.Context) error {
	var err error
	if f.db != nil {
		err = f.db.Close()
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if rerr := os.Remove(f.path + suffix); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}
