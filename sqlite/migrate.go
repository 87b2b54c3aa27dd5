package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// migrationFS holds the schema migrations, NNNN_name.sql, numbered from 1
// upwards. A migration, once released, is never edited: changes go in a
// new file. Numbers are handed out to branches developed in parallel, so a
// branch may lack some (0007 without 0005 and 0006 until those are
// merged): the numbers must increase, not be dense.
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
// that no number is used twice.
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
		if v < 1 || len(ms) > 0 && v <= ms[len(ms)-1].version {
			return nil, fmt.Errorf("migration %s: version %d is used twice or out of order", base, v)
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
	latest := ms[len(ms)-1].version
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
	// A version this code has no migration for was written by a build
	// with other migrations: applying the later ones on top of it could
	// skip some, so refuse.
	if version != 0 && !slices.ContainsFunc(ms, func(m migration) bool { return m.version == version }) {
		return fmt.Errorf("migrate: database schema version %d is not one this chatmem knows", version)
	}
	for _, m := range ms {
		if m.version <= version {
			continue
		}
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
