package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
)

// backfillBatch is how many messages one backfill transaction indexes.
const backfillBatch = 1000

// backfillQueries are backfill's statements with the schema filled in. They
// run when a store opens, so they are built there rather than kept in
// queries.
type backfillQueries struct {
	next, pending, lockConversation, messages, insert, advance, finish string
}

func buildBackfillQueries(schema string) backfillQueries {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return backfillQueries{
		// next takes the first conversation left to index, waiting for a
		// process indexing it to finish its batch: the row then shows that
		// process's progress (or, deleted, is skipped).
		next: q(`
SELECT tenant, conv_id, done, upto FROM {s}.terms_backfill
ORDER BY tenant, conv_id
LIMIT 1
FOR UPDATE`),
		pending: q(`SELECT EXISTS (SELECT 1 FROM {s}.terms_backfill)`),
		// lockConversation locks the conversation as appends do, expired
		// or not, so that no Delete, Sweep or restarting append runs
		// between reading its messages and writing their postings.
		lockConversation: q(`
SELECT num FROM {s}.conversations WHERE tenant = $1 AND id = $2 FOR NO KEY UPDATE`),
		messages: q(`
SELECT ` + messageColumns + `
FROM {s}.messages m
WHERE m.tenant = $1 AND m.conv_id = $2 AND m.seq > $3 AND m.seq <= $4
ORDER BY m.seq
LIMIT $5`),
		// A message appended after the migration (the conversation deleted
		// and started again since) already has its postings: the same ones.
		insert: q(`
INSERT INTO {s}.message_terms (conv, term, seq)
SELECT $1, u.term, u.seq FROM unnest($2::text[], $3::bigint[]) AS u (term, seq)
ON CONFLICT DO NOTHING`),
		advance: q(`UPDATE {s}.terms_backfill SET done = $3 WHERE tenant = $1 AND conv_id = $2`),
		finish:  q(`DELETE FROM {s}.terms_backfill WHERE tenant = $1 AND conv_id = $2`),
	}
}

// backfill indexes the messages stored before migration 0003 created
// message_terms, as listed in terms_backfill, in transactions of up to
// backfillBatch messages; each records its progress with its postings, so
// an interrupted backfill resumes where it stopped, and processes opening
// the store together share the work. On a database that needs none it is
// one query. It returns when every message is indexed, so a store that
// opened answers Postings for all of its history.
func (s *Store) backfill(ctx context.Context) error {
	bq := buildBackfillQueries(s.schema)
	for {
		more, err := s.backfillStep(ctx, bq)
		if err != nil || !more {
			return err
		}
	}
}

// backfillStep indexes the next batch of terms_backfill's first
// conversation, and reports whether any may be left.
func (s *Store) backfillStep(ctx context.Context, bq backfillQueries) (more bool, _ error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var tenant, id string
		var done, upto int64
		err := tx.QueryRow(ctx, bq.next).Scan(&tenant, &id, &done, &upto)
		if errors.Is(err, pgx.ErrNoRows) {
			// None, or the row waited for was deleted: ask again.
			return tx.QueryRow(ctx, bq.pending).Scan(&more)
		}
		if err != nil {
			return err
		}
		more = true
		var num int64
		err = tx.QueryRow(ctx, bq.lockConversation, tenant, id).Scan(&num)
		if errors.Is(err, pgx.ErrNoRows) {
			_, err = tx.Exec(ctx, bq.finish, tenant, id) // deleted since: nothing to index
			return err
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, bq.messages, tenant, id, done, upto, backfillBatch)
		if err != nil {
			return err
		}
		msgs, err := scanMessages(rows)
		if err != nil {
			return err
		}
		var terms []string
		var seqs []int64
		for _, m := range msgs {
			for _, t := range chatmem.IndexTerms(m) {
				terms, seqs = append(terms, t), append(seqs, m.Seq)
			}
		}
		if len(terms) > 0 {
			if _, err := tx.Exec(ctx, bq.insert, num, terms, seqs); err != nil {
				return err
			}
		}
		if len(msgs) < backfillBatch || msgs[len(msgs)-1].Seq >= upto {
			_, err = tx.Exec(ctx, bq.finish, tenant, id)
		} else {
			_, err = tx.Exec(ctx, bq.advance, tenant, id, msgs[len(msgs)-1].Seq)
		}
		return err
	})
	return more, err
}
