package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/telemetry"
)

// startTracing starts OpenTelemetry tracing when the OTEL_* environment
// asks for it (telemetry.FromEnv says when). It returns the tracer to give
// the Memory, the server and the model clients (nil when tracing is off),
// a stop that flushes the spans still batched (within timeout), and the
// configuration for the startup log. A bad OTEL_* value is a usage error.
func startTracing(ctx context.Context, storeURL string, log *slog.Logger, timeout time.Duration) (chatmem.Tracer, func(), telemetry.Config, error) {
	cfg, err := telemetry.FromEnv(os.Getenv)
	if err != nil {
		return nil, nil, cfg, &exitError{code: 2, err: err}
	}
	if !cfg.Enabled {
		return nil, func() {}, cfg, nil
	}
	t, err := telemetry.New(ctx, cfg, telemetry.Options{ServiceVersion: buildVersion(), StoreSystem: storeSystem(storeURL), Logger: log})
	if err != nil {
		if errors.Is(err, chatmem.ErrInvalid) {
			return nil, nil, cfg, &exitError{code: 2, err: err}
		}
		return nil, nil, cfg, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			log.Warn("opentelemetry: spans not flushed at shutdown", "error", err.Error())
		}
	}
	return t, stop, cfg, nil
}

// storeSystem is the store's db.system.name, as the OpenTelemetry
// database conventions name them; empty for the in-process store.
func storeSystem(storeURL string) string {
	switch storeName(storeURL) {
	case "sqlite":
		return "sqlite"
	case "redis", "rediss", "redis+cluster":
		return "redis"
	case "postgres":
		return "postgresql"
	}
	return ""
}
