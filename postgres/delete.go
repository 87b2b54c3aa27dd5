package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
)

// Delete removes the conversation, its messages, idempotency keys, summary
// and facts in one transaction. It wraps chatmem.ErrNotFound if the
// conversation does not exist or has expired (an expired one is left to
// Sweep, like any other).
//
// The conversation row goes first: deleting it waits for, and then locks
// out, any append, PutSummary or SetFacts in progress, so the rows deleted
// next (by a statement that sees what those wrote) are all of them.
func (s *Store) Delete(ctx context.Context, key chatmem.Key) error {
	op := "postgres: delete " + key.String()
	if err := key.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var num int64
		if err := tx.QueryRow(ctx, s.q.deleteConversation, key.Tenant, key.ID, s.now()).Scan(&num); err != nil {
			return err // pgx.ErrNoRows: wrap makes it ErrNotFound
		}
		_, err := tx.Exec(ctx, s.q.deleteContents, key.Tenant, key.ID, num)
		return err
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// sweepBatch bounds the conversations one Sweep or PurgeInactive
// transaction deletes, so that no transaction holds more locks than that.
const sweepBatch = 500

// Sweep deletes the conversations that expired at or before now, with their
// messages, keys, summaries and facts, and returns how many it deleted.
// Conversations an append (or PutSummary, SetFacts) holds at that moment
// are left for the next sweep.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	n, err := s.deleteWhere(ctx, s.q.sweep, now, sweepBatch)
	if err != nil {
		return n, wrap(ctx, "postgres: sweep", err)
	}
	return n, nil
}

// PurgeInactive deletes the tenant's conversations (every tenant's if
// tenant is empty) not updated since before, with their messages, keys,
// summaries and facts, and returns how many it deleted.
func (s *Store) PurgeInactive(ctx context.Context, tenant string, before time.Time) (int, error) {
	op := "postgres: purge inactive"
	if tenant != "" {
		op += " of " + tenant
		if err := chatmem.ValidateID(tenant); err != nil {
			return 0, fmt.Errorf("%s: tenant: %w", op, err)
		}
	}
	n, err := s.deleteWhere(ctx, s.q.purge, before, tenant, sweepBatch)
	if err != nil {
		return n, wrap(ctx, op, err)
	}
	return n, nil
}

// deleteWhere runs sql (sweep or purge, whose last argument is the batch
// size) in transactions of up to sweepBatch conversations, deleting each
// batch's other rows in the same transaction, until a batch comes back
// short.
func (s *Store) deleteWhere(ctx context.Context, sql string, args ...any) (int, error) {
	total := 0
	for {
		var n int
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			var tenants, ids []string
			var nums []int64
			var tenant, id string
			var num int64
			if _, err := pgx.ForEachRow(rows, []any{&tenant, &id, &num}, func() error {
				tenants, ids, nums = append(tenants, tenant), append(ids, id), append(nums, num)
				return nil
			}); err != nil {
				return err
			}
			if n = len(ids); n == 0 {
				return nil
			}
			_, err = tx.Exec(ctx, s.q.deleteContentsOf, tenants, ids, nums)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < sweepBatch {
			return total, nil
		}
	}
}
