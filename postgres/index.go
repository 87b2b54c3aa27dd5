package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
)

var _ chatmem.IndexCatcher = (*Store)(nil)

// indexBatch is how many messages one IndexPending step indexes.
const indexBatch = 1000

// IndexPending indexes for search the conversation's messages past its
// index's watermark (conversations.terms_seq, migration 0013), up to its
// last seq, indexBatch messages per step: each step reads the row and the
// messages in one statement (indexRead), computes their terms
// (chatmem.IndexTerms) with no lock held, and writes the postings and the
// new watermark in one statement (indexWrite), which writes nothing if
// the conversation was deleted or started afresh meanwhile (its messages
// are then others: IndexPending stops, and the new conversation's index
// starts at 0). It indexes up to the last seq its first step read;
// messages appended since may be left for the next call. It returns
// chatmem.ErrNotFound for a conversation that does not exist or has
// expired. It is safe for concurrent use: postings written twice are kept
// once. See chatmem.IndexCatcher.
func (s *Store) IndexPending(ctx context.Context, key chatmem.Key) error {
	op := "postgres: index " + key.String()
	if err := key.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	for {
		done, err := s.indexStep(ctx, key)
		if err != nil {
			return wrap(ctx, op, err)
		}
		if done {
			return nil
		}
	}
}

// indexStep indexes the next batch of the conversation's messages past the
// watermark, and reports whether none is left (or the conversation is
// another now).
func (s *Store) indexStep(ctx context.Context, key chatmem.Key) (done bool, _ error) {
	rows, err := s.pool.Query(ctx, s.q.indexRead, key.Tenant, key.ID, s.now(), indexBatch)
	if err != nil {
		return false, err
	}
	var (
		created  time.Time
		conv     int64 // the row's num
		mark, hi int64
		rev      int64 // the row's revision
		r        nullMessageRow
		found    bool
		terms    []string
		seqs     []int64
		ats      []time.Time
		last     int64
		read     int // messages
	)
	dest := append([]any{&conv, &created, &mark, &hi, &rev}, r.dest()...)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return false, err
		}
		found = true
		m, ok, err := r.message()
		if err != nil {
			rows.Close()
			return false, err
		}
		if !ok {
			continue
		}
		last, read = m.Seq, read+1
		for _, t := range chatmem.IndexTerms(m) {
			if storableText("term", t) != nil {
				continue // text cannot hold it; Postings never asks for it
			}
			terms, seqs, ats = append(terms, t), append(seqs, m.Seq), append(ats, m.CreatedAt)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	if !found {
		return false, pgx.ErrNoRows // wrap makes it chatmem.ErrNotFound
	}
	if last == 0 {
		return true, nil // nothing past the watermark
	}
	var num int64
	err = s.pool.QueryRow(ctx, s.q.indexWrite, key.Tenant, key.ID, created, last, terms, seqs, ats, conv, rev).Scan(&num)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil // deleted, started afresh or rewritten since the read
	}
	if err != nil {
		return false, err
	}
	// A short batch was the last (so a gap in the seqs, which appends do
	// not leave, could not keep IndexPending going round).
	return last >= hi || read < indexBatch, nil
}
