package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
)

// go-redis writes its log through one process-wide logger (redis.SetLogger:
// v9 has no per-client one), by default straight to stderr: a Redis store
// that could not be reached printed eight lines of dial retries ahead of
// the one line of the error. run installs redisLog in its place, once; the
// library never touches it.
var (
	redisLog        libraryLog
	installRedisLog sync.Once
)

// libraryLog receives a library's Printf-style log and passes it to the
// running command's logger (route): at debug level, as a dial's retries
// are noise beside the error the store returns, but a recovered panic at
// warn. Without a route, as for the commands that print no log, it drops
// the lines.
type libraryLog struct{ to atomic.Pointer[slog.Logger] }

// Printf implements go-redis's internal.Logging.
func (l *libraryLog) Printf(ctx context.Context, format string, v ...any) {
	log := l.to.Load()
	if log == nil {
		return
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	level := slog.LevelDebug
	if strings.Contains(msg, "panic") {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, "redis: "+msg)
}

// route sends the log to log until the returned function is called.
func (l *libraryLog) route(log *slog.Logger) (restore func()) {
	l.to.Store(log)
	return func() { l.to.CompareAndSwap(log, nil) }
}
