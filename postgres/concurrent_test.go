package postgres_test

import (
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storetest"
)

// BenchmarkAppendConcurrent: 32 clients on distinct conversations over the
// pool's connections; PostgreSQL groups the WAL flushes of commits that
// arrive together.
func BenchmarkAppendConcurrent(b *testing.B) {
	storetest.BenchmarkAppendConcurrent(b, func(b *testing.B) chatmem.Store { return open(b, newSchema(b)) }, 1, 32)
}
