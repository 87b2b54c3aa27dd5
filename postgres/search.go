package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.Searcher = (*Store)(nil)

// Postings returns, for each of terms, the seqs of the conversation's
// messages indexed under it with Seq < before, newest first, at most limit
// of them (see chatmem.Searcher). It is one statement: for each term, a
// backward range scan of message_terms' primary key that stops after limit
// entries, so its cost follows len(terms) and limit, not the history. The
// statement also returns the index's watermark: when messages before
// before are past it (the worker has not indexed them yet), Postings
// indexes them first (IndexPending) and reads again. It wraps
// chatmem.ErrNotFound if the conversation does not exist or has expired.
// It is safe for concurrent use.
func (s *Store) Postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, error) {
	op := "postgres: postings of " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	send := termsToSend(terms)
	if len(terms) == 0 {
		if err := s.live(ctx, op, key); err != nil {
			return nil, err
		}
		return [][]int64{}, nil
	}

	// What must be indexed: the messages before before, as far as the
	// conversation reached at the first read. Appends made since need not
	// be waited for.
	need := int64(-1)
	for range 3 {
		out, mark, last, err := s.postings(ctx, key, send, before, limit)
		if err != nil {
			return nil, wrap(ctx, op, err)
		}
		if need < 0 {
			need = min(last, before-1)
		}
		if mark >= need {
			return out, nil
		}
		if err := s.IndexPending(ctx, key); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	return nil, fmt.Errorf("%s: the search index is still behind after catching up", op)
}

// postings runs the postings statement, and returns with its answer the
// index's watermark and the conversation's last seq, of the same
// snapshot. A missing conversation is pgx.ErrNoRows.
func (s *Store) postings(ctx context.Context, key chatmem.Key, send []string, before int64, limit int) (_ [][]int64, mark, last int64, _ error) {
	rows, err := s.pool.Query(ctx, s.q.postings, key.Tenant, key.ID, s.now(), send, before, limit)
	if err != nil {
		return nil, 0, 0, err
	}
	defer rows.Close()
	out := make([][]int64, len(send))
	found := false
	var ord int64
	var seq pgtype.Int8 // not *int64: no allocation per row
	for rows.Next() {
		if err := rows.Scan(&ord, &seq, &mark, &last); err != nil {
			return nil, 0, 0, err
		}
		found = true // the conversation is live: every term has a row
		if seq.Valid {
			out[ord-1] = append(out[ord-1], seq.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, 0, err
	}
	if !found {
		return nil, 0, 0, pgx.ErrNoRows
	}
	// Each term's rows come from its own LIMITed scan, newest first; SQL
	// does not promise the join keeps that order, so make sure (sorting
	// sorted input is linear).
	for _, p := range out {
		if !slices.IsSortedFunc(p, descending) {
			slices.SortFunc(p, descending)
		}
	}
	return out, mark, last, nil
}

func descending(a, b int64) int { return cmp.Compare(b, a) }

// MessagesAt returns the conversation's messages with the given seqs,
// oldest first, each once; seqs with no message are skipped (see
// chatmem.Searcher). It is one statement probing the primary key once per
// seq. It wraps chatmem.ErrNotFound if the conversation does not exist or
// has expired. It is safe for concurrent use.
func (s *Store) MessagesAt(ctx context.Context, key chatmem.Key, seqs []int64) ([]chatmem.Message, error) {
	op := "postgres: messages of " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(seqs) == 0 {
		return s.none(ctx, op, key)
	}
	return s.read(ctx, op, key, s.q.messagesAt, key.Tenant, key.ID, s.now(), seqs)
}

// termsToSend returns the query's terms as Postings and UserPostings send
// them, once storekit.CheckPostings has checked them: a term that text
// cannot hold (NUL, invalid UTF-8) was never indexed, so it is sent as ""
// and has no postings.
func termsToSend(terms []string) []string {
	send := make([]string, len(terms))
	for i, t := range terms {
		if storableText("term", t) == nil {
			send[i] = t
		}
	}
	return send
}
