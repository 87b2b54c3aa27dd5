package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UserSearcher = (*Store)(nil)

// userHash returns the SQL of the user index's hash of tenant and user
// (SQL expressions; an empty user has none): see
// migrations/0009_user_terms.sql.
func userHash(tenant, user string) string {
	return "CASE WHEN " + user + " <> '' THEN hashtextextended(" + tenant + " || '/' || " + user + ", 0) END"
}

// userSearchQueries are the statements of the user index
// (migrations/0009_user_terms.sql).
type userSearchQueries struct {
	postings, messagesAt, behind string
}

func buildUserSearchQueries(schema string) userSearchQueries {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return userSearchQueries{
		// postings reads, for each term $3[i], the user's ($1, $2)
		// postings in live ($4) conversations dated from the $5-th newest
		// on: the $5 newest, and any more of the $5-th's date, which
		// UserPostings orders by conversation ID and seq. Per term, two
		// backward scans of message_terms_user (newest date first) in the
		// index's own order, so without a sort: one that finds the $5-th
		// date (-infinity if there are fewer), one that reads the
		// postings from it on; each posting's conversation is probed
		// through conversations_num (the LIMIT 1, on a unique key, keeps
		// the planner from joining all of the user's conversations
		// instead). The rows are (i, conversation, seq, date), with one
		// (i, NULL, NULL, NULL) for a term with none.
		postings: q(`
SELECT t.ord, p.id, p.seq, p.at
FROM unnest($3::text[]) WITH ORDINALITY AS t (term, ord)
LEFT JOIN LATERAL (
    SELECT c.id, x.seq, x.at
    FROM {s}.message_terms x
    CROSS JOIN LATERAL (SELECT c.id FROM {s}.conversations c
                        WHERE c.num = x.conv AND c.tenant = $1 AND c.user_id = $2
                          AND (c.expires_at IS NULL OR c.expires_at > $4)
                        LIMIT 1) c
    WHERE x.usr = hashtextextended($1 || '/' || $2, 0) AND x.term = t.term
      AND x.at >= COALESCE((
          SELECT y.at
          FROM {s}.message_terms y
          CROSS JOIN LATERAL (SELECT 1 FROM {s}.conversations d
                              WHERE d.num = y.conv AND d.tenant = $1 AND d.user_id = $2
                                AND (d.expires_at IS NULL OR d.expires_at > $4)
                              LIMIT 1) d
          WHERE y.usr = hashtextextended($1 || '/' || $2, 0) AND y.term = t.term
          ORDER BY y.at DESC, y.conv DESC, y.seq DESC
          OFFSET $5::bigint - 1 LIMIT 1), '-infinity')
    ORDER BY x.at DESC, x.conv DESC, x.seq DESC) p ON true`),

		// behind lists the user's ($1, $2) live ($3) conversations whose
		// search index is behind their last message (see IndexPending),
		// from the partial index on the user's conversations.
		behind: q(`
SELECT id FROM {s}.conversations
WHERE tenant = $1 AND user_id = $2 AND (expires_at IS NULL OR expires_at > $3) AND terms_seq < last_seq`),

		// messagesAt reads the messages ($3[i], $4[i]) of the user's ($1,
		// $2) live ($5) conversations, probing the conversations' and the
		// messages' primary keys once per hit.
		messagesAt: q(`
SELECT h.conv, ` + messageColumns + `
FROM unnest($3::text[], $4::bigint[]) AS h (conv, seq)
CROSS JOIN LATERAL (SELECT 1 FROM {s}.conversations c
                    WHERE c.tenant = $1 AND c.id = h.conv AND c.user_id = $2
                      AND (c.expires_at IS NULL OR c.expires_at > $5)
                    LIMIT 1) c
JOIN {s}.messages m ON m.tenant = $1 AND m.conv_id = h.conv AND m.seq = h.seq`),
	}
}

// UserPostings returns, for each of terms, the newest messages of the
// user's live conversations indexed under it, at most limit (see
// chatmem.UserSearcher). It is one statement: per term, two backward
// scans of the partial index message_terms_user that stop after limit
// entries (plus those of the last one's date, and the postings of another
// user sharing the hash, or of conversations expired and not yet swept,
// which they pass over), so its cost follows len(terms) and limit, not the
// user's history. Before it, the index of any of the user's conversations
// that the worker has not caught up is brought up to date (indexUser). It
// is safe for concurrent use.
func (s *Store) UserPostings(ctx context.Context, user chatmem.Key, terms []string, limit int) ([][]chatmem.UserHit, error) {
	op := "postgres: user postings of " + user.String()
	if err := storekit.CheckUser(user); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	send := termsToSend(terms)
	out := make([][]chatmem.UserHit, len(terms))
	for i := range out {
		out[i] = []chatmem.UserHit{}
	}
	if len(terms) == 0 {
		return out, nil
	}
	if err := s.indexUser(ctx, user); err != nil {
		return nil, wrap(ctx, op, err)
	}
	rows, err := s.pool.Query(ctx, s.sq.postings, user.Tenant, user.ID, send, s.now(), limit)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	defer rows.Close()
	var (
		ord  int64
		conv pgtype.Text
		seq  pgtype.Int8
		at   pgtype.Timestamptz
	)
	dates := make([][]time.Time, len(terms))
	for rows.Next() {
		if err := rows.Scan(&ord, &conv, &seq, &at); err != nil {
			return nil, wrap(ctx, op, err)
		}
		if seq.Valid {
			out[ord-1] = append(out[ord-1], chatmem.UserHit{Conversation: conv.String, Seq: seq.Int64})
			dates[ord-1] = append(dates[ord-1], at.Time)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	// The rows of a date come ordered by conversation number, not ID; and
	// the last date's may be more than limit allows.
	for i := range out {
		out[i] = newestHits(out[i], dates[i], limit)
	}
	return out, nil
}

// UserMessagesAt returns the messages named by hits that belong to the
// user's live conversations, ordered by conversation ID and seq, each once
// (see chatmem.UserSearcher). It is one statement probing two primary keys
// per hit. It is safe for concurrent use.
func (s *Store) UserMessagesAt(ctx context.Context, user chatmem.Key, hits []chatmem.UserHit) ([]chatmem.UserMessage, error) {
	op := "postgres: user messages of " + user.String()
	if err := storekit.CheckUser(user); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	want := slices.Clone(hits)
	slices.SortFunc(want, compareHits)
	want = slices.Compact(want)
	convs, seqs := make([]string, 0, len(want)), make([]int64, 0, len(want))
	for _, h := range want {
		if storableText("conversation", h.Conversation) == nil {
			convs, seqs = append(convs, h.Conversation), append(seqs, h.Seq)
		}
	}
	out := []chatmem.UserMessage{}
	if len(convs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.sq.messagesAt, user.Tenant, user.ID, convs, seqs, s.now())
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	defer rows.Close()
	var r messageRow
	dest := append([]any{new(string)}, r.dest()...)
	for rows.Next() {
		r.m = chatmem.Message{}
		if err := rows.Scan(dest...); err != nil {
			return nil, wrap(ctx, op, err)
		}
		m, err := r.message()
		if err != nil {
			return nil, wrap(ctx, op, err)
		}
		out = append(out, chatmem.UserMessage{Conversation: *dest[0].(*string), Message: m})
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	slices.SortFunc(out, func(a, b chatmem.UserMessage) int {
		return compareHits(chatmem.UserHit{Conversation: a.Conversation, Seq: a.Seq}, chatmem.UserHit{Conversation: b.Conversation, Seq: b.Seq})
	})
	return out, nil
}

// newestHits orders hits, dated dates, newest first (by date, then
// conversation ID, then seq) and returns at most limit of them.
func newestHits(hits []chatmem.UserHit, dates []time.Time, limit int) []chatmem.UserHit {
	order := make([]int, len(hits))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := dates[b].Compare(dates[a]); c != 0 {
			return c
		}
		return compareHits(hits[b], hits[a])
	})
	out := make([]chatmem.UserHit, 0, min(limit, len(hits)))
	for _, i := range order[:min(limit, len(order))] {
		out = append(out, hits[i])
	}
	return out
}

// compareHits orders hits by conversation ID, then seq.
func compareHits(a, b chatmem.UserHit) int {
	return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Seq, b.Seq))
}

// indexUser brings the search index of every live conversation of the
// user up to its last message (IndexPending), so that UserPostings finds
// every message appended before it was called: one statement when none
// is behind, which the worker's IndexPending calls keep the usual case.
func (s *Store) indexUser(ctx context.Context, user chatmem.Key) error {
	rows, err := s.pool.Query(ctx, s.sq.behind, user.Tenant, user.ID, s.now())
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, id := range ids {
		err := s.IndexPending(ctx, chatmem.Key{Tenant: user.Tenant, ID: id})
		if err != nil && !errors.Is(err, chatmem.ErrNotFound) { // gone since: nothing to find
			return err
		}
	}
	return nil
}
