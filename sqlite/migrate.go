package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// migrationFS holds the schema migrations, NNNN_name.sql, numbered from 1
// without gaps. A migration, once released, is never edited: changes go in
// a new file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one schema step; applying it brings the database to version.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order, checking
// that they are numbered 1, 2, 3, ...
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	ms := make([]migration, 0, len(names))
	for _, name := range names { // fs.Glob sorts, and the numbers are zero-padded
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", base)
		}
		if v != len(ms)+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", base, v, len(ms)+1)
		}
		b, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms, nil
}

// migrate brings the schema to the newest version. The schema version is
// SQLite's user_version, read and written in the same IMMEDIATE transaction
// as the migrations, so of several processes opening one file at once the
// first applies them and the others, once granted the lock, find nothing
// left to do. A database newer than this code is refused rather than
// written to.
func migrate(ctx context.Context, begin func(context.Context) (*sql.Conn, *sql.Tx, error)) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := len(ms)
	conn, tx, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	if version > latest {
		return fmt.Errorf("migrate: database schema version %d is newer than this chatmem's (%d)", version, latest)
	}
	if version == latest {
		return nil
	}
	for _, m := range ms[version:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: %s: %w", m.name, err)
		}
	}
	// PRAGMA takes no parameters; latest is an int from this package.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", latest)); err != nil {
		return fmt.Errorf("migrate: set schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
