package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.GenerationWriter = (*Store)(nil)

// Summary returns the conversation's summary, read in the snapshot in which
// the conversation is live. It returns chatmem.ErrNotFound for a
// conversation that does not exist, has expired or has no summary yet.
func (s *Store) Summary(ctx context.Context, key chatmem.Key) (chatmem.Summary, error) {
	if err := key.Validate(); err != nil {
		return chatmem.Summary{}, err
	}
	now := s.now()
	var sum chatmem.Summary
	err := s.read(ctx, func(t tx) error {
		if _, err := liveConversation(t, key, now); err != nil {
			return err
		}
		var created int64
		err := t.row(selectSummary, key.Tenant, key.ID).Scan(&sum.Text, &sum.CoversSeq, &sum.Tokens, &sum.Summarizer, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("conversation %s has no summary: %w", key, chatmem.ErrNotFound)
		}
		sum.CreatedAt = fromNanos(created)
		return err
	})
	if err != nil {
		return chatmem.Summary{}, err
	}
	return sum, nil
}

// PutSummary stores sum as the conversation's summary if the stored one
// covers exactly prev (0: none stored yet); see chatmem.SummaryStore. The
// comparison and the write are one IMMEDIATE transaction, so of racing
// writers, in this process or others, exactly one moves the summary on.
// Errors come in this order: chatmem.ErrInvalid for what key, sum and prev
// are wrong about on their own (an empty Text, CoversSeq not after prev, a
// negative prev, a CreatedAt outside 1678..2262); chatmem.ErrNotFound for a
// conversation that does not exist or has expired; chatmem.ErrConflict if
// the stored summary does not cover prev; and chatmem.ErrInvalid for a
// CoversSeq past the conversation's LastSeq. A zero CreatedAt is set to the
// store's clock. Nothing is written on error, and the conversation's
// metadata never changes.
func (s *Store) PutSummary(ctx context.Context, key chatmem.Key, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, nil, sum, prev)
}

// PutSummaryOf is PutSummary for the conversation created at created only
// (see chatmem.GenerationWriter): the IMMEDIATE transaction that writes
// the summary reads the conversation's created_at (Unix nanoseconds) and
// compares it with created first, so another conversation at key, or
// none, returns chatmem.ErrNotFound and nothing is written. The errors of
// what sum and prev are wrong about on their own come first.
func (s *Store) PutSummaryOf(ctx context.Context, key chatmem.Key, created time.Time, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, &created, sum, prev)
}

// putSummary is PutSummary, and PutSummaryOf when created is not nil.
func (s *Store) putSummary(ctx context.Context, key chatmem.Key, created *time.Time, sum chatmem.Summary, prev int64) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.CheckSummary(sum, prev); err != nil {
		return fmt.Errorf("summary of %s: %w", key, err)
	}
	now := s.now()
	if sum.CreatedAt.IsZero() {
		sum.CreatedAt = now
	}
	if err := checkTime("summary created_at", sum.CreatedAt); err != nil {
		return err
	}
	return s.write(ctx, func(t tx) error {
		conv, err := liveGeneration(t, key, now, created)
		if err != nil {
			return err
		}
		var covers int64 // 0: no summary stored
		if err := t.row(selectSummaryCovers, key.Tenant, key.ID).Scan(&covers); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if covers != prev {
			return fmt.Errorf("summary of %s: %w: the stored summary covers seq %d, not %d", key, chatmem.ErrConflict, covers, prev)
		}
		if err := storekit.CheckSummaryWithin(sum.CoversSeq, conv.LastSeq); err != nil {
			return fmt.Errorf("summary of %s: %w", key, err)
		}
		_, err = t.exec(upsertSummary, key.Tenant, key.ID, sum.Text, sum.CoversSeq, sum.Tokens, sum.Summarizer,
			sum.CreatedAt.UnixNano())
		return err
	})
}

// liveGeneration is liveConversation for the conversation created at
// *created only, or any when created is nil: another conversation at key
// is not found either. In a write transaction, nothing can replace the
// conversation before the transaction ends.
func liveGeneration(t tx, key chatmem.Key, now time.Time, created *time.Time) (chatmem.Conversation, error) {
	c, err := liveConversation(t, key, now)
	if err == nil && created != nil && !c.CreatedAt.Equal(*created) {
		return chatmem.Conversation{}, fmt.Errorf("conversation %s was created at %v, not %v: %w", key, c.CreatedAt, *created, chatmem.ErrNotFound)
	}
	return c, err
}
