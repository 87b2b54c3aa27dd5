package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.RevisionRewinder = (*Store)(nil)

// rewindQueries are Rewind's statements; but for lock, each takes named
// arguments: @tenant, @id (the conversation's), @to (toSeq), @num (the
// conversation's number) and @now.
// They run once per maintenance call, so they are built per call, as
// Recount's are.
type rewindQueries struct {
	lock, update string
	deletes      []string
}

func buildRewindQueries(schema string) rewindQueries {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return rewindQueries{
		lock: q(`
SELECT last_seq, num, revision FROM {s}.conversations
WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)
FOR NO KEY UPDATE`),
		// The totals from the rows of the messages kept: the last one's
		// cum and turn, the system messages' tokens.
		update: q(`
UPDATE {s}.conversations SET last_seq = @to, updated_at = @now, revision = revision + 1,
    tokens = COALESCE((SELECT cum FROM {s}.messages WHERE tenant = @tenant AND conv_id = @id AND seq = @to), 0),
    turns = COALESCE((SELECT turn FROM {s}.messages WHERE tenant = @tenant AND conv_id = @id AND seq = @to), 0),
    system_tokens = system_tokens - COALESCE((SELECT sum(tokens) FROM {s}.messages
        WHERE tenant = @tenant AND conv_id = @id AND role = 'system' AND seq > @to), 0),
    fact_seq = LEAST(fact_seq, @to), terms_seq = LEAST(terms_seq, @to)
WHERE tenant = @tenant AND id = @id AND num = @num
RETURNING tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, COALESCE(user_id, ''), revision`),
		deletes: []string{
			q(`DELETE FROM {s}.messages WHERE tenant = @tenant AND conv_id = @id AND seq > @to`),
			// An append's key goes if the append stored any rewound message.
			q(`DELETE FROM {s}.idempotency WHERE tenant = @tenant AND conv_id = @id AND first_seq + count - 1 > @to`),
			q(`DELETE FROM {s}.summaries WHERE tenant = @tenant AND conv_id = @id AND covers_seq > @to`),
			// The values stated by rewound messages leave the facts'
			// histories; of a key whose current value went, the newest
			// value left is current.
			q(`DELETE FROM {s}.facts WHERE tenant = @tenant AND conv_id = @id AND source_seq > @to`),
			q(`
UPDATE {s}.facts f SET current = true
WHERE f.tenant = @tenant AND f.conv_id = @id AND NOT f.current
  AND f.version = (SELECT max(g.version) FROM {s}.facts g WHERE g.tenant = @tenant AND g.conv_id = @id AND g.key = f.key)`),
			// So do the values of the user's facts taken from them.
			q(`
DELETE FROM {s}.user_facts WHERE tenant = @tenant AND conv_id = @id AND source_seq > @to
  AND user_id = (SELECT user_id FROM {s}.conversations WHERE tenant = @tenant AND id = @id)`),
			q(`
UPDATE {s}.user_facts f SET current = true
WHERE f.tenant = @tenant AND NOT f.current
  AND f.user_id = (SELECT user_id FROM {s}.conversations WHERE tenant = @tenant AND id = @id)
  AND f.version = (SELECT max(g.version) FROM {s}.user_facts g
                   WHERE g.tenant = @tenant AND g.user_id = f.user_id AND g.key = f.key)`),
			// The conversation's and its user's postings are the same rows.
			q(`DELETE FROM {s}.message_terms WHERE conv = @num AND seq > @to`),
			q(`DELETE FROM {s}.message_vectors WHERE conv = @num AND seq > @to`),
			q(`UPDATE {s}.terms_backfill SET upto = LEAST(upto, @to), done = LEAST(done, @to) WHERE tenant = @tenant AND conv_id = @id`),
		},
	}
}

// Rewind deletes the conversation's messages after toSeq with what was
// derived from them, in one transaction that holds the conversation's row
// lock (appends wait for it); see chatmem.Rewinder.
func (s *Store) Rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64) (chatmem.Conversation, error) {
	return s.rewind(ctx, key, toSeq, expectedLastSeq, nil)
}

// RewindRevision is Rewind that also checks the conversation's Revision;
// see chatmem.RevisionRewinder.
func (s *Store) RewindRevision(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq, expectedRevision int64) (chatmem.Conversation, error) {
	if err := storekit.CheckRewindRevision(expectedRevision); err != nil {
		return chatmem.Conversation{}, err
	}
	return s.rewind(ctx, key, toSeq, expectedLastSeq, &expectedRevision)
}

func (s *Store) rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64, expectedRevision *int64) (chatmem.Conversation, error) {
	op := "postgres: rewind " + key.String()
	if err := storekit.CheckRewind(key, toSeq, expectedLastSeq); err != nil {
		return chatmem.Conversation{}, err
	}
	rq := buildRewindQueries(s.schema)
	now := s.now()
	var conv chatmem.Conversation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var last, num, rev int64
		if err := tx.QueryRow(ctx, rq.lock, key.Tenant, key.ID, now).Scan(&last, &num, &rev); err != nil {
			return err // pgx.ErrNoRows: wrap makes it ErrNotFound
		}
		if err := storekit.RewindConflict(key, last, expectedLastSeq); err != nil {
			return err
		}
		if expectedRevision != nil && rev != *expectedRevision {
			return storekit.RevisionConflict(key, rev, *expectedRevision)
		}
		var err error
		if toSeq == last {
			conv, err = scanConversation(key, tx.QueryRow(ctx, s.q.conversation, key.Tenant, key.ID, now))
			return err
		}
		// The totals read the kept messages before the rewound ones go.
		args := pgx.NamedArgs{"tenant": key.Tenant, "id": key.ID, "to": toSeq, "num": num, "now": now}
		if conv, err = scanConversation(key, tx.QueryRow(ctx, rq.update, args)); err != nil {
			return err
		}
		for _, d := range rq.deletes {
			if _, err := tx.Exec(ctx, d, args); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return chatmem.Conversation{}, wrap(ctx, op, err)
	}
	return conv, nil
}

// scanConversation reads the columns s.q.conversation reads into a
// Conversation of key.
func scanConversation(key chatmem.Key, row pgx.Row) (chatmem.Conversation, error) {
	c := chatmem.Conversation{Key: key}
	var expires *time.Time
	if err := row.Scan(&c.Tokenizer, &c.LastSeq, &c.Tokens, &c.SystemTokens, &c.Turns, &c.CreatedAt, &c.UpdatedAt, &expires, &c.User, &c.Revision); err != nil {
		return chatmem.Conversation{}, err
	}
	if expires != nil {
		c.ExpiresAt = *expires
	}
	return utcConversation(c), nil
}
