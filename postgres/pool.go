package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxConns is the size of the pool Open makes when the URL sets no
// pool_max_conns. pgxpool's own default (4, or the number of CPUs) let at
// most 4 appends commit at once, so 32 concurrent clients shared WAL
// flushes 4 at a time: BenchmarkAppendConcurrent at 32 clients went from
// about 150-220 appends/s with 4 connections to 850-1,150 with 16 (and no
// more with 32) on this project's 2-core test machine. Three replicas of
// 16 stay under PostgreSQL's default max_connections of 100.
const DefaultMaxConns = 16

// poolDefaults sets what Open changes of pgxpool's defaults, where url
// does not set it.
func poolDefaults(cfg *pgxpool.Config, url string) {
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
}
