package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Recounter = (*Store)(nil)

var _ chatmem.SinceReader = (*Store)(nil)

// recountBatch is how many messages one UPDATE of Recount rewrites, so
// that no statement carries arrays of a million elements.
const recountBatch = 1000

// recountQueries are Recount's statements with the schema filled in. They
// run once per maintenance call, so they are built per call rather than
// kept in queries.
type recountQueries struct {
	systemSeqs, updateMessages, updateConversation string
}

func buildRecountQueries(schema string) recountQueries {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return recountQueries{
		// The system messages' seqs, from the partial index messages_system.
		systemSeqs: q(`
SELECT seq FROM {s}.messages
WHERE tenant = $1 AND conv_id = $2 AND role = 'system'
ORDER BY seq`),
		// One range of the primary key, seqs $5..$5+len($3)-1, each row
		// taking its values from the arrays by its position: no join for
		// the planner to get wrong.
		updateMessages: q(`
UPDATE {s}.messages
SET tokens = ($3::bigint[])[seq - $5 + 1], cum = ($4::bigint[])[seq - $5 + 1]
WHERE tenant = $1 AND conv_id = $2 AND seq >= $5 AND seq < $5 + cardinality($3::bigint[])`),
		// updated_at and expires_at stay: a recount is not activity.
		updateConversation: q(`
UPDATE {s}.conversations SET tokenizer = $3, tokens = $4, system_tokens = $5
WHERE tenant = $1 AND id = $2`),
	}
}

// Recount replaces the conversation's token counts, the cum of every
// message and the conversation's totals and tokenizer in one transaction,
// under the lock on the conversation's row that appends take too (see
// chatmem.Recounter): appends to the conversation wait for it, readers see
// the counts before it until it commits. The messages are rewritten in
// UPDATEs of 1000 rows, about a second per 100,000 messages. It returns chatmem.ErrNotFound,
// chatmem.ErrConflict if the conversation is no longer at lastSeq, and
// wraps chatmem.ErrInvalid for bad arguments (a tokenizer name with NUL
// included). Nothing is written on error.
func (s *Store) Recount(ctx context.Context, key chatmem.Key, tokenizer string, lastSeq int64, tokens []int) error {
	op := "postgres: recount " + key.String()
	if err := key.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := chatmem.ValidateRecount(tokenizer, lastSeq, tokens); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := storableText("tokenizer", tokenizer); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	rq := buildRecountQueries(s.schema)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var last int64
		if err := tx.QueryRow(ctx, s.q.lockLive, key.Tenant, key.ID, s.now(), nil).Scan(&last); err != nil {
			return err // pgx.ErrNoRows: wrap makes it ErrNotFound
		}
		if last != lastSeq {
			return fmt.Errorf("%w: conversation is at seq %d, not %d", chatmem.ErrConflict, last, lastSeq)
		}
		rows, err := tx.Query(ctx, rq.systemSeqs, key.Tenant, key.ID)
		if err != nil {
			return err
		}
		system := make(map[int64]bool)
		var seq int64
		if _, err := pgx.ForEachRow(rows, []any{&seq}, func() error { system[seq] = true; return nil }); err != nil {
			return err
		}

		counts := make([]int64, len(tokens))
		cum := make([]int64, len(tokens)) // non-system tokens up to and including each message
		var total, systemTotal int64
		for i, n := range tokens {
			counts[i] = int64(n)
			if system[int64(i+1)] {
				systemTotal += int64(n)
			} else {
				total += int64(n)
			}
			cum[i] = total
		}
		for start := 0; start < len(tokens); start += recountBatch {
			end := min(start+recountBatch, len(tokens))
			tag, err := tx.Exec(ctx, rq.updateMessages, key.Tenant, key.ID, counts[start:end], cum[start:end], start+1)
			if err != nil {
				return fmt.Errorf("messages %d..%d: %w", start+1, end, err)
			}
			if tag.RowsAffected() != int64(end-start) {
				return fmt.Errorf("messages %d..%d: %d of %d rows found", start+1, end, tag.RowsAffected(), end-start)
			}
		}
		_, err = tx.Exec(ctx, rq.updateConversation, key.Tenant, key.ID, tokenizer, total, systemTotal)
		return err
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}
