package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.GenerationWriter = (*Store)(nil)

// Summary returns the conversation's summary. It wraps chatmem.ErrNotFound
// if the conversation does not exist, has expired, or has no summary yet.
func (s *Store) Summary(ctx context.Context, key chatmem.Key) (chatmem.Summary, error) {
	op := "postgres: summary of " + key.String()
	if err := key.Validate(); err != nil {
		return chatmem.Summary{}, fmt.Errorf("%s: %w", op, err)
	}
	var sum chatmem.Summary
	var text []byte
	err := s.pool.QueryRow(ctx, s.q.summary, key.Tenant, key.ID, s.now()).Scan(
		&text, &sum.CoversSeq, &sum.Tokens, &sum.Summarizer, &sum.CreatedAt)
	if err != nil {
		return chatmem.Summary{}, wrap(ctx, op, err)
	}
	sum.Text = string(text)
	sum.CreatedAt = sum.CreatedAt.UTC()
	return sum, nil
}

// PutSummary stores sum as the conversation's summary if the stored one
// covers exactly prev (see chatmem.SummaryStore), in one transaction: it
// locks the live conversation's row (chatmem.ErrNotFound if there is
// none), writes with a statement that matches only a summary covering prev
// (chatmem.ErrConflict if it wrote nothing), and then checks CoversSeq
// against LastSeq, rolling back past it (chatmem.ErrInvalid). What sum and
// prev are wrong about on their own (an empty Text, CoversSeq not after
// prev, a Summarizer with NUL) wraps chatmem.ErrInvalid before anything is
// asked of the database. A zero CreatedAt is set to the store's clock;
// times are kept to the microsecond. Text is stored as bytea, so any text
// round-trips byte for byte.
func (s *Store) PutSummary(ctx context.Context, key chatmem.Key, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, nil, sum, prev)
}

// PutSummaryOf is PutSummary for the conversation created at created only
// (see chatmem.GenerationWriter): the statement that locks the
// conversation's row also matches its created_at, so another conversation
// at key, or none, wraps chatmem.ErrNotFound and nothing is written. The
// errors of what sum and prev are wrong about on their own come first. A
// created finer than the microsecond is no time the store keeps, and
// matches no conversation.
func (s *Store) PutSummaryOf(ctx context.Context, key chatmem.Key, created time.Time, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, &created, sum, prev)
}

// putSummary is PutSummary, and PutSummaryOf when created is not nil.
func (s *Store) putSummary(ctx context.Context, key chatmem.Key, created *time.Time, sum chatmem.Summary, prev int64) error {
	op := fmt.Sprintf("postgres: put summary of %s over %d", key, prev)
	if err := key.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := storekit.CheckSummary(sum, prev); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := storableText("summarizer", sum.Summarizer); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if sum.CreatedAt.IsZero() {
		sum.CreatedAt = s.now()
	}
	gen, err := generation(op, created)
	if err != nil {
		return err
	}
	args := []any{key.Tenant, key.ID, []byte(sum.Text), sum.CoversSeq, sum.Tokens, sum.Summarizer, dbTime(sum.CreatedAt)}

	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var last int64
		if err := tx.QueryRow(ctx, s.q.lockLive, key.Tenant, key.ID, s.now(), gen).Scan(&last); err != nil {
			return err // pgx.ErrNoRows: wrap makes it ErrNotFound
		}
		var tag pgconn.CommandTag
		var err error
		if prev == 0 {
			tag, err = tx.Exec(ctx, s.q.insertSummary, args...)
		} else {
			tag, err = tx.Exec(ctx, s.q.updateSummary, append(args, prev)...)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: the stored summary does not cover seq %d", chatmem.ErrConflict, prev)
		}
		return storekit.CheckSummaryWithin(sum.CoversSeq, last)
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// generation returns lockLive's $4 for created: nil to find the live
// conversation whatever its creation time, else the time. A created finer
// than a microsecond is no CreatedAt the store returns; sent as a
// timestamptz it would be truncated and could match the conversation
// created in that microsecond, so it wraps chatmem.ErrNotFound instead.
func generation(op string, created *time.Time) (any, error) {
	if created == nil {
		return nil, nil
	}
	if !created.Equal(dbTime(*created)) {
		return nil, fmt.Errorf("%s: %w: no conversation is created at %v, finer than a microsecond", op, chatmem.ErrNotFound, *created)
	}
	return *created, nil
}
