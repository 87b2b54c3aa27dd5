package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
)

// purgeBatch is how many conversations one transaction of Sweep or
// PurgeInactive deletes, so that a large purge holds the write lock in
// short turns and appenders get in between.
const purgeBatch = 100

// Sweep deletes the conversations that expired at or before now, with their
// messages, idempotency keys, summaries and facts, and returns how many it
// deleted. It works in batches of short transactions; on error it returns
// how many it deleted so far.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	return s.purge(ctx, sweepExpired, clampedNanos(now), purgeBatch)
}

// PurgeInactive deletes the tenant's conversations (every tenant's, if
// tenant is empty) last updated before before, with their messages,
// idempotency keys, summaries and facts, and returns how many it deleted.
// It works in batches of short transactions; on error it returns how many
// it deleted so far.
func (s *Store) PurgeInactive(ctx context.Context, tenant string, before time.Time) (int, error) {
	if tenant == "" {
		return s.purge(ctx, purgeInactive, clampedNanos(before), purgeBatch)
	}
	if err := chatmem.ValidateID(tenant); err != nil {
		return 0, fmt.Errorf("tenant: %w", err)
	}
	return s.purge(ctx, purgeInactiveTenant, clampedNanos(before), purgeBatch, tenant)
}

// purge runs del, which deletes at most ?2 (purgeBatch) conversations,
// in one transaction after another until a batch comes short.
func (s *Store) purge(ctx context.Context, del string, args ...any) (int, error) {
	total := 0
	for {
		var n int64
		err := s.write(ctx, func(t tx) error {
			res, err := t.exec(del, args...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected() // conversations only: cascaded rows do not count
			return err
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n < purgeBatch {
			return total, nil
		}
	}
}
