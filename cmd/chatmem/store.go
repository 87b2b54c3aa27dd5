package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memory"
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
		return memory.New(), nil
	case scheme == "sqlite":
		path := strings.TrimPrefix(rest, "//")
		if path == "" {
			return nil, usageErr("store URL %q names no file (want sqlite:PATH)", url)
		}
		return sqlite.Open(ctx, path, sqlite.Options{})
	case scheme == "redis" || scheme == "rediss" || scheme == "redis+cluster":
		return redis.Open(ctx, url, redis.Options{})
	case scheme == "postgres" || scheme == "postgresql":
		return postgres.Open(ctx, url, postgres.Options{})
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
