// Package testenv finds the Redis and PostgreSQL servers that tests run
// against, and decides what a test does when one is missing: it skips,
// saying what it looked for and the variable that moves it, except on CI
// (CI=true), where a missing service is a broken setup and fails the test.
//
// It is for _test.go files only; no production package imports it.
package testenv

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
)

// The variables that point the tests at other servers than the local
// defaults.
const (
	PostgresURLVar = "CHATMEM_POSTGRES_URL"
	RedisURLVar    = "CHATMEM_REDIS_URL"
)

// PostgresURL returns the database the tests use: $CHATMEM_POSTGRES_URL, or
// a local PostgreSQL with trust authentication.
func PostgresURL() string {
	if u := os.Getenv(PostgresURLVar); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// RedisURL returns the Redis server the tests use: $CHATMEM_REDIS_URL, or
// the local default.
func RedisURL() string {
	if u := os.Getenv(RedisURLVar); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379"
}

// SkipOrFail skips tb, which lacks something it needs, with the message
// format and args; under CI=true it fails tb with it instead.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}

// unreachable is SkipOrFail for a service that did not answer at addr.
func unreachable(tb testing.TB, service, addr, envVar string, err error) {
	tb.Helper()
	SkipOrFail(tb, "%s at %s is unreachable (set %s to test against another): %v", service, addr, envVar, err)
}

var (
	pgOnce  sync.Once
	pgAdmin *pgxpool.Pool
	pgErr   error
)

// PostgresAdmin returns a pool on PostgresURL for the tests' own statements
// (creating and dropping schemas, EXPLAIN). The first call connects and
// pings; every call skips or fails tb as SkipOrFail does if that failed.
// The pool is shared by the test binary and never closed.
func PostgresAdmin(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if pgAdmin, pgErr = pgxpool.New(ctx, PostgresURL()); pgErr == nil {
			pgErr = pgAdmin.Ping(ctx)
		}
	})
	if pgErr != nil {
		unreachable(tb, "PostgreSQL", PostgresURL(), PostgresURLVar, pgErr)
	}
	return pgAdmin
}

// PostgresSchema returns a fresh schema name starting with prefix, and drops
// the schema (if a test created it) when tb ends. It skips or fails tb as
// PostgresAdmin does.
func PostgresSchema(tb testing.TB, prefix string) string {
	tb.Helper()
	pool := PostgresAdmin(tb)
	schema := prefix + strings.ToLower(rand.Text()[:10])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// RedisOptions returns the client options of RedisURL, after checking that
// the server answers a PING within 2 seconds; if not, it skips or fails tb
// as SkipOrFail does. A URL that does not parse fails tb.
func RedisOptions(tb testing.TB) *goredis.Options {
	tb.Helper()
	o, err := goredis.ParseURL(RedisURL())
	if err != nil {
		tb.Fatalf("%s: %v", RedisURLVar, err)
	}
	c := goredis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unreachable(tb, "Redis", o.Addr, RedisURLVar, err)
	}
	return o
}
