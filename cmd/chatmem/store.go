package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/sqlite"
)

// defaultDataDir is where the default SQLite store keeps its file.
const defaultDataDir = "chatmem-data"

// storeURLHelp describes the store URLs for flag help texts.
const storeURLHelp = "store URL: memory:, sqlite:PATH (default: sqlite under the data dir), redis://HOST:PORT[/DB], redis+cluster://HOST:PORT[,HOST:PORT...], postgres://..."

// openStore opens the store a URL names. An empty URL is the embedded
// default: a SQLite file in dataDir.
func openStore(ctx context.Context, url, dataDir string) (chatmem.Store, error) {
	scheme, rest, _ := strings.Cut(url, ":")
	switch {
	case url == "":
		if dataDir == "" {
			dataDir = defaultDataDir
		}
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, err
		}
		return sqlite.Open(ctx, filepath.Join(dataDir, "chatmem.db"), sqlite.Options{})
	case scheme == "memory":
		return memstore.New(), nil
	case scheme == "sqlite":
		path := strings.TrimPrefix(rest, "//")
		if path == "" {
			return nil, usageErr("store URL %q names no file (want sqlite:PATH)", url)
		}
		return sqlite.Open(ctx, path, sqlite.Options{})
	case scheme == "redis" || scheme == "rediss" || scheme == "redis+cluster":
		return redis.Open(ctx, url, redis.Options{})
	case scheme == "postgres" || scheme == "postgresql":
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			return nil, missingDatabase(err)
		}
		return s, nil
	}
	return nil, usageErr("unknown store URL %q (%s)", url, storeURLHelp)
}

// storeName is the store's kind for reports: the URL's scheme.
func storeName(url string) string {
	if url == "" {
		return "sqlite"
	}
	scheme, _, _ := strings.Cut(url, ":")
	return fmt.Sprint(strings.TrimSuffix(scheme, "ql"))
}

// describeStore names the store a URL opens, for the startup log: the
// SQLite file's absolute path, Redis's and PostgreSQL's host:port and
// database (never a user or password).
func describeStore(storeURL, dataDir string) string {
	scheme, rest, _ := strings.Cut(storeURL, ":")
	switch {
	case storeURL == "":
		if dataDir == "" {
			dataDir = defaultDataDir
		}
		return "sqlite:" + absPath(filepath.Join(dataDir, "chatmem.db"))
	case scheme == "memory":
		return "memory: (lost when the process exits)"
	case scheme == "sqlite":
		return "sqlite:" + absPath(strings.TrimPrefix(rest, "//"))
	}
	u, err := url.Parse(storeURL)
	if err != nil || u.Host == "" {
		return storeName(storeURL) // a key=value connection string, say
	}
	return u.Scheme + "://" + u.Host + u.Path
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// missingDatabase adds to PostgreSQL's "database ... does not exist" how
// to create it: chatmem creates its tables, not the database.
func missingDatabase(err error) error {
	var pgErr *pgconn.PgError
	// 3D000 is invalid_catalog_name: no database of that name.
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
		return err
	}
	name := "chatmem"
	if _, quoted, ok := strings.Cut(pgErr.Message, `"`); ok {
		if n, _, ok := strings.Cut(quoted, `"`); ok && n != "" {
			name = n
		}
	}
	return fmt.Errorf("%w (chatmem creates its tables but not the database: create it with createdb %s, or CREATE DATABASE %s; in psql)", err, name, quoteIdent(name))
}

// quoteIdent quotes a name for SQL if it needs it.
func quoteIdent(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
	}
	return s
}

// warnInMemory says, on one line of stderr, that a memory: store a command
// writes into is gone when the process exits: an import or migration into
// it reports what it created, and keeps none of it.
func warnInMemory(stderr io.Writer, name, storeURL string) {
	if scheme, _, _ := strings.Cut(storeURL, ":"); scheme == "memory" {
		fmt.Fprintf(stderr, "chatmem: %s: warning: %s is an in-memory store: what %s writes into it is lost when the process exits\n", name, storeURL, name)
	}
}
