package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// The summary and the facts are written conditionally on the
// conversation's generation by PutSummaryOf and SetFactsOf.
var _ chatmem.GenerationWriter = (*Store)(nil)

// Summary returns the conversation's summary; see chatmem.SummaryStore. It
// wraps chatmem.ErrNotFound if the conversation does not exist or has no
// summary yet.
func (s *Store) Summary(ctx context.Context, key chatmem.Key) (chatmem.Summary, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return chatmem.Summary{}, err
	}
	defer s.mu.RUnlock()
	if c.summary.CoversSeq == 0 {
		return chatmem.Summary{}, fmt.Errorf("%w: conversation %s has no summary", chatmem.ErrNotFound, key)
	}
	return c.summary, nil
}

// PutSummary stores sum if the stored summary covers exactly prev; see
// chatmem.SummaryStore. Errors come in this order: ErrInvalid for what
// sum and prev are wrong about on their own (an empty Text, CoversSeq not
// after prev), ErrNotFound, ErrConflict, and last ErrInvalid for a CoversSeq
// past LastSeq. A zero CreatedAt is set to the time of the call.
func (s *Store) PutSummary(ctx context.Context, key chatmem.Key, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, nil, sum, prev)
}

// PutSummaryOf is PutSummary if the conversation was created at created,
// checked under the same lock as the write; see chatmem.GenerationWriter.
// Another conversation at key (or none) wraps chatmem.ErrNotFound, after
// the errors of what sum and prev are wrong about on their own.
func (s *Store) PutSummaryOf(ctx context.Context, key chatmem.Key, created time.Time, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, &created, sum, prev)
}

// putSummary is PutSummary, and PutSummaryOf when created is not nil.
func (s *Store) putSummary(ctx context.Context, key chatmem.Key, created *time.Time, sum chatmem.Summary, prev int64) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.CheckSummary(sum, prev); err != nil {
		return err
	}
	if sum.CreatedAt.IsZero() {
		sum.CreatedAt = time.Now()
	}
	c, err := s.getOfForWrite(ctx, key, created)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if c.summary.CoversSeq != prev {
		return fmt.Errorf("%w: the summary of %s covers seq %d, not %d", chatmem.ErrConflict, key, c.summary.CoversSeq, prev)
	}
	if err := storekit.CheckSummaryWithin(sum.CoversSeq, c.meta.LastSeq); err != nil {
		return fmt.Errorf("summary of %s: %w", key, err)
	}
	c.summary = sum
	return nil
}
